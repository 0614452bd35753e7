"""A numpy toy language (bigram target P, blurred draft Q): vectorized samplers and exact answers.

Notebooks 03 (the proof), 04 (the bug zoo) and 05 (tokens per pass) run on it; n sequences go in one batch.
The checks that compare its samples with its exact answers live in `stats`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from specnotes import checks, rules, stats

BOS = 0  # every sequence starts from context token 0
CHUNK = 1 << 16  # sequences per lockstep block


class Pair(NamedTuple):
    P: np.ndarray  # (V, V) target: row t is p(next | previous token t)
    Q: np.ndarray  # (V, V) draft, same layout


class SpecStats(NamedTuple):
    target_calls: np.ndarray  # (n,) target passes per sequence
    rounds: int  # total draft-and-verify rounds (= target calls)
    emitted: int  # tokens emitted by those rounds, before truncation to `length`
    accepted: int  # draft tokens accepted
    judged_per_position: np.ndarray  # (k,) how many rounds judged draft position i
    accepted_per_position: np.ndarray  # (k,) how many rounds accepted draft position i

    @property
    def alpha(self) -> float:
        """Measured acceptance rate: accepted drafts over drafts judged (the scan stops at a rejection)."""
        return self.accepted / max(int(self.judged_per_position.sum()), 1)

    @property
    def tokens_per_call(self) -> float:
        return self.emitted / max(self.rounds, 1)

    @property
    def per_position_acceptance(self) -> np.ndarray:
        """(k,) acceptance at draft position i, given that position i was reached."""
        return self.accepted_per_position / np.maximum(self.judged_per_position, 1)


# --------------------------------------------------------------------------- the toy language


def make_pair(vocab: int = 4, seed: int = 2, blend: float = 0.45) -> Pair:
    """Random bigram target P and a draft Q = (1 - blend) P + blend * noise, from one generator."""
    vocab = checks.whole(vocab, "vocab", low=2)
    blend = checks.probability(blend, "blend (0: Q == P, 1: Q is pure noise)")
    rng = np.random.default_rng(checks.whole(seed, "seed", low=0, scalar=True))
    P = rng.dirichlet(np.ones(vocab), size=vocab)
    Q = (1.0 - blend) * P + blend * rng.dirichlet(np.ones(vocab), size=vocab)
    return Pair(P, Q)


def seed_pair() -> Pair:
    """The seed article's toy: V = 4, generator seed 2, Q = 0.55 P + 0.45 noise."""
    return make_pair(vocab=4, seed=2, blend=0.45)


def acceptance_per_context(P, Q) -> np.ndarray:
    """(V,) alpha for each previous token: sum over x of min(p, q)."""
    P = bigram(P, "P")
    return np.minimum(P, bigram(Q, "Q", P.shape[0])).sum(axis=1)


# --------------------------------------------------------------------------- sampling


def bigram(P, name: str = "P", vocab: int | None = None) -> np.ndarray:
    """P as a (V, V) bigram table (row: previous token, column: next), each row a distribution."""
    P = checks.distribution(P, name)
    if P.ndim != 2 or P.shape[0] != P.shape[1] or (vocab is not None and P.shape[0] != vocab):
        want = "(V, V)" if vocab is None else f"({vocab}, {vocab}), like P"
        raise ValueError(f"{name} must be a {want} bigram table (row: previous token), got shape {P.shape}")
    return P


def _check_rng(rng) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got {rng!r}")


MAX_TOKENS = 200_000_000  # sampled at once: 1.6 GB of int64 ids, about a minute of vectorized rounds


def sample_target(P, n: int, length: int, rng) -> np.ndarray:
    """(n, length) int array: n sequences drawn from the target directly, one position at a time."""
    P = bigram(P, "P")
    length = checks.whole(length, "length", scalar=True)
    n = checks.whole(n, f"n (at most {MAX_TOKENS:,} tokens a call)", high=MAX_TOKENS // length, scalar=True)
    _check_rng(rng)
    out = np.empty((n, length), dtype=np.int64)
    prev = np.full(n, BOS)
    for t in range(length):
        prev = rules.sample_categorical(P[prev], rng.random(n))
        out[:, t] = prev
    return out


class Table:
    """A (V, V) table of rows to sample from, flattened so that one searchsorted call samples
    every sequence at once: row c's CDF is shifted by c, so row and uniform meet in one sorted array."""

    def __init__(self, rows, normalized: bool = True):
        rows = np.asarray(rows, dtype=np.float64)
        self.V = rows.shape[1]
        cdf = np.cumsum(rows, axis=1)
        if normalized:  # divide out float drift so every row ends at exactly 1
            cdf = cdf / cdf[:, -1:]
        self.flat = (cdf + np.arange(rows.shape[0])[:, None]).ravel()

    def sample(self, ctx, u):
        """(m,) tokens: one draw from row ctx[i] with uniform u[i]."""
        x = np.searchsorted(self.flat, ctx + u, side="right") - ctx * self.V
        # a row that sums to less than 1 lets u run past its end: clip to the last token, as an
        # unguarded inverse-CDF sampler would
        return np.minimum(x, self.V - 1)


def draft(Q, prev, k: int, u, pick=None):
    """The draft proposes k tokens per sequence from Q's rows, chained through its own outputs.

    Returns ((m, k) drafted tokens, (m, k+1) contexts: ctx[:, j] is the token before position j,
    and ctx[:, k] is the last draft, whose target row gives the bonus token).
    """
    pick = pick or Table(Q).sample
    ctx = np.empty((len(prev), k + 1), dtype=np.int64)
    ctx[:, 0] = prev
    for j in range(k):
        ctx[:, j + 1] = pick(ctx[:, j], u[:, j])
    return ctx[:, 1:], ctx


def scan(accept_table, ctx, drafted, u_accept):
    """(m,) accepted prefix length: draft j passes when u < accept_table[context, token]."""
    return rules.first_rejection(u_accept < accept_table[ctx[:, :-1], drafted])


def finish(fix_rows, P, ctx, n_acc, u):
    """(m,) the token after the accepted prefix: a draw from the fix row of the rejection's context,
    or, when all k passed, the bonus draw from the target row after the last draft."""
    k = ctx.shape[1] - 1
    at = ctx[np.arange(len(ctx)), n_acc]
    both = fix_rows if isinstance(fix_rows, Table) else Table(np.concatenate([fix_rows, P]))
    # rows 0..V-1 are the fix rows, V..2V-1 the target's: one searchsorted serves both cases
    return both.sample(at + P.shape[0] * (n_acc == k), u)


def assemble(drafted, n_acc, next_token):
    """(m, k+1) block of emitted tokens (accepted drafts, then the corrected or bonus token)
    and (m,) how many of them count."""
    block = np.concatenate([drafted, np.zeros_like(drafted[:, :1])], axis=1)
    block[np.arange(len(block)), n_acc] = next_token
    return block, n_acc + 1


def rejection_round(P, Q, prev, k, rng, accept=None, fix=None, u_accept=None, pick=None):
    """One round of the rejection rule for m sequences, built from the rules module's pieces:
    accept with min(1, p/q), on rejection sample the residual, else the bonus from p.

    The keyword arguments exist so the bug zoo can swap exactly one piece (fix is a (V, V) array
    of rows, or a prepared Table whose rows are the fix rows followed by P's)."""
    m = len(prev)
    u = rng.random((m, 2 * k + 1))
    drafted, ctx = draft(Q, prev, k, u[:, :k], pick)
    accept = rules.acceptance_probability(P, Q) if accept is None else accept
    fix = rules.residual(P, Q) if fix is None else fix
    n_acc = scan(accept, ctx, drafted, u[:, k:2 * k] if u_accept is None else u_accept(u))
    nxt = finish(fix, P, ctx, n_acc, u[:, 2 * k])
    return (*assemble(drafted, n_acc, nxt), n_acc)


def exact_round(P, Q, prev, k, rng):
    """One round of speculative sampling with the rejection rule (Leviathan et al. / Chen et al.)."""
    return rejection_round(P, Q, prev, k, rng)


def target_residual_round(P, Q, prev, k, rng):
    """BUG (the seed's 'naive' fallback): after a rejection, sample from p instead of the residual."""
    return rejection_round(P, Q, prev, k, rng, fix=P)


def match_round(P, Q, prev, k, rng):
    """Sample-and-match: the target draws every position itself; drafts are kept while they agree."""
    m = len(prev)
    u = rng.random((m, 2 * k + 1))
    drafted, ctx = draft(Q, prev, k, u[:, :k])
    target = Table(P).sample(ctx, u[:, k:])  # (m, k+1): the target's own draw at every position
    n_acc = rules.first_rejection(target[:, :-1] == drafted)
    return (*assemble(drafted, n_acc, target[np.arange(m), n_acc]), n_acc)


ROUNDS: dict[str, Callable] = {
    "exact": exact_round,
    "target-residual": target_residual_round,
    "match": match_round,
}


def round_function(rule) -> Callable:
    """The round function for one of the toy's own rule names (ROUNDS) or a callable; block verification
    and the zoo's variants are named in bugzoo.round_function."""
    if callable(rule):
        return rule
    if rule not in ROUNDS:
        raise ValueError(f"unknown rule {rule!r}; choose one of: {', '.join(ROUNDS)} "
                         "(bugzoo.sample_speculative also knows block verification and every bug-zoo name)")
    return ROUNDS[rule]


def sample_speculative(P, Q, n: int, length: int, k: int, rng, rule="exact"):
    """(samples (n, length) int array, SpecStats): n sequences by draft-and-verify, all in lockstep.

    Each loop iteration is one round for every unfinished sequence; there is no per-sequence loop.
    A round's output beyond `length` is cut, as a real engine stops at max_new_tokens.
    """
    P = bigram(P, "P")
    Q = bigram(Q, "Q", P.shape[0])
    _check_rng(rng)
    length = checks.whole(length, "length", scalar=True)
    n = checks.whole(n, f"n (at most {MAX_TOKENS:,} tokens a call)", high=MAX_TOKENS // length, scalar=True)
    k = checks.whole(k, "k (drafted tokens per round)", scalar=True)
    one_round = round_function(rule)
    out = np.empty((n, length), dtype=np.int64)
    calls = np.empty(n, dtype=np.int64)
    totals = np.zeros(3, dtype=np.int64)  # rounds, emitted, accepted
    judged = np.zeros(k, dtype=np.int64)
    accepted_at = np.zeros(k, dtype=np.int64)
    # chunks small enough that a round's working set stays in cache: about 1.5x faster at n = 10^6
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        _lockstep(one_round, P, Q, k, rng, out[lo:hi], calls[lo:hi], totals, judged, accepted_at)
    return out, SpecStats(calls, int(totals[0]), int(totals[1]), int(totals[2]), judged, accepted_at)


def _lockstep(one_round, P, Q, k, rng, out, calls, totals, judged, accepted_at):
    """Run rounds for a block of sequences until each has `out.shape[1]` tokens; fill out and stats."""
    n, length = out.shape
    flat = out.reshape(-1)  # a view: writes land in out
    pos = np.zeros(n, dtype=np.int64)
    prev = np.full(n, BOS, dtype=np.int64)
    calls[:] = 0
    offsets = np.arange(k + 1)
    active = np.arange(n)
    while active.size:
        block, n_emit, n_acc = one_round(P, Q, prev[active], k, rng)
        if np.any(np.asarray(n_emit) < 1):  # a round that emits nothing would loop forever
            raise ValueError("rule: a round emitted no token (every round must emit at least one: the "
                             "accepted drafts plus the target's own)")
        # position i was judged when the scan reached it, and accepted when n_acc > i
        reach = np.bincount(np.minimum(n_acc + 1, k), minlength=k + 1)
        judged += reach[::-1].cumsum()[::-1][1:]
        accepted_at += np.bincount(n_acc, minlength=k + 1)[::-1].cumsum()[::-1][1:]
        totals += (active.size, n_emit.sum(), n_acc.sum())

        cols = pos[active, None] + offsets
        keep = (offsets < n_emit[:, None]) & (cols < length)
        flat.put((active[:, None] * length + cols)[keep], block[keep])
        pos[active] += n_emit
        prev[active] = block[np.arange(active.size), n_emit - 1]
        calls[active] += 1
        active = active[pos[active] < length]


# --------------------------------------------------------------------------- exact answers


def exact_distribution(P, length: int) -> np.ndarray:
    """(V**length,) probability of every sequence, in lexicographic order (token 0 first)."""
    P = bigram(P, "P")
    V, length = P.shape[1], checks.whole(length, "length", scalar=True)
    if V**length > 50_000_000:
        raise ValueError(f"V**length = {V**length} outcomes is too many to enumerate")
    dist = P[BOS].copy()
    for _ in range(length - 1):
        last = np.arange(dist.size) % V  # the last token of each sequence so far
        dist = (dist[:, None] * P[last]).reshape(-1)
    return dist


def _branch_rule(P, Q, rule):
    """accept(ctx, x) -> probability and fix(ctx, x) -> (V,) distribution, for enumeration."""
    if rule == "exact":
        a, r = rules.acceptance_probability(P, Q), rules.residual(P, Q)
        return (lambda c, x: a[c, x]), (lambda c, x: r[c])
    if rule == "target-residual":
        a = rules.acceptance_probability(P, Q)
        return (lambda c, x: a[c, x]), (lambda c, x: P[c])
    if rule == "match":
        # the target's own draw equals x with probability p(x); otherwise it is p with x removed,
        # which is the residual of p against a point mass at x
        eye = np.eye(P.shape[1], dtype=P.dtype)
        return (lambda c, x: P[c, x]), (lambda c, x: rules.residual(P[c], eye[x]))
    raise ValueError(f"enumeration supports 'exact', 'target-residual' and 'match', not {rule!r}")


def speculative_distribution(P, Q, length: int, k: int, rule: str = "exact") -> np.ndarray:
    """(V**length,) exact probability of every sequence that speculative sampling emits, by walking
    every draft, accept and reject branch. Pass Fraction object arrays for exact rational arithmetic."""
    P = bigram(P, "P")
    Q = bigram(Q, "Q", P.shape[0])
    V, length, k = P.shape[1], checks.whole(length, "length", scalar=True), checks.whole(k, "k", scalar=True)
    if V**length > 50_000_000:
        raise ValueError(f"V**length = {V**length} outcomes is too many to enumerate")
    accept, fix = _branch_rule(P, Q, rule)
    memo: dict = {}

    def tokens_after(prev, remaining):  # distribution of the next `remaining` tokens from context prev
        if (prev, remaining) in memo:
            return memo[(prev, remaining)]
        dist = np.zeros(V**remaining, dtype=P.dtype)

        def emit(prob, block):  # one round ended having emitted `block`
            if len(block) >= remaining:
                dist[stats.sequence_index(np.array([block[:remaining]]), V)[0]] += prob
            else:
                rest = remaining - len(block)
                start = stats.sequence_index(np.array([block]), V)[0] * V**rest
                dist[start:start + V**rest] += prob * tokens_after(block[-1], rest)

        def walk(drafted, prob):  # every draft so far was accepted, with probability prob
            ctx = drafted[-1] if drafted else prev
            # all accepted: the bonus token comes from the target's row. Drafts past `remaining`
            # cannot change the tokens we keep, so the walk stops there too (same distribution).
            if len(drafted) == k or len(drafted) >= remaining:
                for y in range(V):
                    emit(prob * P[ctx, y], drafted + [y])
                return
            for x in range(V):
                if Q[ctx, x] == 0:
                    continue
                a = accept(ctx, x)
                walk(drafted + [x], prob * Q[ctx, x] * a)
                rejected = prob * Q[ctx, x] * (1 - a)
                if rejected != 0:
                    f = fix(ctx, x)
                    for y in range(V):
                        emit(rejected * f[y], drafted + [y])

        walk([], P.dtype.type(1) if P.dtype != object else 1)
        memo[(prev, remaining)] = dist
        return dist

    return tokens_after(BOS, length)


def depth_round(P, Qs):
    """A round function whose draft at depth j samples from Qs[j]: a drafter whose guesses get worse
    the further ahead it looks, so acceptance varies by position. Exact, like exact_round; k = len(Qs)."""
    P = bigram(P, "P")
    if not isinstance(Qs, (list, tuple)) or not Qs:
        raise TypeError("Qs must be a non-empty list of (V, V) draft tables, one per depth, got "
                        f"{type(Qs).__name__}")
    Qs = [bigram(Qj, f"Qs[{j}]", P.shape[0]) for j, Qj in enumerate(Qs)]
    V = P.shape[0]
    pickers = [Table(Qj).sample for Qj in Qs]
    accepts = [rules.acceptance_probability(P, Qj) for Qj in Qs]
    # fix rows for a rejection at depth j live at rows j*V .. j*V + V-1; the bonus rows (P) come last
    fixes = Table(np.concatenate([rules.residual(P, Qj) for Qj in Qs] + [P]))

    def one_round(P_, Q_, prev, k, rng):
        if k != len(Qs):
            raise ValueError(f"this drafter has {len(Qs)} depths; call it with k={len(Qs)}, not {k}")
        m = len(prev)
        u = rng.random((m, 2 * k + 1))
        ctx = np.empty((m, k + 1), dtype=np.int64)
        ctx[:, 0] = prev
        for j in range(k):
            ctx[:, j + 1] = pickers[j](ctx[:, j], u[:, j])
        drafted = ctx[:, 1:]
        ok = np.stack([u[:, k + j] < accepts[j][ctx[:, j], drafted[:, j]] for j in range(k)], axis=1)
        n_acc = rules.first_rejection(ok)
        nxt = fixes.sample(ctx[np.arange(m), n_acc] + V * n_acc, u[:, 2 * k])
        return (*assemble(drafted, n_acc, nxt), n_acc)

    return one_round


def stationary(P) -> np.ndarray:
    """(V,) the long-run token frequencies of the bigram target: the left eigenvector of P for 1."""
    P = bigram(P, "P").astype(np.float64)  # exact Fractions too: eig computes in floats
    vals, vecs = np.linalg.eig(P.T)
    pi = np.real(vecs[:, np.argmin(np.abs(vals - 1))])
    return pi / pi.sum()


def predicted_alpha(P, Q) -> float:
    """Acceptance predicted without sampling: sum(min(P, Q)) per context, weighted by how often
    the target visits each context in the long run."""
    return float(stationary(P) @ np.minimum(P, bigram(Q, "Q", np.shape(P)[0])).sum(axis=1))
