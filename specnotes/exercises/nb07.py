"""Hidden cases for notebook 07: predicting a speedup from measured parts, and where two outputs diverge."""

from __future__ import annotations

import numpy as np

from specnotes.exercises import Exercise, register
from specnotes.theory import predicted_speedup


def _predict_cases(fn):
    rng = np.random.default_rng(7)
    fixed = [
        ([0.8, 0.8, 0.8], [3, 3, 3], [0, 1, 1, 1, 1], 0.0, "a verify pass as cheap as one step, free drafts"),
        ([0.8, 0.7, 0.6], [3, 0, 2, 3], [0, 1, 1.2, 1.4, 1.6], 0.3, "wider passes cost more"),
        ([1.0, 1.0], [2, 2], [0, 1, 1.5, 2.0], 0.0, "every draft accepted"),
        ([0.0], [0, 0, 1], [0, 1, 1.1], 0.5, "nothing accepted: a slowdown"),
    ]
    for position_alpha, lengths, verify, cost, label in fixed:
        want = predicted_speedup(position_alpha, lengths, verify, cost)
        got = fn(list(position_alpha), list(lengths), list(verify), cost)
        ok = got is not None and np.isclose(float(got), want, rtol=1e-9)
        yield label, ok, f"expected {want:.6g}, got {got!r}"
    for i in range(10):
        k = int(rng.integers(1, 8))
        position_alpha = rng.uniform(0, 1, k).round(3).tolist()
        lengths = rng.integers(0, k + 1, int(rng.integers(1, 30))).tolist()
        verify = [0.0, *np.cumsum(np.r_[1.0, rng.uniform(0, 0.3, k)]).round(3).tolist()]
        cost = round(float(rng.uniform(0, 1)), 3)
        want = predicted_speedup(position_alpha, lengths, verify, cost)
        got = fn(position_alpha, lengths, verify, cost)
        if got is None or not np.isclose(float(got), want, rtol=1e-9):
            yield (f"random case {i}: position_alpha={position_alpha}, lengths={lengths}, verify={verify}, "
                   f"c={cost}"), False, \
                f"expected {want:.6g}, got {got!r}"
            return
    yield "10 random cases", True, ""


def _difference_cases(fn):
    cases = [([1, 2, 3], [1, 2, 3], None, "identical"), ([1, 2, 3], [1, 5, 3], 1, "one token differs"),
             ([4, 5], [4, 5, 6], 2, "one stopped early (an EOS, say)"), ([], [], None, "both empty"),
             ([7], [8], 0, "the very first token"), ([1, 2, 3, 4], [1, 2], 2, "the other one is longer")]
    for a, b, want, label in cases:
        got = fn(list(a), list(b))
        yield label, got == want, f"expected {want!r}, got {got!r}"


register(Exercise(
    id="07.1",
    title="predict a speedup from measured parts",
    hint="E(d) = 1 + sum over i <= d of prod_{j<=i} alpha_j tokens for a round that drafted d; its cost "
         "is verify_cost[d + 1] + draft_cost. Average E and the cost over the rounds; the speedup is "
         "mean(E) / mean(cost).",
    cases=_predict_cases,
))

register(Exercise(
    id="07.2",
    title="where does an output first differ from plain greedy?",
    hint="Walk both lists together and return the first index where they differ; if one ends first, "
         "that index (the shorter length) counts as a difference; None only if they are equal.",
    cases=_difference_cases,
    none_is_an_answer=True,
))
