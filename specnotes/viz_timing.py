"""Figures of measured time: a decode's prefill and steps (notebook 00), tokens/s by engine mode, and each
mode's predicted speedup against its measured one (notebook 07).

Each figure function takes ``ax=None`` (``fig=None`` where it draws several panels) and returns the
matplotlib Figure it drew on; none calls ``plt.show()``. Pure (data in, figure out), tested headless.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D


def plot_step_times(prefill_seconds: float, step_seconds, prompt_tokens: int, ax=None):
    """Bar per forward pass (prefill first, then one per decode step) in ms, with the decode median."""
    steps_ms = np.asarray(step_seconds, dtype=float) * 1e3
    ax = ax or plt.subplots(figsize=(8, 3.2))[1]
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


def plot_mode_rates(runs, sampling: str = "greedy", ax=None):
    """tokens/s by mode, one bar group per prompt kind, with each mode's min-max over repeats
    (live_summary.Record, as live.run's report.runs holds them)."""
    ax = ax or plt.subplots(figsize=(8, 3.6))[1]
    sel = [r for r in runs if r.sampling == sampling]
    modes = list(dict.fromkeys(r.mode for r in sel))
    kinds = list(dict.fromkeys(r.prompt_kind for r in sel))
    width = 0.8 / max(len(modes), 1)
    for j, mode in enumerate(modes):
        rs = [next(r for r in sel if r.mode == mode and r.prompt_kind == k) for k in kinds]
        x = np.arange(len(kinds)) + (j - (len(modes) - 1) / 2) * width
        vals = np.array([r.tokens_per_s for r in rs])
        lo = vals - np.array([r.tokens_per_s_spread[0] for r in rs])
        hi = np.array([r.tokens_per_s_spread[1] for r in rs]) - vals
        ax.bar(x, vals, width, yerr=[np.maximum(lo, 0), np.maximum(hi, 0)], capsize=2, label=mode)
    ax.set_xticks(np.arange(len(kinds)), [f"{k} prompt" for k in kinds])
    ax.set_ylabel("new tokens per second")
    ax.set_title(f"{sampling}: throughput by mode (bars: median; whiskers: min–max over repeats)")
    ax.legend(fontsize=7, ncols=2)
    return ax.figure


def plot_predicted_vs_measured(runs, ax=None, band: float = 0.10):
    """Each engine mode's predicted speedup against its measured one, with the ±band corridor
    (live_summary.Record; those with a prediction)."""
    ax = ax or plt.subplots(figsize=(5, 4.6))[1]
    pts = [(r, r.prediction.predicted_speedup) for r in runs if r.prediction is not None]
    top = max([1.5] + [max(predicted, r.speedup) * 1.1 for r, predicted in pts])
    xs = np.linspace(0, top, 50)
    ax.plot(xs, xs, "k-", lw=0.8)
    ax.fill_between(xs, xs * (1 - band), xs * (1 + band), color="0.85", label=f"±{band:.0%}")
    # colour: the mode; marker: the sampling; fill: the prompt kind. A legend instead of a label at every
    # point, which overlapped where several modes land near 1x
    markers = {"greedy": "o", "sample": "s"}
    modes = list(dict.fromkeys(r.mode for r, _ in pts))
    colours = {m: f"C{i % 10}" for i, m in enumerate(modes)}
    kinds = list(dict.fromkeys(r.prompt_kind for r, _ in pts))
    for r, predicted in pts:
        filled = kinds.index(r.prompt_kind) == 0
        face = colours[r.mode] if filled else "none"
        ax.scatter(predicted, r.speedup, marker=markers.get(r.sampling, "o"), s=36,
                   edgecolors=colours[r.mode], facecolors=face, linewidths=1.4)
    ax.axhline(1, color="tab:red", lw=0.6, ls=":")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("predicted speedup (measured α, draft and verify costs)")
    ax.set_ylabel("measured speedup")

    keys = [Line2D([], [], ls="", marker="o", color=colours[m], label=m.removeprefix("engine-"))
            for m in modes]
    keys += [Line2D([], [], ls="", marker=mk, color="0.3", label=s) for s, mk in markers.items()]
    keys += [Line2D([], [], ls="", marker="o", color="0.3", mfc="0.3" if i == 0 else "none",
                    label=f"{k} prompts ({'filled' if i == 0 else 'hollow'})")
             for i, k in enumerate(kinds[:2])]
    keys.append(plt.matplotlib.patches.Patch(color="0.85", label=f"±{band:.0%}"))
    ax.legend(handles=keys, fontsize=7, loc="upper left")
    return ax.figure
