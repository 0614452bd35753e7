"""Figures of what a forward pass costs: the roofline of a GPU catalog entry and a model (notebook 01,
and its calculator widget), and measured time against the tokens in one pass.

Each figure function takes ``ax=None`` (``fig=None`` where it draws several panels) and returns the
matplotlib Figure it drew on; none calls ``plt.show()``. Pure (data in, figure out), tested headless.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from specnotes import checks, roofline


def plot_roofline(gpu, dtype: str, k: int = 4, prefill: int = 512, ax=None):
    """Attainable FLOP/s against arithmetic intensity (FLOPs per weight byte), with the decode (T=1),
    verify (T=k+1) and prefill passes marked."""
    k, prefill = checks.whole(k, "k", scalar=True), checks.whole(prefill, "prefill", scalar=True)
    m = roofline.machine(gpu)
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    ai = np.logspace(-1, 4, 200)
    ax.loglog(ai, np.minimum(m.peak_flops, ai * m.bandwidth), "k-", lw=1.5)
    ridge_ai = m.peak_flops / m.bandwidth
    ax.axvline(ridge_ai, color="gray", ls=":", lw=1)
    for label, tokens, color in (("decode, T=1", 1, "tab:red"), (f"verify, T={k + 1}", k + 1, "tab:orange"),
                                 (f"prefill, T={prefill}", prefill, "tab:green")):
        x = float(roofline.arithmetic_intensity(tokens, dtype))
        ax.plot([x], [min(m.peak_flops, x * m.bandwidth)], "o", ms=9, color=color, label=label)
    ax.set_xlabel("FLOPs per byte of weights read")
    ax.set_ylabel("attainable FLOP/s")
    # the same axis in tokens per pass: intensity is proportional to the tokens that share one weight read
    per_token = float(roofline.arithmetic_intensity(1, dtype))
    top = ax.secondary_xaxis("top", functions=(lambda a: a / per_token, lambda t: t * per_token))
    top.set_xlabel("tokens per pass (T)", fontsize=9)
    ridge_t = roofline.ridge_tokens(m, dtype)
    ax.annotate(f"ridge: T = {ridge_t:,.0f}", (ridge_ai, m.peak_flops), textcoords="offset points",
                xytext=(4, -14), fontsize=8, color="gray")
    ax.set_title(f"{m.name} ({dtype}): ridge at {ridge_t:,.0f} tokens/pass", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return ax.figure


def plot_tokens_curve(tokens, measured_s, predicted_s, ax=None):
    """Measured forward time against tokens per pass, with the roofline lower bound beside it."""
    tokens = np.asarray(tokens)
    measured_ms, predicted_ms = np.asarray(measured_s) * 1e3, np.asarray(predicted_s) * 1e3
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    ax.plot(tokens, measured_ms, "o-", label="measured")
    ax.plot(tokens, predicted_ms, "k--", label="roofline estimate from the measured rates")
    ax.plot(tokens, measured_ms[0] * tokens, ":", color="tab:red", label="T separate decode steps")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("new tokens per forward pass (T)")
    ax.set_ylabel("ms per pass")
    ax.legend(fontsize=8)
    ax.set_title("Extra positions ride along: one pass of T tokens vs T passes", fontsize=10)
    return ax.figure
