"""Hidden cases for notebook 05: expected tokens per pass (with its alpha = 1 limit), and the best k."""

from __future__ import annotations

import numpy as np

from specnotes.exercises import Exercise, register


def _tokens_cases(fn):
    cases = [(0.8, 4), (0.5, 1), (0.0, 5), (0.95, 20), (1.0, 5), (1.0, 1)]
    for alpha, k in cases:
        want = float(sum(alpha**i for i in range(k + 1)))
        got = fn(alpha, k)
        ok = got is not None and np.isfinite(float(got)) and np.isclose(float(got), want, rtol=1e-9)
        label = "alpha = 1 (every draft accepted)" if alpha == 1 else f"alpha={alpha}, k={k}"
        yield label, ok, f"expected {want:.6g}, got {got!r}"


def _best_k_cases(fn):
    def reference(alpha, c, k_max):
        ks = np.arange(1, k_max + 1)
        tokens = np.array([sum(alpha**i for i in range(k + 1)) for k in ks])
        s = tokens / (ks * c + 1)
        return int(ks[np.argmax(s)]), float(s.max())

    for alpha, c, k_max in [(0.8, 0.05, 20), (0.5, 0.2, 20), (0.9, 0.05, 20), (0.9, 0.05, 8),
                            (0.3, 0.5, 10), (0.99, 0.0, 12)]:
        want = reference(alpha, c, k_max)
        got = fn(alpha, c, k_max)
        ok = (got is not None and len(got) == 2 and int(got[0]) == want[0]
              and np.isclose(float(got[1]), want[1], rtol=1e-9))
        yield f"alpha={alpha}, c={c}, k_max={k_max}", ok, f"expected {want}, got {got!r}"


register(Exercise(
    id="05.1",
    title="expected tokens per target pass",
    hint="Draft token i (counting from 1) is kept only if tokens 1..i all are: probability alpha^i. "
         "Add the one token every pass yields: 1 + alpha + ... + alpha^k. The closed form divides by "
         "1 - alpha: handle alpha == 1 separately.",
    cases=_tokens_cases,
))

register(Exercise(
    id="05.2",
    title="the best k for a given alpha and draft cost",
    hint="Try every k from 1 to k_max, compute tokens/(k*c + 1), keep the largest (the smallest k on "
         "ties). Return (k, speedup).",
    cases=_best_k_cases,
))
