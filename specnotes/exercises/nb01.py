"""Hidden cases for notebook 01: the decode step's memory time, and the ridge point."""

from __future__ import annotations

import numpy as np

from specnotes.exercises import Exercise, register


def _step_cases(fn):
    cases = [(7e9, 2, 3350), (70e9, 2, 3350), (8e9, 0.5, 320), (135e6, 4, 25), (1e9, 1, 1000)]
    for n_params, bytes_per_param, bandwidth_gbps in cases:
        want = n_params * bytes_per_param / (bandwidth_gbps * 1e9) * 1e3
        got = fn(n_params, bytes_per_param, bandwidth_gbps)
        ok = got is not None and np.isclose(float(got), want, rtol=1e-9)
        yield (f"{n_params:.3g} params x {bytes_per_param} B at {bandwidth_gbps} GB/s", ok,
               f"expected {want:.4g} ms, got {got!r}")


def _ridge_cases(fn):
    cases = [(989, 3350, 2), (65, 320, 2), (312, 2039, 2), (0.12, 25, 4), (989, 3350, 0.5)]
    for peak_tflops, bandwidth_gbps, bytes_per_param in cases:
        want = peak_tflops * 1e12 * bytes_per_param / (2 * bandwidth_gbps * 1e9)
        got = fn(peak_tflops, bandwidth_gbps, bytes_per_param)
        ok = got is not None and np.isclose(float(got), want, rtol=1e-9)
        yield (f"{peak_tflops} TFLOPS, {bandwidth_gbps} GB/s, {bytes_per_param} B/param", ok,
               f"expected {want:.4g} tokens, got {got!r}")


register(Exercise(
    id="01.1",
    title="the memory time of one decode step",
    hint="A batch-1 decode step reads every weight once: bytes = parameters x bytes per parameter. "
         "Divide by the bandwidth in bytes/s (GB/s x 1e9), and convert seconds to milliseconds.",
    cases=_step_cases,
))

register(Exercise(
    id="01.2",
    title="the ridge point in tokens per pass",
    hint="A pass over T tokens does 2 x params x T FLOPs and reads params x bytes. Set the compute time "
         "equal to the memory time and solve for T: the parameter count cancels.",
    cases=_ridge_cases,
))
