"""Figures that compare drafters: a value per drafter and prompt kind as bars, and acceptance by draft
position (notebooks 06 and 08).

Each figure function takes ``ax=None`` (``fig=None`` where it draws several panels) and returns the
matplotlib Figure it drew on; none calls ``plt.show()``. Pure (data in, figure out), tested headless.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def plot_drafter_bars(rows, value: str = "tokens_per_call", ax=None, baseline: float | None = 1.0):
    """Grouped bars: one group per drafter, one bar per task kind (rows from specnotes.drafter_table.table);
    given only the "all" rows, one bar per drafter."""
    if rows and not hasattr(rows[0], value):
        fields = ", ".join(f for f in vars(rows[0]) if not f.startswith("_"))
        raise ValueError(f"value {value!r} is not a column of the drafter table; choose one of {fields}")
    ax = ax or plt.subplots(figsize=(9, 3.6))[1]
    names = list(dict.fromkeys(r.drafter for r in rows))
    kinds = [k for k in dict.fromkeys(r.kind for r in rows) if k != "all"] or ["all"]
    width = 0.8 / max(len(kinds), 1)
    for j, kind in enumerate(kinds):
        vals = [next((getattr(r, value) for r in rows if r.drafter == n and r.kind == kind), np.nan)
                for n in names]
        ax.bar(np.arange(len(names)) + (j - (len(kinds) - 1) / 2) * width, vals, width, label=kind)
    if baseline is not None:
        ax.axhline(baseline, color="k", lw=0.8, ls="--")
    ax.set_xticks(np.arange(len(names)), names, rotation=20, ha="right")
    labels = {"tokens_per_call": "tokens per target pass", "speedup": "wall-clock speedup vs plain",
              "alpha": "α (acceptance rate)"}
    ax.set_ylabel(labels.get(value, value))
    ax.legend(title="task", fontsize=8, ncols=len(kinds))
    return ax.figure


def plot_position_acceptance(rows, ax=None, max_positions: int = 8):
    """α at draft position 1, 2, ... per drafter (the "all" rows of specnotes.drafter_table.table), over
    the count of rounds behind each point (rows with `reached`; ax, if given, is the upper panel)."""
    shown = [r for r in rows if r.kind == "all" and r.per_position]
    counts = all(getattr(r, "reached", None) for r in shown)
    if ax is None:
        fig, axes = plt.subplots(2 if counts else 1, 1, figsize=(6.5, 5.2 if counts else 3.6), sharex=True,
                                 squeeze=False, gridspec_kw={"height_ratios": [2, 1] if counts else [1]})
        ax, ax_n = axes[0, 0], (axes[1, 0] if counts else None)
    else:
        ax_n = None
    for r in shown:
        pp = np.asarray(r.per_position[:max_positions], dtype=float)
        if counts:  # a position no round reached has no rate (and no point on a log axis)
            n = np.asarray(r.reached[:max_positions], dtype=float)
            pp, n = np.where(n > 0, pp, np.nan), np.where(n > 0, n, np.nan)
        line, = ax.plot(np.arange(1, len(pp) + 1), pp, "o-", ms=4, label=r.drafter)
        if ax_n is not None:
            ax_n.plot(np.arange(1, len(n) + 1), n, "o-", ms=3, color=line.get_color())
    ax.set_ylabel("P(accept at i | reached i)")
    ax.set_ylim(-0.03, 1.03)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=8)
    if ax_n is not None:
        ax_n.set_yscale("log")
        ax_n.set_ylabel("rounds reaching i")
        ax_n.set_xlabel("draft position i (1 = first drafted token)")
    else:
        ax.set_xlabel("draft position i (1 = first drafted token)")
    return ax.figure


def plot_speedup_bands(bands: dict, ax=None, title: str | None = None):
    """Median speedup per drafter or policy with the lowest and highest repeat as an error bar. bands:
    name -> (median, lowest, highest), as drafter_table.bands gives."""
    if not bands:
        raise ValueError("bands is empty: nothing to draw")
    ax = ax or plt.subplots(figsize=(7, 3.4))[1]
    names = list(bands)
    median, low, high = (np.array([bands[n][i] for n in names]) for i in range(3))
    ax.bar(np.arange(len(names)), median, 0.6, color="tab:blue")
    ax.errorbar(np.arange(len(names)), median, yerr=[median - low, high - median], fmt="none", ecolor="k",
                capsize=3, label="lowest to highest repeat")
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xticks(np.arange(len(names)), names, rotation=20, ha="right")
    ax.set_ylabel("speedup vs plain (median)")
    ax.legend(fontsize=8, loc="upper right")
    if title:
        ax.set_title(title)
    return ax.figure
