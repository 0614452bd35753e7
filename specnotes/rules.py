"""The accept / residual / verify step of speculative sampling in numpy, vectorized over rounds: what the
toy (03, 04, 05) and the bug zoo's variants build on.

The rule has exactly two other spellings, each for a reason: its torch twin for one round on a real model
(specnotes.verify.TokenWise.chain, what the engine runs), and its form for a tree of point-mass candidates
(TokenWise.tree). The calibrated tests check all three.

verify_block is block verification (Sun et al., ICLR 2025), the exact rule that judges the drafted block
jointly; its torch twin is specnotes.verify.Block, and specnotes.block enumerates it exactly.
"""

from __future__ import annotations

import numpy as np

from specnotes import checks


def _num(a):
    """float64 for ordinary input; object arrays (fractions.Fraction) pass through for exact math."""
    a = np.asarray(a)
    return a if a.dtype == object else a.astype(np.float64)


def acceptance_probability(p_x, q_x):
    """min(1, p(x)/q(x)) elementwise; where q(x) = 0 the token cannot have been drafted, so 1."""
    p_x, q_x = _num(p_x), _num(q_x)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(q_x > 0, p_x / np.where(q_x > 0, q_x, 1), 1)
    return np.minimum(1, ratio)


def residual(p, q):
    """max(0, p - q), renormalized along the last axis: exactly the mass acceptance failed to deliver.

    Where p == q the residual is empty, but then acceptance is certain and it is never sampled;
    we return p there so the result is always a valid distribution and nothing divides by zero.
    """
    p, q = _num(p), _num(q)  # unchecked: verify() passes q = 0 for the bonus row, on every round
    r = np.maximum(p - q, 0)
    mass = r.sum(axis=-1, keepdims=True)
    return np.where(mass > 0, r / np.where(mass > 0, mass, 1), p)


def emitted_distribution(p, q):
    """(V,) exact distribution of the token one round emits at a position where the draft
    samples from q: accepted drafts plus rejections resampled from the residual. Equals p."""
    p, q = checks.distribution(p, "p"), checks.distribution(q, "q")
    accepted = q * acceptance_probability(p, q)  # = min(p, q)
    return accepted + (1 - accepted.sum()) * residual(p, q)


def sample_categorical(probs, u):
    """Inverse-CDF sampling: one token per row of probs (..., V) from uniforms u (...) in [0, 1)."""
    cdf = np.cumsum(probs, axis=-1)
    # scale by the row total so float rounding in the cumsum can never push u past the end
    x = (cdf <= (u * cdf[..., -1])[..., None]).sum(axis=-1)
    return np.minimum(x, cdf.shape[-1] - 1)


def first_rejection(accepted):
    """Number of leading True values per row of a (m, k) bool array: the accepted prefix length."""
    accepted = np.asarray(accepted, dtype=bool)
    return np.where(accepted.all(axis=1), accepted.shape[1], np.argmin(accepted, axis=1))


def verify(p_rows, q_rows, drafted, u_accept, u_fix, residual_fn=residual):
    """One round of the rejection rule for m sequences at once.

    p_rows (m, k+1, V): target distributions at the k drafted positions plus the one after them.
    q_rows (m, k, V): the distributions the drafts were actually sampled from.
    drafted (m, k) ints; u_accept (m, k) and u_fix (m,) uniforms in [0, 1).
    Returns (n_accepted (m,), next_token (m,)): the corrected token at the first rejection, or
    the bonus token from p_rows[:, k] when all k drafts are accepted.
    """
    m, k = drafted.shape
    rows = np.arange(m)[:, None]
    cols = np.arange(k)[None, :]
    p_x = p_rows[rows, cols, drafted]
    q_x = q_rows[rows, cols, drafted]
    n_acc = first_rejection(u_accept < acceptance_probability(p_x, q_x))
    # The bonus is the residual against an empty draft (q = 0), which is p itself: one code path.
    q_padded = np.concatenate([q_rows, np.zeros_like(q_rows[:, :1])], axis=1)
    at = np.arange(m)
    fix_dist = residual_fn(p_rows[at, n_acc], q_padded[at, n_acc])
    return n_acc, sample_categorical(fix_dist, u_fix)


def verify_match(p_rows, drafted, u_target):
    """Sample-and-match: the target samples every position itself; keep drafts while they agree.

    u_target (m, k+1) uniforms. Exact for any draft (every emitted token is a draw from p), with
    acceptance sum(p*q) per position instead of sum(min(p, q)). For a point-mass draft it is the
    same as the rejection rule.
    """
    y = sample_categorical(p_rows, u_target)  # (m, k+1) the target's own draws
    n_acc = first_rejection(y[:, :-1] == drafted)
    return n_acc, y[np.arange(len(y)), n_acc]


def block_weights(ratio):
    """(m, k) the block rule's running weights w_i = min(1, w_{i-1} p(x_i)/q(x_i)), w_0 = 1, from the
    (m, k) ratios p(x_i)/q(x_i). In logs this is a walk reflected at 0: log w_i = S_i - max(0, S_1..S_i)
    for the partial sums S_i of log ratio, so no loop over positions is needed."""
    with np.errstate(divide="ignore"):
        s = np.cumsum(np.log(np.asarray(ratio, dtype=np.float64)), axis=-1)
    return np.exp(s - np.maximum.accumulate(np.maximum(s, 0), axis=-1))


def block_stop_probabilities(weights, p_rows, q_rows):
    """(m, k) h_i, the chance the block rule keeps the first i drafts, given the later positions did not
    take over: for i < k, residual mass r_i / (r_i + 1 - w_i), where r_i = sum_x max(0, w_i p - q) at the
    position after draft i; h_k = w_k. A position with nothing left to give (r_i = 0 = 1 - w_i) gets 0."""
    k = weights.shape[-1]
    r = np.maximum(weights[:, :k - 1, None] * p_rows[:, 1:k] - q_rows[:, 1:k], 0).sum(axis=-1)
    den = r + 1 - weights[:, :k - 1]
    h = np.where(den > 0, r / np.where(den > 0, den, 1), 0)
    return np.concatenate([h, weights[:, k - 1:]], axis=1)


def block_expected_kept(h):
    """(m,) expected drafts the block rule keeps from (m, k) stop probabilities h: it keeps i when h_i
    passes and every later h_j fails, so sum_i i * h_i * prod_{j > i} (1 - h_j)."""
    h = np.asarray(h, dtype=np.float64)
    later_fail = np.cumprod((1 - h)[:, ::-1], axis=1)[:, ::-1]  # prod_{j >= i} (1 - h_j)
    after = np.concatenate([later_fail[:, 1:], np.ones((len(h), 1))], axis=1)  # prod_{j > i}
    return (h * after * np.arange(1, h.shape[1] + 1)).sum(axis=1)


def verify_block(p_rows, q_rows, drafted, u_accept, u_fix, longest: bool = True):
    """One round of block verification for m sequences at once; same arguments and return as verify.

    The rule keeps the LONGEST prefix i whose coin u_i < h_i passes (not the first failure, as the
    token-wise rule), then draws the next token from max(0, w_i p - q) renormalized (the bonus row when
    all k are kept). It emits the target's distribution exactly and accepts at least as many tokens in
    expectation as the token-wise rule; at k = 1 the two are the same rule.
    longest=False plants a mistake, the token-wise loop's habit: stop at the FIRST failing coin. The
    calibrated tests must catch it."""
    p_rows, q_rows = _num(p_rows), _num(q_rows)
    m, k = drafted.shape
    rows, cols = np.arange(m)[:, None], np.arange(k)[None, :]
    q_x = q_rows[rows, cols, drafted]
    ratio = p_rows[rows, cols, drafted] / np.where(q_x > 0, q_x, 1)  # a drawn token has q(x) > 0
    w = block_weights(ratio)
    passed = u_accept < block_stop_probabilities(w, p_rows, q_rows)
    # the last passing position: reversed argmax finds it; no pass at all keeps 0 drafts
    n_acc = np.where(passed.any(axis=1), k - np.argmax(passed[:, ::-1], axis=1), 0)
    if not longest:
        n_acc = first_rejection(passed)
    at = np.arange(m)
    weight = np.concatenate([np.ones((m, 1)), w], axis=1)[at, n_acc]
    q_padded = np.concatenate([q_rows, np.zeros_like(q_rows[:, :1])], axis=1)
    raw = np.maximum(weight[:, None] * p_rows[at, n_acc] - q_padded[at, n_acc], 0)
    mass = raw.sum(axis=-1, keepdims=True)
    fix = np.where(mass > 0, raw / np.where(mass > 0, mass, 1), p_rows[at, n_acc])
    return n_acc, sample_categorical(fix, u_fix)
