"""Hidden cases for notebook 03: the residual, and the two acceptance rates."""

from __future__ import annotations

import numpy as np

from specnotes.exercises import Exercise, register


def _pairs():
    rng = np.random.default_rng(3)
    yield "random p and q", rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
    yield "p has a zero", np.array([0.0, 0.5, 0.5]), np.array([0.2, 0.3, 0.5])
    yield "p == q (empty residual: return p)", np.array([0.3, 0.7]), np.array([0.3, 0.7])
    yield "one-hot p (greedy)", np.array([0.0, 1.0, 0.0]), np.array([0.5, 0.25, 0.25])
    yield "q covers p except one token", np.array([0.25, 0.25, 0.5]), np.array([0.5, 0.5, 0.0])


def _residual_cases(fn):
    for name, p, q in _pairs():
        r = np.maximum(p - q, 0.0)
        want = r / r.sum() if r.sum() > 0 else p
        got = np.asarray(fn(p.copy(), q.copy()), dtype=float)
        ok = got.shape == want.shape and np.all(np.isfinite(got)) and np.allclose(got, want, atol=1e-12)
        yield name, ok, f"expected {np.round(want, 4)}, got {np.round(got, 4)}"


def _rates_cases(fn):
    for name, p, q in _pairs():
        name = name.split(" (")[0]  # the residual-specific advice in some labels does not apply here
        want = (float(np.minimum(p, q).sum()), float((p * q).sum()))
        got = fn(p.copy(), q.copy())
        ok = len(got) == 2 and np.allclose([float(g) for g in got], want, atol=1e-12)
        yield name, ok, f"expected (rejection, match) = {np.round(want, 4)}, got {got!r}"


register(Exercise(
    id="03.1",
    title="the residual distribution",
    hint="Take max(0, p - q) elementwise and divide by its sum. When p == q that sum is 0: the "
         "residual is never used then (acceptance is certain), so return p instead of dividing by zero.",
    cases=_residual_cases,
))

register(Exercise(
    id="03.2",
    title="acceptance of the rejection rule and of sample-and-match",
    hint="The rejection rule keeps a draft x with probability min(1, p/q), so on average it accepts "
         "sum over x of q(x) min(1, p(x)/q(x)). Sample-and-match accepts when two independent draws agree.",
    cases=_rates_cases,
))
