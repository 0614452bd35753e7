"""Honest timing: warm-up, repeats, median and spread, CUDA synchronized; forward-pass step times.

05 measures the draft cost c with it; 01, 07 and `make bench` build on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Timing:
    seconds: np.ndarray  # (repeats,) each run's wall time

    @property
    def median(self) -> float:
        return float(np.median(self.seconds))

    @property
    def spread(self) -> tuple[float, float]:
        """(min, max) of the runs: how noisy the machine was."""
        return float(self.seconds.min()), float(self.seconds.max())

    def __str__(self) -> str:
        lo, hi = self.spread
        return f"{self.median * 1e3:.1f} ms (runs {lo * 1e3:.1f}–{hi * 1e3:.1f})"


def time_call(fn: Callable[[], object], repeats: int = 7, warmup: int = 2, device="cpu") -> Timing:
    """Run fn `warmup` times untimed, then `repeats` times timed (synchronizing CUDA around each)."""
    from specnotes.decode import sync

    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats} and {warmup}")
    for _ in range(warmup):
        fn()
    sync(device)
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync(device)
        runs.append(time.perf_counter() - start)
    return Timing(np.asarray(runs))


def time_forward(model, context: int = 64, tokens: int = 1, repeats: int = 7, warmup: int = 2) -> Timing:
    """Time one forward pass over `tokens` new positions on top of a KV cache of `context` positions
    (the cache is cropped back after every pass, so each run sees the same context)."""
    import torch

    from specnotes.decode import forward_pass

    device = next(model.parameters()).device
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(vocab, (1, context), generator=gen).to(device)
    new = torch.randint(vocab, (1, tokens), generator=gen).to(device)
    with torch.inference_mode():
        _, cache = forward_pass(model, prompt)

        def step():
            forward_pass(model, new, cache)
            cache.crop(-tokens)

        return time_call(step, repeats, warmup, device)
