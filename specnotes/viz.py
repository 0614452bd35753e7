"""Plotting functions the notebooks and widgets call: pure (data in, figure out), tested headless.

00 plots per-step decode times; later notebooks add their figures here.
"""

from __future__ import annotations

import numpy as np


def plot_step_times(prefill_seconds: float, step_seconds, prompt_tokens: int, ax=None):
    """Bar per forward pass (prefill first, then one per decode step) in ms, with the decode median."""
    import matplotlib.pyplot as plt

    steps_ms = np.asarray(step_seconds, dtype=float) * 1e3
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar([0], [prefill_seconds * 1e3], color="tab:orange",
           label=f"prefill: {prompt_tokens} prompt tokens in one pass")
    ax.bar(np.arange(1, len(steps_ms) + 1), steps_ms, color="tab:blue",
           label="decode: one pass per new token")
    if len(steps_ms):
        med = float(np.median(steps_ms))
        ax.axhline(med, color="k", lw=1, ls="--", label=f"decode median {med:.0f} ms")
    ax.set_xlabel("forward pass")
    ax.set_ylabel("ms")
    ax.set_title("Every new token costs one full forward pass")
    ax.legend(loc="upper right", fontsize=8)
    return ax.figure
