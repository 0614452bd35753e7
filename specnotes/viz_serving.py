"""Figures of serving at batch (notebook 08): throughput against batch size and context, the measured
(B, T) grid and its crossover, acceptance by temperature, and token arrivals."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from specnotes import serving


def plot_serving(alpha: float, k: int, c: float, n_params: float, dtype: str, gpu, contexts=(0, 4096, 32768),
                 batches=None, ax=None):
    """Speculative / plain throughput per GPU against batch size, one line per context length; the
    dotted part of a line is where the batch no longer fits in the GPU's memory."""
    batches = np.unique(np.geomspace(1, 1024, 60).astype(int)) if batches is None else np.asarray(batches)
    ax = ax or plt.subplots(figsize=(7.5, 4))[1]
    for ctx in contexts:
        s = serving.simulate(batches, alpha, k, c, n_params, dtype, gpu, ctx)
        line, = ax.plot(batches, np.where(s.fits, s.speedup, np.nan), lw=2, label=f"context {ctx:,}")
        ax.plot(batches, np.where(s.fits, np.nan, s.speedup), ls=":", color=line.get_color())
        cross = serving.crossover_batch(alpha, k, c, n_params, dtype, gpu, ctx)
        if cross is not None and cross <= batches[-1]:
            ax.axvline(cross, color=line.get_color(), lw=0.8, ls="--")
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size (sequences decoded together)")
    ax.set_ylabel("throughput per GPU: speculative / plain")
    ax.set_title(f"{n_params / 1e9:g}B {dtype} on {getattr(gpu, 'name', gpu)}: "
                 f"α={alpha:.2f}, k={k}, c={c:.2f}"
                 " (dashed: crossover; dotted: does not fit)", fontsize=9)
    ax.legend(fontsize=8)
    return ax.figure


def plot_crossover_by_context(alpha: float, k: int, c: float, n_params: float, dtype: str, gpu, contexts=None,
                              max_batch: int = 4096, ax=None):
    """The batch at which speculation starts to lower throughput, against context length, beside the
    largest batch that fits in memory: the flip happens in practice only where the first is below the
    second. A context with no crossing up to max_batch is drawn as a triangle at the top."""
    contexts = (np.unique(np.geomspace(1, 131072, 35).astype(int)) if contexts is None
                else np.asarray(contexts))
    ax = ax or plt.subplots(figsize=(7.5, 4))[1]
    cross = [serving.crossover_batch(alpha, k, c, n_params, dtype, gpu, int(x), max_batch=max_batch)
             for x in contexts]
    fits = [serving.largest_batch(k, n_params, dtype, gpu, int(x)) for x in contexts]
    ys = np.array([np.nan if b is None else b for b in cross], dtype=float)
    ax.plot(contexts, ys, "o-", ms=3, color="tab:blue", label="crossover batch (speculation loses from here)")
    never = np.isnan(ys)
    if never.any():
        ax.plot(contexts[never], np.full(never.sum(), max_batch), "^", color="tab:blue",
                label=f"no crossover up to batch {max_batch:,}")
    if all(f is not None for f in fits):
        ax.plot(contexts, np.maximum(fits, 0.5), "k--", lw=1.2, label="largest batch that fits in memory")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("context length (tokens of KV cache per sequence)")
    ax.set_ylabel("batch size")
    ax.set_title(f"{n_params / 1e9:g}B {dtype} on {getattr(gpu, 'name', gpu)}: "
                 f"α={alpha:.2f}, k={k}, c={c:.2f}", fontsize=9)
    ax.legend(fontsize=8)
    return ax.figure


def plot_batch_grid(times: dict, ax=None):
    """Measured pass time against batch size, one line per tokens-per-sequence T."""
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    batches = sorted({b for b, _ in times})
    for t in sorted({t for _, t in times}):
        ax.plot(batches, [1e3 * times[(b, t)] for b in batches], "o-", label=f"T = {t} per sequence")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("ms per forward pass")
    ax.set_title("Measured: extra positions are free only while the batch is small")
    ax.legend(fontsize=8)
    return ax.figure


def plot_measured_crossover(measured: dict, predicted: dict, ax=None):
    """Speedup by batch: measured pass times against the roofline model of this machine."""
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    lines = (("measured (pass times)", measured, "o-"), ("roofline model", predicted, "s--"))
    for label, data, style in lines:
        b = sorted(data)
        ax.plot(b, [data[x] for x in b], style, label=label)
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_ylabel("speculative / plain throughput")
    ax.legend(fontsize=8)
    return ax.figure


def plot_temperature_sweep(records: list[dict], value: str = "alpha", ax=None):
    """α (or tokens per pass) against temperature, one line per (drafter, prompt kind)."""
    if records and value not in records[0]:
        raise ValueError(f"value {value!r} is not a column of the sweep; choose one of "
                         f"{', '.join(records[0])}")
    ax = ax or plt.subplots(figsize=(7, 4))[1]
    sel = [r for r in records if r["kind"] != "all"]
    styles = {}
    for drafter in dict.fromkeys(r["drafter"] for r in sel):
        styles[drafter] = "-" if not styles else "--"
        for kind in dict.fromkeys(r["kind"] for r in sel):
            pts = sorted((r["temperature"], r[value]) for r in sel
                         if r["drafter"] == drafter and r["kind"] == kind)
            ax.plot([t for t, _ in pts], [v for _, v in pts], styles[drafter], marker="o",
                    label=f"{drafter}: {kind}")
    ax.set_xlabel("temperature (0 = greedy)")
    ax.set_ylabel({"alpha": "α (accepted / judged drafts)"}.get(value, value.replace("_", " ")))
    ax.legend(fontsize=7, ncols=2)
    return ax.figure


def plot_arrivals(series: dict, ax=None):
    """Inter-token gaps as an empirical CDF per mode: speculative tokens arrive in bursts (many gaps of
    zero, then one long wait), plain ones at a steady pace. series: name -> arrival times in seconds."""
    short = [name for name, times in series.items() if len(times) < 2]
    if short:
        raise ValueError(f"series: {short[0]!r} has fewer than two arrival times, so no gap to plot")
    ax = ax or plt.subplots(figsize=(6.5, 4))[1]
    for name, times in series.items():
        gaps = np.sort(np.diff(np.asarray(times)) * 1e3)
        ax.step(gaps, np.arange(1, len(gaps) + 1) / len(gaps), where="post",
                label=f"{name}: median {np.median(gaps):.0f} ms, p95 {np.percentile(gaps, 95):.0f} ms")
    ax.set_xlabel("gap before the next token (ms)")
    ax.set_ylabel("fraction of gaps ≤ x")
    ax.set_title("Inter-token latency: steady against bursty")
    ax.legend(fontsize=8, loc="lower right")
    return ax.figure


def plot_batch_flip(sweep, predicted: dict | None = None, fig=None):
    """The flip measured in the engine (specnotes.batch_sweep): speculative / plain total tokens/s against
    batch size, one panel per mix, one line per drafter: the median over repeats, and the band from the
    lowest to the highest repeat. predicted: {(mix, drafter): the roofline's crossover batch or None},
    drawn as a dashed vertical line in the drafter's colour."""
    mixes = sweep.mixes()
    fig = fig or plt.figure(figsize=(6.5 * len(mixes), 4))
    axes = fig.subplots(1, len(mixes), sharey=True, squeeze=False)
    batches = np.array(sweep.batches())
    for ax, mix in zip(axes[0], mixes, strict=True):
        for mode in sweep.modes():
            median, low, high = sweep.band(mix, mode)
            line, = ax.plot(batches, median, "o-", lw=2, label=mode)
            ax.fill_between(batches, low, high, color=line.get_color(), alpha=0.2, lw=0)
            cross = (predicted or {}).get((mix, mode))
            if cross is not None and cross <= batches[-1]:
                ax.axvline(cross, color=line.get_color(), lw=1, ls="--")
        ax.axhline(1, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(batches, [str(b) for b in batches])
        ax.set_xlabel("batch size (rows decoded together)")
        ax.set_title(f"{mix} prompts (band: lowest to highest repeat; dashed: roofline crossover)",
                     fontsize=9)
        ax.legend(fontsize=8)
    axes[0, 0].set_ylabel("total tokens/s: speculative / plain")
    return fig


def plot_load_flip(sweeps: dict, spec, base: str = "plain", predicted: dict | None = None, fig=None):
    """The flip measured in a server (one loadgen.Sweep per mix): each mode in `spec` (a name or a list),
    its total tokens/s over `base`'s against concurrent requests, one panel per mix: the median of the
    repeats' ratios and the band from the lowest to the highest. predicted: {mix: the roofline's crossover
    batch or None}, drawn dashed."""
    specs = [spec] if isinstance(spec, str) else list(spec)
    fig = fig or plt.figure(figsize=(5.5 * len(sweeps), 3.8))
    axes = fig.subplots(1, len(sweeps), sharey=True, squeeze=False)
    for ax, (mix, sweep) in zip(axes[0], sweeps.items(), strict=True):
        levels = np.array(sweep.levels)
        for mode in specs:
            median, low, high = sweep.ratio_band(mode, base)
            line, = ax.plot(levels, median, "o-", lw=2, label=f"{mode} / {base}")
            ax.fill_between(levels, low, high, color=line.get_color(), alpha=0.2, lw=0)
        cross = (predicted or {}).get(mix)
        if cross is not None and cross <= levels[-1]:
            ax.axvline(cross, color="grey", lw=1, ls="--", label="roofline crossover")
        ax.axhline(1, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels, [str(c) for c in levels])
        ax.set(xlabel="concurrent requests")
        ax.set_title(f"{mix} (band: lowest to highest repeat)", fontsize=9)
        ax.legend(fontsize=8)
    axes[0, 0].set_ylabel("total tokens/s over plain")
    return fig


def plot_k_over_time(histories: dict, fig=None):
    """The draft length each policy chose, round by round, one panel per workload. histories:
    (workload, policy) -> the k chosen in each round (a schedule's `history`)."""
    if not histories or any(len(h) == 0 for h in histories.values()):
        raise ValueError("histories must map (workload, policy) to a non-empty list of k per round")
    workloads = list(dict.fromkeys(w for w, _ in histories))
    fig = fig or plt.figure(figsize=(6 * len(workloads), 3.4))
    axes = fig.subplots(1, len(workloads), squeeze=False)[0]
    for ax, workload in zip(axes, workloads, strict=True):
        for (w, policy), ks in histories.items():
            if w == workload:
                ax.step(np.arange(1, len(ks) + 1), ks, where="post", label=policy)
        ax.set_xlabel("round")
        ax.set_ylabel("k chosen")
        ax.set_title(workload)
        ax.legend(fontsize=8)
    return fig
