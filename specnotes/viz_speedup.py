"""The speedup explorer's view and figure (notebook 05): for one (α, k, c), the speedup and tokens per pass
against k and the best k, and the best-k heatmap over (α, c). Pure, so they work without a widget; the
sliders around them are specnotes.widgets.speedup_explorer.

Each figure function takes ``ax=None`` (``fig=None`` where it draws several panels) and returns the
matplotlib Figure it drew on; none calls ``plt.show()``. Pure (data in, figure out), tested headless.
"""

from __future__ import annotations

from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np

from specnotes import checks, theory

ALPHA_GRID = np.round(np.arange(0.0, 0.991, 0.01), 2)  # the explorer's slider values
K_GRID = np.arange(1, 17)
C_GRID = np.round(np.arange(0.0, 1.001, 0.05), 2)


class SpeedupView(NamedTuple):
    alpha: float
    c: float
    ks: np.ndarray  # (K,) 1..k_max
    speedups: np.ndarray  # (K,)
    tokens: np.ndarray  # (K,) expected tokens per target pass
    ceiling: float  # 1 / (1 - alpha): tokens per pass with infinitely long drafts
    k: int
    speedup_at_k: float
    best_k: int
    best_speedup: float
    readout: str


def speedup_view(alpha: float, k: int, c: float, k_max: int = 16) -> SpeedupView:
    """Everything the explorer shows for one slider position (pure; no drawing)."""
    alpha = checks.probability(alpha, "alpha", scalar=True)
    c = checks.positive(c, "c", zero=True, scalar=True)
    k, k_max = checks.whole(k, "k", scalar=True), checks.whole(k_max, "k_max", high=1000, scalar=True)
    ks = np.arange(1, k_max + 1)
    speedups = theory.speedup(alpha, ks, c)
    tokens = theory.expected_tokens(alpha, ks)
    bk, bs = theory.best_k(alpha, c, k_max)
    at_k = float(theory.speedup(alpha, k, c))
    verdict = "faster" if at_k > 1 else ("no change" if at_k == 1 else "SLOWER than plain decoding")
    best = (f"best k={int(bk)} gives {float(bs):.3f}x" if bs > 1
            else f"no k pays: the best, k={int(bk)}, gives {float(bs):.3f}x (α must exceed c)")
    readout = f"α={alpha:.2f}, c={c:.2f}: at k={k} speedup {at_k:.3f}x ({verdict}); {best}"
    ceiling = float("inf") if alpha >= 1 else 1.0 / (1.0 - alpha)
    return SpeedupView(float(alpha), float(c), ks, speedups, tokens, ceiling, int(k), at_k, int(bk),
                       float(bs), readout)


def best_k_grid(alphas=ALPHA_GRID, cs=C_GRID, k_max: int = 16):
    """(len(cs), len(alphas)) best k and best speedup over a grid of alpha and c."""
    return theory.best_k(alphas[None, :], np.asarray(cs)[:, None], k_max)


def draw_speedup(view: SpeedupView, heatmap=None, fig=None):
    """Three panels: speedup against k (best k marked, loss region shaded), tokens per pass against k
    with the 1/(1-alpha) ceiling, and the best-k heatmap over (alpha, c) with this point marked. Returns the
    Figure it drew on (fig, cleared, or a new one), as every viz_* figure does.
    heatmap: best_k_grid()'s answer, to reuse it across redraws."""
    if fig is None:
        fig = plt.figure(figsize=(13, 3.8))
    fig.clear()
    ax1, ax2, ax3 = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1, 1, 1.15]})
    ax1.axhspan(0, 1, color="tab:red", alpha=0.08)
    ax1.axhline(1, color="tab:red", lw=0.8)
    ax1.plot(view.ks, view.speedups, "o-", ms=3)
    ax1.plot([view.best_k], [view.best_speedup], "*", ms=14, color="tab:green",
             label=f"best k = {view.best_k}")
    ax1.plot([view.k], [view.speedup_at_k], "o", ms=9, mfc="none", color="k", label=f"your k = {view.k}")
    ax1.set_xlabel("k (drafted tokens per round)")
    ax1.set_ylabel("speedup (x)")
    ax1.set_ylim(0, max(2.0, float(view.speedups.max()) * 1.15))
    ax1.set_title("speedup; shaded: slower than plain")
    ax1.legend(fontsize=8)
    ax2.plot(view.ks, view.tokens, "o-", ms=3, color="tab:purple")
    if np.isfinite(view.ceiling):
        ax2.axhline(view.ceiling, ls="--", color="gray", label=f"ceiling 1/(1-α) = {view.ceiling:.1f}")
        ax2.legend(fontsize=8)
    ax2.set_xlabel("k")
    ax2.set_ylabel("tokens per target pass")
    ax2.set_title("tokens per pass saturate")
    if heatmap is None:
        heatmap = best_k_grid()
    bk, bs = heatmap
    im = ax3.imshow(np.where(bs > 1, bk, np.nan), origin="lower", aspect="auto", cmap="viridis",
                    extent=[ALPHA_GRID[0], ALPHA_GRID[-1], C_GRID[0], C_GRID[-1]])
    ax3.contour(ALPHA_GRID, C_GRID, bs, levels=[1.0], colors="tab:red", linewidths=1)
    # your point: a black ring in a white halo, readable on a coloured cell and on a blank one alike, and
    # labelled with what the heatmap says there
    ax3.plot([view.alpha], [view.c], "o", mfc="none", mec="w", ms=12, mew=4)
    ax3.plot([view.alpha], [view.c], "o", mfc="none", mec="k", ms=12, mew=1.5)
    where = f"best k = {view.best_k}" if view.best_speedup > 1 else "no k pays"
    ax3.annotate(f"you: {where}", (view.alpha, view.c), textcoords="offset points",
                 xytext=(-10 if view.alpha > 0.6 else 10, 10), ha="right" if view.alpha > 0.6 else "left",
                 fontsize=8, bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "0.6", "alpha": 0.9})
    fig.colorbar(im, ax=ax3, label="best k")
    ax3.set_xlabel("α")
    ax3.set_ylabel("c")
    ax3.set_title("best k; blank/red line: never pays")
    fig.tight_layout()
    return fig
