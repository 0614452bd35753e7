"""Figures of speed: what a forward pass costs (notebooks 00 and 01), how the engine spends its passes
(the cache across rounds in 02, candidate trees in 06), what drafters buy (06), live timings (07) and
serving at batch (08). Pure (data in, figure out), tested headless.

Every function here follows one convention: it takes ``ax=None`` (``fig=None`` where it draws several
panels) and returns the matplotlib Figure it drew on. Pass an Axes, say one panel of a ``plt.subplots``
grid, to draw into it (the return is then ``ax.figure``), or leave it None for a new figure. None of them
calls ``plt.show()``; the notebook does.

The figures of exactness are in specnotes.viz_exactness; the text the notebooks print (readouts, a trace
as HTML) in specnotes.readouts; the speedup explorer's view and drawing, with the sliders, in
specnotes.widgets.
"""

from __future__ import annotations

import numpy as np

from specnotes import checks

# ---------------------------------------- notebook 00 and 01: what one forward pass costs


def plot_step_times(prefill_seconds: float, step_seconds, prompt_tokens: int, ax=None):
    """Bar per forward pass (prefill first, then one per decode step) in ms, with the decode median."""
    import matplotlib.pyplot as plt

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


def plot_roofline(gpu, dtype: str, k: int = 4, prefill: int = 512, ax=None):
    """Attainable FLOP/s against arithmetic intensity (FLOPs per weight byte), with the decode (T=1),
    verify (T=k+1) and prefill passes marked."""
    import matplotlib.pyplot as plt

    from specnotes import checks, roofline

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
    import matplotlib.pyplot as plt

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


# ---------------------------------------- notebook 02: the cache across rounds


def plot_cache_lengths(result, prompt_len: int, ax=None, zoom: int | None = None):
    """Target KV-cache length per round: after the verify pass (before rollback) and after rollback.
    zoom: also draw the first `zoom` rounds on their own axes (beside the whole run), where each round's
    rollback is wide enough to see."""
    import matplotlib.pyplot as plt

    if zoom is not None:
        zoom = checks.whole(zoom, "zoom", low=1, scalar=True)
    if ax is None:
        fig, axes = plt.subplots(1, 2 if zoom else 1, figsize=(12 if zoom else 8, 3.2), squeeze=False)
        axes = list(axes[0])
    else:
        axes = [ax]
    after = [r.cache_len for r in result.trace]
    before = [(after[i - 1] if i else prompt_len - 1) + len(r.drafted) + 1
              for i, r in enumerate(result.trace)]
    rounds = np.arange(1, len(after) + 1)
    views = [(axes[0], len(rounds))]
    if zoom and len(axes) > 1:
        views.append((axes[1], min(zoom, len(rounds))))
    for axis, n in views:
        axis.plot(rounds[:n], before[:n], "v", color="tab:red",
                  label="after the verify pass (drafts included)")
        axis.plot(rounds[:n], after[:n], "o-", ms=3, color="tab:blue",
                  label="after rollback (accepted prefix only)")
        axis.vlines(rounds[:n], after[:n], before[:n], color="tab:red", alpha=0.4)
        axis.set_xlabel("round")
        axis.set_ylabel("cached positions (axis does not start at 0)")
    axes[0].legend(fontsize=8, loc="upper left")
    title = "Rejected drafts leave keys and values behind; cropping removes them"
    if len(views) > 1:
        axes[0].figure.suptitle(title, fontsize=11)
        axes[0].set_title("the whole run", fontsize=10)
        views[1][0].set_title(f"the first {views[1][1]} rounds: each red line is one rollback", fontsize=10)
        views[1][0].set_ylabel("")
    else:
        axes[0].set_title(title, fontsize=10)
    return axes[0].figure


# ---------------------------------------- notebook 06: trees and drafters


def plot_tree_and_mask(tree, labels=None, root_label: str = "root", fig=None):
    """Left: the candidate tree (root at the left, one column per depth). Right: its attention mask
    over [root, nodes] (dark: may attend). labels: text per node (default: the token ids)."""
    import matplotlib.pyplot as plt

    labels = [str(t) for t in tree.tokens] if labels is None else list(labels)
    fig = fig or plt.figure(figsize=(12, 4.2))
    ax_tree, ax_mask = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.25, 1]})
    depth = tree.depth
    rows = {}
    for d in range(1, int(depth.max(initial=0)) + 1):
        nodes = np.flatnonzero(depth == d)
        for j, node in enumerate(nodes):
            rows[int(node)] = (d, -(j - (len(nodes) - 1) / 2))
    pos = {-1: (0, 0.0), **rows}
    for node, parent in enumerate(tree.parents):
        (x0, y0), (x1, y1) = pos[parent], pos[node]
        ax_tree.plot([x0, x1], [y0, y1], color="0.6", lw=1, zorder=1)
    for node, (x, y) in pos.items():
        text = root_label if node < 0 else f"{node + 1}: {labels[node]}"
        ax_tree.text(x, y, text, ha="center", va="center", fontsize=8, zorder=2,
                     bbox={"boxstyle": "round", "fc": "tab:blue" if node < 0 else "white", "ec": "0.4",
                           "alpha": 0.25 if node < 0 else 1.0})
    deepest = int(depth.max(initial=0))
    ax_tree.set_xlim(-0.5, deepest + 0.6)
    ax_tree.set_ylim(min(y for _, y in pos.values()) - 0.7, max(y for _, y in pos.values()) + 0.7)
    ax_tree.set_xticks(range(deepest + 1), ["root"] + [f"depth {d}" for d in range(1, deepest + 1)])
    ax_tree.set_yticks([])
    ax_tree.set_title(f"{len(tree)} candidates, one target pass")
    see = tree.ancestry()
    ax_mask.imshow(see, cmap="Blues", vmin=0, vmax=1.4)
    ticks = ["root"] + [str(i + 1) for i in range(len(tree))]
    ax_mask.set_xticks(range(len(ticks)), ticks, fontsize=7)
    ax_mask.set_yticks(range(len(ticks)), ticks, fontsize=7)
    ax_mask.set_xlabel("attends to (plus every cached token)")
    ax_mask.set_ylabel("query row")
    ax_mask.set_title("Tree attention mask: each node sees its ancestors only")
    fig.tight_layout()
    return fig


def plot_tree_sizes(sizes, tokens_per_pass, speedups, labels=None, ax=None):
    """Tokens per target pass and wall-clock speedup against the number of tree nodes."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(7, 4))[1]
    order = np.argsort(sizes)
    sizes, tpp, sp = (np.asarray(a)[order] for a in (sizes, tokens_per_pass, speedups))
    ax.plot(sizes, tpp, "o-", label="tokens per target pass")
    ax.plot(sizes, sp, "s--", label="wall-clock speedup (this machine)")
    if labels is not None:
        for x, y, text in zip(sizes, tpp, np.asarray(labels)[order], strict=True):
            ax.annotate(text, (x, y), fontsize=7, xytext=(3, 4), textcoords="offset points")
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xlabel("tree size (candidate tokens verified per pass)")
    ax.set_ylabel("× plain decoding")
    ax.set_title("Bigger trees accept more per pass; on a CPU each extra node also costs")
    ax.legend(fontsize=8)
    return ax.figure


def plot_drafter_bars(rows, value: str = "tokens_per_call", ax=None, baseline: float | None = 1.0):
    """Grouped bars: one group per drafter, one bar per task kind (rows from specnotes.drafter_table.table);
    given only the "all" rows, one bar per drafter."""
    import matplotlib.pyplot as plt

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
    import matplotlib.pyplot as plt

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


# notebook 07's figures live in specnotes.viz_live; re-exported here for the notebooks that use them
from specnotes.viz_live import plot_mode_rates, plot_predicted_vs_measured  # noqa: E402, F401

# notebook 08's figures live in specnotes.viz_serving; re-exported here for the notebooks that use them
from specnotes.viz_serving import (  # noqa: E402, F401
    plot_arrivals,
    plot_batch_grid,
    plot_crossover_by_context,
    plot_measured_crossover,
    plot_serving,
    plot_temperature_sweep,
)
