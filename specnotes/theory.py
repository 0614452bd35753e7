"""The speedup math: expected tokens per target pass, speedup with draft cost c, the best k, acceptance rates.

One cost model, written once: a round that drafts k tokens yields E(alpha, k) tokens and costs k*c for
the drafting plus one verify pass, every cost in plain decode steps. `speedup` is that formula;
`predicted_speedup` is the same model with its parts measured (acceptance by draft position for each
draft length, each round's length, the verify cost at each width). Notebook 05 derives and explores
it; 06-08 (and serving, adaptive and live) compare measurements against it. Arguments broadcast (numpy).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from specnotes import checks


def expected_tokens(alpha, k):
    """Tokens per target pass with i.i.d. acceptance alpha: 1 + alpha + ... + alpha^k.

    Equal to (1 - alpha^(k+1)) / (1 - alpha), and exactly k + 1 at alpha = 1 (no 0/0)."""
    a, kk = checks.probability(alpha, "alpha"), checks.whole(k, "k")
    safe = np.where(a < 1, a, 0.5)
    closed = (1 - safe ** (kk + 1)) / (1 - safe)
    return np.where(a < 1, closed, kk + 1.0)[()]


def speedup(alpha, k, c, verify=1.0, c_pass=0.0):
    """Expected speedup over plain decoding: E(alpha, k) tokens per round over the round's cost,
    k*c + c_pass + verify plain decode steps.

    c is the draft cost per drafted token (a chain drafter runs once per token); c_pass the draft cost per
    round whatever k is (a parallel drafter's one pass guesses all k; a chain drafter's fixed cost per
    round). verify is the verify pass over k + 1 positions relative to one plain step: 1 (the default, the
    seed article's formula) on a GPU far below the ridge point; more on a CPU or at a large batch."""
    kk = checks.whole(k, "k")
    cost = (kk * checks.positive(c, "c", zero=True) + checks.positive(c_pass, "c_pass", zero=True)
            + checks.positive(verify, "verify (in plain steps)"))
    return (expected_tokens(alpha, kk) / cost)[()]


def best_k(alpha, c, k_max: int = 20, c_pass=0.0):
    """(k, speedup) maximizing speedup over k = 1..k_max; the smallest such k on ties. Broadcasts. With a
    per-round cost c_pass and c = 0 (a parallel drafter) a longer draft never costs more to draft, so the
    best k is the largest unless the verify pass grows."""
    kk = np.arange(1, checks.whole(k_max, "k_max", high=1000, scalar=True) + 1)
    a, cc, cp = np.broadcast_arrays(checks.probability(alpha, "alpha"), checks.positive(c, "c", zero=True),
                                    checks.positive(c_pass, "c_pass", zero=True))
    table = speedup(a[..., None], kk, cc[..., None], c_pass=cp[..., None])
    i = np.argmax(table, axis=-1)
    return (kk[i])[()], np.take_along_axis(table, i[..., None], axis=-1)[..., 0][()]


def alpha_needed(goal, k, c, verify=1.0, c_pass=0.0):
    """The smallest alpha at which speedup(alpha, k, c, verify, c_pass) reaches `goal`; nan where even
    alpha = 1 (every draft accepted, k + 1 tokens a round) falls short, so the round's cost, not the
    acceptance, is what stops it. Broadcasts. speedup rises with alpha, so it is found by bisection (50
    halvings: to 1e-15, far below any alpha a run can measure)."""
    g = np.asarray(checks.positive(goal, "goal (a speedup)"), dtype=np.float64)
    args = np.broadcast_arrays(g, np.asarray(checks.whole(k, "k")), np.asarray(checks.positive(
        c, "c", zero=True), dtype=np.float64), np.asarray(checks.positive(verify, "verify (in plain steps)"),
        dtype=np.float64), np.asarray(checks.positive(c_pass, "c_pass", zero=True), dtype=np.float64))
    g, kk, cc, vv, cp = args
    lo, hi = np.zeros(g.shape), np.ones(g.shape)
    for _ in range(50):
        mid = (lo + hi) / 2
        short = speedup(mid, kk, cc, vv, cp) < g
        lo, hi = np.where(short, mid, lo), np.where(short, hi, mid)
    reachable = speedup(np.ones(g.shape), kk, cc, vv, cp) >= g
    free = speedup(np.zeros(g.shape), kk, cc, vv, cp) >= g  # reached with no draft ever accepted
    return np.where(free, 0.0, np.where(reachable, hi, np.nan))[()]


def alpha_needed_best_k(goal, ks, c=0.0, verify=1.0, c_pass=0.0):
    """(alpha, k): over the draft lengths `ks` (a 1-D array, the last axis), the least alpha_needed and the
    k that needs it (the smallest such k on ties). verify may hold one cost per k (a measured curve at k + 1
    positions) on that same last axis. Where no k reaches the goal: alpha nan and k 0."""
    ks = np.asarray(checks.whole(ks, "ks"))
    if ks.ndim != 1 or ks.size == 0:
        raise ValueError(f"ks must be a 1-D array of draft lengths; got shape {ks.shape}")
    need = np.asarray(alpha_needed(goal, ks, c, verify, c_pass))
    none = np.isnan(need).all(axis=-1)
    i = np.argmin(np.where(np.isnan(need), np.inf, need), axis=-1)
    alpha = np.where(none, np.nan, np.take_along_axis(need, i[..., None], axis=-1)[..., 0])
    return alpha[()], np.where(none, 0, ks[i])[()]


def acceptance_rate(p, q):
    """alpha of the rejection rule: sum of min(p, q) over the last axis, = 1 - TV(p, q)."""
    p, q = checks.distribution(p, "p"), checks.distribution(q, "q")
    return np.minimum(p, q).sum(axis=-1)[()]


def match_acceptance_rate(p, q):
    """alpha of sample-and-match: the chance two independent draws agree, sum of p*q."""
    p, q = checks.distribution(p, "p"), checks.distribution(q, "q")
    return (p * q).sum(axis=-1)[()]


def expected_tokens_positional(alphas):
    """Tokens per pass when draft position i is accepted with its own rate: 1 + sum_i prod_{j<=i} alpha_j.

    alphas has shape (..., k), one rate per draft position (conditional on reaching it)."""
    a = np.asarray(checks.probability(alphas, "alphas (one acceptance rate per draft position)"))
    if a.ndim == 0 or a.shape[-1] == 0:
        raise ValueError("alphas needs one acceptance rate per draft position, shape (..., k)")
    return (1 + np.cumprod(a, axis=-1).sum(axis=-1))[()]


def pass_cost_break_even(position_alpha, alpha, c, verify=1.0):
    """When one pass for k guesses beats k cheap steps. For k = 1..K (K = len(position_alpha)): the
    per-round draft cost at which a parallel drafter, whose draft position i is accepted at
    position_alpha[i-1] (its later guesses do not see the earlier ones, so these fall faster), ties a
    chain drafter accepted at `alpha` at every position that pays c per drafted token. Both are verified
    by the same pass: verify in plain steps, a scalar or a curve indexed by width (verify[k + 1] prices
    a round of k). Below the returned cost the parallel drafter is faster; a value at or below 0 means no
    cost would make it so. At equal acceptance (position_alpha all alpha) the break-even is k*c."""
    pa = np.asarray(checks.probability(position_alpha, "position_alpha")).reshape(-1)
    if pa.size == 0:
        raise ValueError("position_alpha needs one acceptance rate per draft position")
    ks = np.arange(1, pa.size + 1)
    v = np.asarray(checks.positive(verify, "verify (in plain steps)", zero=True), dtype=np.float64)
    if v.ndim:  # a curve indexed by width: verify[0], a pass over nothing, is 0 and never read
        if v.size < pa.size + 2:
            raise ValueError(f"verify: a curve indexed by width needs {pa.size + 2} entries (verify[k + 1] "
                             f"for k up to {pa.size}), got {v.size}")
        v = v[ks + 1]
    if np.any(v <= 0):
        raise ValueError(f"verify must be > 0 for a pass over 2 or more positions, got {verify!r}")
    parallel = 1 + np.cumsum(np.cumprod(pa))
    chain = expected_tokens(checks.probability(alpha, "alpha", scalar=True), ks)
    return parallel / chain * (ks * checks.positive(c, "c", zero=True, scalar=True) + v) - v


class SpeedupTable(NamedTuple):
    alphas: np.ndarray  # (A,)
    ks: np.ndarray  # (K,)
    c: float
    values: np.ndarray  # (A, K) speedup
    best_k: np.ndarray  # (A,) best k over 1..k_max
    best_speedup: np.ndarray  # (A,)

    def __str__(self) -> str:
        head = f"draft cost c = {self.c:g}\n" + "alpha " + "".join(f"{f'k={k}':>7}" for k in self.ks)
        lines = [head + "   best k (speedup)"]
        for a, row, bk, bs in zip(self.alphas, self.values, self.best_k, self.best_speedup, strict=True):
            lines.append(f"{a:<6.2f}" + "".join(f"{v:>7.2f}" for v in row) + f"   {bk:>2d} ({bs:.2f}x)")
        return "\n".join(lines)


def speedup_table(alphas, ks, c, k_max: int = 20) -> SpeedupTable:
    """Speedup for every (alpha, k), plus each alpha's best k over 1..k_max."""
    a = np.atleast_1d(checks.probability(alphas, "alphas"))
    kk = np.atleast_1d(checks.whole(ks, "ks"))
    values = speedup(a[:, None], kk[None, :], c)
    bk, bs = best_k(a, c, k_max)
    c = checks.positive(c, "c", zero=True)
    return SpeedupTable(a, kk, c, values, np.atleast_1d(bk), np.atleast_1d(bs))


def tokens_by_draft_length(position_alpha) -> np.ndarray:
    """E(d) for d = 0..K: expected tokens from a round that drafted d tokens, when draft position i is
    accepted with probability position_alpha[i-1] given the scan reached it (the target's own token
    always comes). The positional formula, for every draft length at once."""
    a = np.asarray(checks.probability(position_alpha, "position_alpha")).reshape(-1)
    return np.concatenate([[1.0], 1 + np.cumsum(np.cumprod(a))])


def position_alphas(drafted, judged, accepted, by_length: bool = False):
    """Acceptance at each draft position given the scan reached it, counted from rounds: round r drafted
    drafted[r] tokens, the target judged judged[r] of them (the scan stops at the first rejection) and
    kept accepted[r]. A position no round reached gets 0.

    Returns one (max drafted,) array, or with by_length=True {d: (d,) array} counted separately over the
    rounds that drafted d: the form predicted_speedup takes. A drafter that picks its length by its
    confidence (prompt lookup drafts 2 tokens on a weak match, 10-32 inside a copied passage) accepts
    its long drafts far more often than its short ones, and one pooled array would blur the two."""
    d = np.atleast_1d(checks.whole(drafted, "drafted", low=0))
    j = np.atleast_1d(checks.whole(judged, "judged", low=0))
    a = np.atleast_1d(checks.whole(accepted, "accepted", low=0))
    if not (d.ndim == 1 and d.shape == j.shape == a.shape):
        raise ValueError(f"drafted, judged and accepted need one count per round each, got shapes "
                         f"{d.shape}, {j.shape} and {a.shape}")
    if np.any(j > d) or np.any(a > j):
        raise ValueError("a round must have accepted <= judged <= drafted")

    def rates(rows, width):
        reached = (np.arange(width) < j[rows, None]).sum(axis=0)
        kept = (np.arange(width) < a[rows, None]).sum(axis=0)
        return np.where(reached > 0, kept / np.maximum(reached, 1), 0.0)

    if not by_length:
        return rates(np.arange(d.size), int(d.max()))
    return {int(n): rates(d == n, int(n)) for n in np.unique(d)}


def predicted_speedup(position_alpha, draft_lengths, verify_cost, draft_cost=0.0, prefill: float = 0.0,
                      n_tokens: int | None = None, prompts: int = 0, plain: float | None = None) -> float:
    """Speedup over plain decoding predicted from measured parts, everything in plain decode steps.

    - position_alpha: acceptance at draft position i, given the scan reached it: one (K,) array for
      every round, or {d: (d,) array} measured over the rounds that drafted d (position_alphas);
    - draft_lengths (R,): each round's draft length (0 = a plain step);
    - verify_cost (W,): cost of one target pass over w positions, indexed by w (verify_cost[1] = 1);
      speedup() above assumes it is 1 for every w, which holds on a GPU far below the ridge point;
    - draft_cost: what a round costs besides its verify pass (its drafting, the loop's own overhead),
      scalar or (R,);
    - prefill, n_tokens: the prompt pass and the number of tokens, to predict end to end;
    - prompts: how many generations verify their first round's draft inside the prompt pass (the
      engine does): that round pays only its draft_cost;
    - plain: the time plain decoding takes for the n_tokens, if measured (a plain loop has overheads of
      its own); default prefill + n_tokens, one step per token.

    A round with d drafts yields E(d) = 1 + sum_{i<=d} prod_{j<=i} alpha_j tokens (the positional
    formula, with the alphas of rounds that drafted d) and costs verify_cost[d+1] + its draft cost.
    Speculation needs N * mean(cost) / mean(E) steps where plain needs N. One draft length d with
    alpha_j = alpha, verify_cost[k+1] = v and draft_cost = k*c gives speedup(alpha, k, c, v)."""
    d = np.asarray(checks.whole(draft_lengths, "draft_lengths", low=0)).reshape(-1)
    v = np.asarray(checks.positive(verify_cost, "verify_cost", zero=True), dtype=np.float64).reshape(-1)
    if isinstance(position_alpha, dict):
        tokens_at = np.zeros(d.max() + 1)
        for n in np.unique(d):
            if int(n) not in position_alpha:
                raise ValueError(f"position_alpha has no rates for draft length {n}, which a round drafted")
            if n == 0:
                tokens_at[0] = 1.0  # a plain step: the target's own token
                continue
            a_n = np.asarray(checks.probability(position_alpha[int(n)], f"position_alpha[{n}]")).reshape(-1)
            if a_n.size < n:
                raise ValueError(f"position_alpha[{n}] has {a_n.size} positions for rounds that drafted {n}")
            tokens_at[n] = tokens_by_draft_length(a_n)[n]
    else:
        a = np.asarray(checks.probability(position_alpha, "position_alpha")).reshape(-1)
        if d.max() > a.size:
            raise ValueError(f"draft_lengths: a round drafted {d.max()} tokens but position_alpha has only "
                             f"{a.size} positions")
        tokens_at = tokens_by_draft_length(a)
    if v.size < d.max() + 2:
        raise ValueError(f"verify_cost must cover widths up to {d.max() + 1} (index = width)")
    if not np.all(v[1:d.max() + 2] > 0):
        raise ValueError(f"verify_cost: a target pass over 1..{d.max() + 1} positions must cost > 0, got "
                         f"{v[1:d.max() + 2]!r} (index 0, a pass over nothing, is never read)")
    prefill = checks.positive(prefill, "prefill", zero=True)
    prompts = checks.whole(prompts, "prompts", low=0, scalar=True)
    if n_tokens is not None:
        n_tokens = checks.whole(n_tokens, "n_tokens", scalar=True)
    elif prefill or prompts or plain is not None:
        raise ValueError("n_tokens: predicting end to end (prefill, prompts, plain) needs the token count")
    cost = v[d + 1] + checks.positive(draft_cost, "draft_cost", zero=True)
    steps_per_token = cost.mean() / tokens_at[d].mean()
    if n_tokens is None:
        return float(1 / steps_per_token)
    plain = prefill + n_tokens if plain is None else checks.positive(plain, "plain", scalar=True)
    return float(plain / (prefill + n_tokens * steps_per_token - prompts * v[d + 1].mean()))
