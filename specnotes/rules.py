"""The accept / residual / verify step of speculative sampling in numpy, vectorized over rounds: what the
toy (03, 04, 05) and the bug zoo's variants build on.

The rule has exactly two other spellings, each for a reason: its torch twin for one round on a real model
(specnotes.sampling.accept_sampled and residual, what the engine runs), and its form for a tree of
point-mass candidates (specnotes.tree.walk_sampling). The calibrated tests check all three.
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
