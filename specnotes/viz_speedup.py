"""The speedup explorer's view and figure (notebook 05): for one (α, k, c, c_pass), the speedup and tokens
per pass against k and the best k, and the best-k heatmap over (α, c). c is the draft cost per drafted
token (a chain drafter), c_pass the draft cost per round whatever k is (a parallel drafter's one pass).
Pure, so they work without a widget; the sliders around them are specnotes.widgets.speedup_explorer.

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
    c: float  # per drafted token
    ks: np.ndarray  # (K,) 1..k_max
    speedups: np.ndarray  # (K,)
    tokens: np.ndarray  # (K,) expected tokens per target pass
    ceiling: float  # 1 / (1 - alpha): tokens per pass with infinitely long drafts
    k: int
    speedup_at_k: float
    best_k: int
    best_speedup: float
    readout: str
    c_pass: float = 0.0  # per round, whatever k is


def speedup_view(alpha: float, k: int, c: float, k_max: int = 16, c_pass: float = 0.0) -> SpeedupView:
    """Everything the explorer shows for one slider position (pure; no drawing)."""
    alpha = checks.probability(alpha, "alpha", scalar=True)
    c = checks.positive(c, "c", zero=True, scalar=True)
    c_pass = checks.positive(c_pass, "c_pass", zero=True, scalar=True)
    k, k_max = checks.whole(k, "k", scalar=True), checks.whole(k_max, "k_max", high=1000, scalar=True)
    ks = np.arange(1, k_max + 1)
    speedups = theory.speedup(alpha, ks, c, c_pass=c_pass)
    tokens = theory.expected_tokens(alpha, ks)
    bk, bs = theory.best_k(alpha, c, k_max, c_pass=c_pass)
    at_k = float(theory.speedup(alpha, k, c, c_pass=c_pass))
    verdict = "faster" if at_k > 1 else ("no change" if at_k == 1 else "SLOWER than plain decoding")
    # at c_pass = 0 the edge is α = c (k = 1 decides it); a per-round cost has no such simple edge: a
    # longer draft spreads it over more tokens
    why = "α must exceed c" if c_pass == 0 else "every k costs more than it yields"
    best = (f"best k={int(bk)} gives {float(bs):.3f}x" if bs > 1
            else f"no k pays: the best, k={int(bk)}, gives {float(bs):.3f}x ({why})")
    cost = f"c={c:.2f}" if c_pass == 0 else f"c={c:.2f} per token + {c_pass:.2f} per round"
    readout = f"α={alpha:.2f}, {cost}: at k={k} speedup {at_k:.3f}x ({verdict}); {best}"
    ceiling = float("inf") if alpha >= 1 else 1.0 / (1.0 - alpha)
    return SpeedupView(float(alpha), float(c), ks, speedups, tokens, ceiling, int(k), at_k, int(bk),
                       float(bs), readout, float(c_pass))


def best_k_grid(alphas=ALPHA_GRID, cs=C_GRID, k_max: int = 16, c_pass: float = 0.0):
    """(len(cs), len(alphas)) best k and best speedup over a grid of alpha and c (per drafted token), at a
    per-round cost c_pass."""
    return theory.best_k(alphas[None, :], np.asarray(cs)[:, None], k_max, c_pass=c_pass)


def draw_speedup(view: SpeedupView, heatmap=None, fig=None):
    """Three panels: speedup against k (best k marked, loss region shaded), tokens per pass against k
    with the 1/(1-alpha) ceiling, and the best-k heatmap over (alpha, c) with this point marked. Returns the
    Figure it drew on (fig, cleared, or a new one), as every viz_* figure does.
    heatmap: best_k_grid()'s answer (at the view's c_pass), to reuse it across redraws."""
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
        heatmap = best_k_grid(c_pass=view.c_pass)
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
    ax3.set_ylabel("c (per drafted token)")
    ax3.set_title("best k; blank/red line: never pays" if view.c_pass == 0
                  else f"best k at c_pass = {view.c_pass:.2f}; blank: never pays")
    fig.tight_layout()
    return fig


def draw_pass_break_even(alpha: float, c: float, decays, k_max: int = 8, verify=1.0, ax=None):
    """One pass for k guesses against k steps of c (notebook 05): for each decay ρ, the per-round cost
    under which a parallel drafter whose position i is accepted at α·ρ^(i-1) beats a chain drafter
    accepted at α everywhere (theory.pass_cost_break_even), against k; the dashed line is one pass priced
    as one chain step (c_pass = c). Where a curve is above the line the parallel drafter wins at that k.
    verify: the verify pass in plain steps, a scalar or a curve indexed by width."""
    alpha = checks.probability(alpha, "alpha", scalar=True)
    k_max = checks.whole(k_max, "k_max", high=64, scalar=True)
    decays = np.atleast_1d(checks.probability(decays, "decays (α's factor per position)"))
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.8))
    ks = np.arange(1, k_max + 1)
    for rho in decays:
        even = theory.pass_cost_break_even(alpha * rho ** np.arange(k_max), alpha, c, verify)
        ax.plot(ks, even, "o-", ms=3, label=f"ρ = {rho:g}" + (" (no decay)" if rho == 1 else ""))
    ax.axhline(c, ls="--", color="k", lw=1, label=f"one pass = one step (c = {c:g})")
    ax.axhline(0, color="0.6", lw=0.6)
    ax.set_xlabel("k (guesses per round)")
    ax.set_ylabel("break-even draft cost per round (steps)")
    ax.set_title(f"parallel (α·ρ^(i-1)) vs chain (α = {alpha:g}): parallel wins above the dashed line",
                 fontsize=9)
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax.figure
