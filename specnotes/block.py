"""Block verification (Sun et al., "Block Verification Accelerates Speculative Decoding", ICLR 2025) on the
toy: its round, its exact output distribution by enumeration, and its expected accepted tokens.

The token-wise rule judges draft i on its own and stops at the first rejection. The block rule carries a
weight w_i = min(1, w_{i-1} p(x_i)/q(x_i)) along the draft, so a draft the target likes more than the
drafter did (p > q) banks credit that a later, over-proposed draft can spend, and it keeps the longest
prefix whose coin passes. Both are exact; block keeps at least as many tokens in expectation.
The vectorised rule is specnotes.rules.verify_block; the engine runs its torch twin with rule="block".
Notebook 03 proves it by enumeration, 05 counts what it adds to the speedup formula.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import product

import numpy as np

from specnotes import checks, rules, toy

RULES = ("exact", "block")  # the two exact rules the enumeration knows: token-wise and block
PLANTED = "block-first-failure"  # the block rule's coins read as the token-wise loop does: not exact


def toy_round(P, Q, prev, k, rng, longest: bool = True):
    """One round of block verification for m toy sequences, like toy.exact_round (one uniform per draft
    token, one per judged position, one for the token after)."""
    m = len(prev)
    u = rng.random((m, 2 * k + 1))
    drafted, ctx = toy.draft(Q, prev, k, u[:, :k])
    n_acc, nxt = rules.verify_block(P[ctx], Q[ctx[:, :k]], drafted, u[:, k:2 * k], u[:, 2 * k],
                                    longest)
    return (*toy.assemble(drafted, n_acc, nxt), n_acc)


def planted_round(P, Q, prev, k, rng):
    """The block rule with the planted mistake (PLANTED): it stops at the first failing coin."""
    return toy_round(P, Q, prev, k, rng, longest=False)


def _min1(x):
    return x if x < 1 else type(x)(1)


def _outcomes(p, q, drafted, rule):
    """[(kept, probability, next-token distribution)] of one round given the draft, in exact arithmetic
    when p and q hold Fractions. p: k+1 rows, q: k rows (plain lists)."""
    k = len(drafted)
    ratio = [p[i][x] / q[i][x] for i, x in enumerate(drafted)]  # a drawn token has q(x) > 0
    zero = p[0][0] * 0
    if rule == "exact":  # token-wise: keep i drafts with prob prod_{j<i} a_j * (1 - a_i)
        a, reach, out = [_min1(r) for r in ratio], zero + 1, []
        for i in range(k):
            out.append((i, reach * (1 - a[i]), _residual(p[i], q[i], zero + 1)))
            reach *= a[i]
        return out + [(k, reach, p[k])]
    w, h = [], []
    for r in ratio:
        w.append(_min1((w[-1] if w else zero + 1) * r))
    for i in range(1, k):  # h_i at the position after draft i (rows i of p and q)
        mass = sum(max(w[i - 1] * pp - qq, zero) for pp, qq in zip(p[i], q[i], strict=True))
        den = mass + 1 - w[i - 1]
        h.append(mass / den if den > 0 else zero)
    h.append(w[k - 1])
    if rule == PLANTED:  # kept = i: the first i coins pass and coin i+1 fails
        out, reach = [], zero + 1
        for i in range(k):
            out.append((i, reach * (1 - h[i]), _residual(p[i], q[i], w[i - 1] if i else zero + 1)))
            reach *= h[i]
        return out + [(k, reach, p[k])]
    out, later_fail = [], zero + 1  # kept = i: h_i passes and every later h_j fails
    for i in range(k, 0, -1):
        weight = w[i - 1]
        out.append((i, h[i - 1] * later_fail, p[k] if i == k else _residual(p[i], q[i], weight)))
        later_fail *= 1 - h[i - 1]
    return out + [(0, later_fail, _residual(p[0], q[0], zero + 1))]


def _residual(p_row, q_row, weight):
    raw = [max(weight * pp - qq, pp * 0) for pp, qq in zip(p_row, q_row, strict=True)]
    mass = sum(raw)
    return [r / mass for r in raw] if mass > 0 else list(p_row)


def sequence_distribution(p_of, q_of, vocab: int, k: int, rule: str = "block") -> dict:
    """{sequence of k+1 tokens: probability} that one round emits, its output completed to k+1 tokens by
    the target's own sampling. p_of(prefix) and q_of(prefix) give the target's and the drafter's
    next-token distributions after a tuple of tokens (any context dependence; Fractions stay exact).
    The rule is exact when this equals the target's own distribution over k+1 tokens
    (target_sequences)."""
    if rule not in (*RULES, PLANTED):
        raise ValueError(f"rule must be one of {(*RULES, PLANTED)}, got {rule!r}")
    k, vocab = checks.whole(k, "k", scalar=True), checks.whole(vocab, "vocab", low=1, scalar=True)
    dist: dict = {}
    for drafted in product(range(vocab), repeat=k):
        q = [list(q_of(drafted[:i])) for i in range(k)]
        chance = np.prod([q[i][x] for i, x in enumerate(drafted)])
        if chance == 0:
            continue
        p = [list(p_of(drafted[:i])) for i in range(k + 1)]
        for kept, prob, nxt in _outcomes(p, q, drafted, rule):
            for y, py in enumerate(nxt):
                if prob * py != 0:
                    _complete(dist, p_of, drafted[:kept] + (y,), chance * prob * py, k + 1)
    return dist


def _complete(dist, p_of, seq, prob, length):
    if len(seq) == length:
        dist[seq] = dist.get(seq, 0) + prob
        return
    for y, py in enumerate(p_of(seq)):
        if py != 0:
            _complete(dist, p_of, seq + (y,), prob * py, length)


def target_sequences(p_of, vocab: int, length: int) -> dict:
    """{sequence: probability} of `length` tokens drawn from the target alone."""
    dist: dict = {}
    _complete(dist, p_of, (), p_of(())[0] * 0 + 1, checks.whole(length, "length", scalar=True))
    return dist


def bigram_functions(P, Q, exact: bool = False):
    """(p_of, q_of) for a toy pair: the next-token rows after a prefix, from its last token (BOS
    before any). exact=True turns the rows into Fractions, for enumerations with no rounding at all."""
    P, Q = toy.bigram(P, "P"), toy.bigram(Q, "Q", np.shape(P)[0])
    if exact:
        P, Q = ([[Fraction(x).limit_denominator(10**12) for x in row] for row in T] for T in (P, Q))
        P = [[x / sum(row) for x in row] for row in P]
        Q = [[x / sum(row) for x in row] for row in Q]
    return ((lambda s: P[s[-1] if s else toy.BOS]), (lambda s: Q[s[-1] if s else toy.BOS]))


def argmax_table(Q) -> np.ndarray:
    """(V, V) the greedy drafter of a toy draft Q: each row a point mass at Q's most likely token."""
    Q = toy.bigram(Q, "Q")
    return np.eye(Q.shape[1])[Q.argmax(axis=1)]


def expected_accepted(P, Q, k: int, rule: str = "block", context=None, one_hot: bool = False) -> float:
    """Expected drafts kept per round on a toy pair, exactly (every draft of length k enumerated, float64),
    averaged over the token before the round: `context` (V,) or the target's long-run frequencies.
    one_hot: the drafts are drawn from Q but verified as point masses (q dropped), as engines that pass no
    draft probabilities do; Q = argmax_table(Q) is greedy drafting."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    P, Q = toy.bigram(P, "P"), toy.bigram(Q, "Q", np.shape(P)[0])
    V, k = P.shape[0], checks.whole(k, "k", high=10, scalar=True)
    if V ** (k + 1) > 5_000_000:
        raise ValueError(f"V**(k+1) = {V ** (k + 1)} drafts and contexts are too many to enumerate")
    weights = toy.stationary(P) if context is None else checks.distribution(context, "context")
    grid = np.indices((V,) * (k + 1)).reshape(k + 1, -1).T  # (V^(k+1), k+1): the context, then k drafts
    ctx, drafted = grid, grid[:, 1:]
    cols = np.arange(k)
    q_x = Q[ctx[:, cols], drafted]
    chance = np.prod(q_x, axis=1) * weights[ctx[:, 0]]
    ratio = P[ctx[:, cols], drafted] / (1 if one_hot else np.where(q_x > 0, q_x, 1))
    q_rows = np.eye(V)[drafted] if one_hot else Q[ctx[:, :k]]
    if rule == "exact":
        kept = np.cumprod(np.minimum(ratio, 1), axis=1).sum(axis=1)  # sum_i P(first i all kept)
    else:
        kept = rules.block_expected_kept(
            rules.block_stop_probabilities(rules.block_weights(ratio), P[ctx], q_rows))
    return float((chance * kept).sum())


def kept_given_draft(p_rows, q_rows, drafted) -> tuple[float, float]:
    """(token-wise, block): the expected drafts kept under each rule, exactly, given one round's draft.
    p_rows (k+1, V) the target's processed distributions, q_rows (k, V) the drafter's, drafted (k,).
    Averaged over rounds whose drafts were sampled from q, each is an unbiased estimate of that rule's
    expected kept drafts, and the two share every draft: a paired comparison with little noise."""
    p_rows, q_rows = np.asarray(p_rows, dtype=np.float64), np.asarray(q_rows, dtype=np.float64)
    drafted = np.asarray(drafted, dtype=np.int64)
    k = len(drafted)
    if p_rows.shape[0] != k + 1 or q_rows.shape[0] != k:
        raise ValueError(f"p_rows needs k + 1 = {k + 1} rows and q_rows k = {k}, got {p_rows.shape[0]} and "
                         f"{q_rows.shape[0]}")
    cols = np.arange(k)
    ratio = p_rows[cols, drafted] / q_rows[cols, drafted]
    token_wise = float(np.cumprod(np.minimum(ratio, 1)).sum())
    h = rules.block_stop_probabilities(rules.block_weights(ratio[None]), p_rows[None], q_rows[None])
    return token_wise, float(rules.block_expected_kept(h)[0])
