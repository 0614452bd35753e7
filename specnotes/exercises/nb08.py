"""Hidden cases for notebook 08: the serving speedup from pass times, and transformers' k schedule."""

from __future__ import annotations

import numpy as np

from specnotes import theory
from specnotes.exercises import Exercise, register


def _serving_cases(fn):
    def want(step, verify, alpha, k, c):
        return float(theory.speedup(alpha, k, c, verify / step))

    fixed = [
        (0.010, 0.010, 0.8, 4, 0.0, "batch 1, weight-bound: the verify pass is free, drafts too"),
        (0.010, 0.010, 0.8, 4, 0.1, "free verify, a draft model at c = 0.1"),
        (0.050, 0.240, 0.8, 4, 0.05, "compute-bound batch: the verify pass costs ~5 steps"),
        (0.020, 0.030, 0.0, 3, 0.0, "nothing is ever accepted"),
    ]
    for step, verify, alpha, k, c, label in fixed:
        got = fn(step, verify, alpha, k, c)
        ok = got is not None and np.isclose(float(got), want(step, verify, alpha, k, c), rtol=1e-9)
        yield label, ok, f"expected {want(step, verify, alpha, k, c):.6g}, got {got!r}"
    rng = np.random.default_rng(8)
    for i in range(20):
        step = float(rng.uniform(0.001, 0.1))
        verify = step * float(rng.uniform(1, 8))
        alpha, k, c = float(rng.uniform(0, 0.99)), int(rng.integers(1, 10)), float(rng.uniform(0, 0.5))
        got = fn(step, verify, alpha, k, c)
        if got is None or not np.isclose(float(got), want(step, verify, alpha, k, c), rtol=1e-9):
            yield (f"random case {i}: step={step:.4g}, verify={verify:.4g}, alpha={alpha:.3f}, k={k}, "
                   f"c={c:.3f}"), False, f"expected {want(step, verify, alpha, k, c):.6g}, got {got!r}"
            return
    yield "20 random cases", True, ""


def _heuristic_cases(fn):
    cases = [(5, 5, 5, 7, "all five accepted: +2"), (5, 5, 2, 4, "a rejection: -1"),
             (1, 1, 0, 1, "never below 1"), (20, 20, 20, 20, "never above 20"),
             (19, 19, 19, 20, "+2 clipped at 20"), (6, 0, 0, 6, "nothing drafted (no match): unchanged"),
             (4, 3, 3, 6, "a draft cut short by max_new_tokens but all accepted: +2")]
    for k, drafted, accepted, want, label in cases:
        got = fn(k, drafted, accepted)
        yield label, got == want, (f"k={k}, drafted={drafted}, accepted={accepted}: "
                                   f"expected {want}, got {got!r}")


register(Exercise(
    id="08.1",
    title="the serving speedup from two measured pass times",
    hint="A round drafts k tokens (k x c plain steps) and runs one verify pass; it yields "
         "E = 1 + α + ... + α^k tokens per sequence. Plain decoding yields 1 token per step. "
         "The ratio of tokens per second is E * step / (k * c * step + verify).",
    cases=_serving_cases,
))

register(Exercise(
    id="08.2",
    title="transformers' heuristic draft-length schedule",
    hint="If a draft was made and every drafted token was accepted, add 2; if a draft was made and any "
         "was rejected, subtract 1; with nothing drafted, keep k. Then clip to [1, 20].",
    cases=_heuristic_cases,
))
