"""Hidden cases for notebook 09: the crossover concurrency, and inter-token latency per token and chunk."""

from __future__ import annotations

import numpy as np

from specnotes.exercises import Exercise, register


def _crossover_cases(fn):
    cases = [([1, 2, 4, 8], [10, 20, 30, 40], [15, 25, 29, 35], 4, "loses first at 4"),
             ([1, 4, 16], [10, 20, 30], [9, 25, 35], 1, "loses at the first level"),
             ([1, 2, 4], [10, 20, 30], [10, 19, 31], 2, "equal is not a loss; then 19 < 20"),
             ([2, 8, 32], [5.0, 6.0, 7.0], [6.0, 5.0, 8.0], 8, "the first loss counts, not the last")]
    for levels, plain, spec, want, label in cases:
        got = fn(levels, plain, spec)
        yield label, got == want, f"levels {levels}, plain {plain}, spec {spec}: expected {want}, got {got!r}"


def _itl_cases(fn):
    cases = [([1.0, 1.1, 1.2, 1.3], [1, 1, 1, 1], (0.1, 0.1), "one token per chunk: both gaps equal"),
             ([1.0, 1.3, 1.4], [1, 3, 1], (0.1, 0.2), "a 3-token chunk: 0.4 s over 4 tokens and 2 gaps"),
             ([0.5, 0.9], [2, 4], (0.1, 0.4), "the first chunk's tokens do not count: 0.4 s over 4")]
    for times, tokens, want, label in cases:
        got = fn(times, tokens)
        ok = got is not None and len(got) == 2 and np.allclose(got, want)
        yield label, ok, f"times {times}, tokens {tokens}: expected {want}, got {got!r}"


register(Exercise(
    id="09.1",
    title="the crossover concurrency",
    hint="Walk the levels in order and return the first one where spec < plain (strictly). Every hidden "
         "case has one; loadgen.crossover returns None when there is none.",
    cases=_crossover_cases,
))

register(Exercise(
    id="09.2",
    title="inter-token latency per token and per chunk",
    hint="Both start at the first chunk's arrival: the time from the first to the last chunk, divided by the "
         "tokens after the first chunk (per token) or by the number of gaps between chunks (per chunk).",
    cases=_itl_cases,
))
