"""The speedup math: expected tokens per target pass, speedup with draft cost c, the best k, acceptance rates.

Notebook 05 derives and explores it; 06-08 compare measurements against it. Arguments broadcast (numpy).
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


def speedup(alpha, k, c):
    """Expected speedup over plain decoding: tokens per pass over the round's cost, k*c + 1 target steps."""
    return (expected_tokens(alpha, k) / (checks.whole(k, "k") * checks.positive(c, "c", zero=True) + 1))[()]


def best_k(alpha, c, k_max: int = 20):
    """(k, speedup) maximizing speedup over k = 1..k_max; the smallest such k on ties. Broadcasts."""
    kk = np.arange(1, checks.whole(k_max, "k_max", high=1000, scalar=True) + 1)
    a, cc = np.broadcast_arrays(checks.probability(alpha, "alpha"), checks.positive(c, "c", zero=True))
    table = speedup(a[..., None], kk, cc[..., None])
    i = np.argmax(table, axis=-1)
    return (kk[i])[()], np.take_along_axis(table, i[..., None], axis=-1)[..., 0][()]


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


def predicted_speedup(position_alpha, draft_lengths, verify_cost, draft_cost=0.0, prefill: float = 0.0,
                      n_tokens: int | None = None) -> float:
    """Speedup over plain decoding predicted from measured parts, everything in plain decode steps.

    - position_alpha (K,): acceptance at draft position i, given the scan reached it;
    - draft_lengths (R,): each round's draft length (0 = a plain step);
    - verify_cost (W,): cost of one target pass over w positions, indexed by w (verify_cost[1] = 1);
      speedup() above assumes it is 1 for every w, which holds on a GPU far below the ridge point;
    - draft_cost: drafting per round (scalar or (R,));
    - prefill, n_tokens: the prompt pass and the number of tokens, to predict end to end.

    A round with d drafts yields E(d) = 1 + sum_{i<=d} prod_{j<=i} alpha_j tokens (the positional
    formula) and costs verify_cost[d+1] + its draft cost. Speculation needs N * mean(cost) / mean(E)
    steps where plain needs N."""
    a = np.asarray(checks.probability(position_alpha, "position_alpha")).reshape(-1)
    d = np.asarray(checks.whole(draft_lengths, "draft_lengths", low=0)).reshape(-1)
    v = np.asarray(checks.positive(verify_cost, "verify_cost", zero=True), dtype=np.float64).reshape(-1)
    if d.max() > a.size:
        raise ValueError(f"draft_lengths: a round drafted {d.max()} tokens but position_alpha has only "
                         f"{a.size} positions")
    if v.size < d.max() + 2:
        raise ValueError(f"verify_cost must cover widths up to {d.max() + 1} (index = width)")
    if not np.all(v[1:d.max() + 2] > 0):
        raise ValueError(f"verify_cost: a target pass over 1..{d.max() + 1} positions must cost > 0, got "
                         f"{v[1:d.max() + 2]!r} (index 0, a pass over nothing, is never read)")
    prefill = checks.positive(prefill, "prefill", zero=True)
    if n_tokens is not None:
        n_tokens = checks.whole(n_tokens, "n_tokens", scalar=True)
    tokens_at = tokens_by_draft_length(a)
    cost = v[d + 1] + checks.positive(draft_cost, "draft_cost", zero=True)
    steps_per_token = cost.mean() / tokens_at[d].mean()
    if n_tokens is None or prefill == 0:
        return float(1 / steps_per_token)
    return float((prefill + n_tokens) / (prefill + n_tokens * steps_per_token))
