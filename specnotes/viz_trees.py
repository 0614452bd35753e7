"""Figures of candidate trees: a tree with its attention mask, and tokens per pass and speedup against
tree size (notebook 06).

Each figure function takes ``ax=None`` (``fig=None`` where it draws several panels) and returns the
matplotlib Figure it drew on; none calls ``plt.show()``. Pure (data in, figure out), tested headless.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def plot_tree_and_mask(tree, labels=None, root_label: str = "root", fig=None):
    """Left: the candidate tree (root at the left, one column per depth). Right: its attention mask
    over [root, nodes] (dark: may attend). labels: text per node (default: the token ids)."""
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


def plot_parallel_pass(positions, see, pairs: int, fig=None):
    """A parallel drafter's one pass (ParallelLite, notebook 06), drawn like the tree mask. Rows: `pairs`
    committed (state, token) pairs, then the mask slots; positions[i] is row i's position and see its
    attention mask (specnotes.training.parallel.block_layout gives both). Left: what each row reads and
    which token its output guesses (the last pair's output and every slot's are the draft; the earlier
    pairs only fill the drafter's cache). Right: the mask."""
    positions, see = np.asarray(positions).reshape(-1), np.asarray(see, dtype=bool)
    q = positions.size
    if see.shape != (q, q) or not 1 <= pairs <= q:
        raise ValueError(f"see must be ({q}, {q}) and 1 <= pairs <= {q}; got {see.shape} and pairs={pairs}")
    fig = fig or plt.figure(figsize=(12, 0.45 * q + 2))
    ax_rows, ax_mask = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.25, 1]})
    names = ([f"pair (h{p}, x{p + 1})" for p in positions[:pairs]]
             + [f"mask slot {j}" for j in range(1, q - pairs + 1)])
    for i, (name, p) in enumerate(zip(names, positions, strict=True)):
        guess = i >= pairs - 1
        ax_rows.text(0.02, -i, f"{name}  at position {p}", va="center", fontsize=8,
                     bbox={"boxstyle": "round", "fc": "tab:orange" if i >= pairs else "tab:blue",
                           "alpha": 0.25, "ec": "0.5"})
        ax_rows.annotate(f"guesses x{p + 2}" if guess else "(fills the cache)", (0.62, -i), xytext=(0.5, -i),
                         va="center", fontsize=8, color="k" if guess else "0.5",
                         arrowprops={"arrowstyle": "->", "color": "0.4"})
    ax_rows.set_xlim(0, 1)
    ax_rows.set_ylim(-q + 0.4, 0.6)
    ax_rows.axis("off")
    ax_rows.set_title(f"{q - pairs + 1} guesses from one pass")
    ax_mask.imshow(see, cmap="Blues", vmin=0, vmax=1.4)
    ticks = [f"p{p}" for p in positions[:pairs]] + [f"s{j}" for j in range(1, q - pairs + 1)]
    ax_mask.set_xticks(range(q), ticks, fontsize=7)
    ax_mask.set_yticks(range(q), ticks, fontsize=7)
    ax_mask.set_xlabel("attends to (plus every cached pair)")
    ax_mask.set_ylabel("query row")
    ax_mask.set_title("Each slot sees the text and the slots before it, never a guess")
    fig.tight_layout()
    return fig
