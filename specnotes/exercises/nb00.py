"""Hidden cases for notebook 00's exercises: greedy choice and temperature softmax."""

from __future__ import annotations

import numpy as np

from specnotes.exercises import Exercise, register


def _greedy_cases(fn):
    rng = np.random.default_rng(0)
    cases = {
        "a clear winner": np.array([0.1, 3.0, -1.0, 2.9]),
        "all negative logits": np.array([-5.0, -0.5, -7.0]),
        "a tie goes to the lowest id, as argmax does": np.array([1.0, 4.0, 4.0, 0.0]),
        "a 49152-token vocabulary": rng.normal(size=49152),
    }
    for name, logits in cases.items():
        want = int(np.argmax(logits))
        got = fn(logits.copy())
        ok = isinstance(got, (int, np.integer)) and int(got) == want
        kind = "" if isinstance(got, (int, np.integer)) else f" (a {type(got).__name__}; return a plain int)"
        yield name, ok, f"expected token {want}, got {got!r}{kind}"


def _softmax_reference(logits, temperature):
    z = np.asarray(logits, dtype=np.float64)
    if temperature == 0:
        out = np.zeros_like(z)
        out[np.argmax(z)] = 1.0
        return out
    z = z / temperature
    e = np.exp(z - z.max())
    return e / e.sum()


def _softmax_cases(fn):
    rng = np.random.default_rng(1)
    cases = [
        ("temperature 1", rng.normal(size=8), 1.0),
        ("temperature 0.5 sharpens", rng.normal(size=8), 0.5),
        ("temperature 2 flattens", rng.normal(size=8), 2.0),
        ("huge logits must not overflow", np.array([1000.0, 999.0, 0.0]), 1.0),
        ("temperature 0 is greedy: a one-hot at the argmax", np.array([0.2, 1.5, -3.0, 1.4]), 0.0),
    ]
    for name, logits, temperature in cases:
        want = _softmax_reference(logits, temperature)
        got = np.asarray(fn(logits.copy(), temperature), dtype=np.float64)
        ok = got.shape == want.shape and np.all(np.isfinite(got)) and np.allclose(got, want, atol=1e-9)
        yield name, ok, f"expected {np.round(want, 4)}, got {np.round(got, 4)}"


register(Exercise(
    id="00.1",
    title="greedy next token",
    hint="Greedy decoding takes the highest-scoring token: numpy has a function that returns "
         "the index of the maximum (and on ties it returns the first). Return a plain int.",
    cases=_greedy_cases,
))

register(Exercise(
    id="00.2",
    title="softmax with temperature",
    hint="Divide the logits by the temperature, subtract the maximum before exp (so 1000 does not "
         "overflow), then normalize. Temperature 0 is the limit: all mass on the argmax.",
    cases=_softmax_cases,
))
