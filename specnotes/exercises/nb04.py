"""Hidden cases for notebook 04: total variation, and the recovery distribution for a point-mass draft."""

from __future__ import annotations

import numpy as np

from specnotes.exercises import Exercise, register


def _tv_cases(fn):
    rng = np.random.default_rng(4)
    cases = [
        ("identical", np.array([0.2, 0.8]), np.array([0.2, 0.8])),
        ("disjoint", np.array([1.0, 0.0]), np.array([0.0, 1.0])),
        ("random", rng.dirichlet(np.ones(10)), rng.dirichlet(np.ones(10))),
    ]
    for name, a, b in cases:
        want = 0.5 * np.abs(a - b).sum()
        got = fn(a.copy(), b.copy())
        yield name, np.isclose(float(got), want, atol=1e-12), f"expected {want:.4f}, got {got!r}"


def _recovery_cases(fn):
    rng = np.random.default_rng(5)
    cases = [
        ("draft token 0", rng.dirichlet(np.ones(5)), 0),
        ("draft token 3", rng.dirichlet(np.ones(5)), 3),
        ("p puts no mass on x", np.array([0.5, 0.0, 0.5]), 1),
        ("p is a point mass on x (never rejected: return p)", np.array([0.0, 1.0, 0.0]), 1),
    ]
    for name, p, x in cases:
        r = p.copy()
        r[x] = 0.0
        want = r / r.sum() if r.sum() > 0 else p
        got = np.asarray(fn(p.copy(), x), dtype=float)
        ok = got.shape == want.shape and np.allclose(got, want, atol=1e-12)
        yield name, ok, f"expected {np.round(want, 4)}, got {np.round(got, 4)}"


register(Exercise(
    id="04.1",
    title="total variation distance",
    hint="Half the sum of absolute differences. It is also the largest gap in probability the two "
         "distributions can give any event.",
    cases=_tv_cases,
))

register(Exercise(
    id="04.2",
    title="the recovery distribution for a point-mass draft",
    hint="A deterministic draft has q = one-hot at x, so the residual max(0, p - q) is p with x's mass "
         "removed. Renormalize; if nothing is left, x was certain and is never rejected.",
    cases=_recovery_cases,
))
