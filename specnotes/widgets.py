"""The interactive explorers: their pure view models and drawing, and their front ends, built from core
ipywidgets and inline matplotlib (they work on Colab too).

Notebook 05 uses speedup_explorer(), whose view (speedup_view, best_k_grid) and figure (draw_speedup) are
here and work without a widget; 01 uses roofline_calculator() and 08 serving_explorer(), whose readouts
are in specnotes.readouts and whose figures are in specnotes.viz_speed.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

# ---------------------------------------- the speedup explorer's view (pure) and figure

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
    from specnotes import checks, theory

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
    from specnotes import theory

    return theory.best_k(alphas[None, :], np.asarray(cs)[:, None], k_max)


def draw_speedup(view: SpeedupView, heatmap=None, fig=None):
    """Three panels: speedup against k (best k marked, loss region shaded), tokens per pass against k
    with the 1/(1-alpha) ceiling, and the best-k heatmap over (alpha, c) with this point marked. Returns the
    Figure it drew on (fig, cleared, or a new one), as every figure in specnotes.viz_speed does.
    heatmap: best_k_grid()'s answer, to reuse it across redraws."""
    import matplotlib.pyplot as plt

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


# ---------------------------------------- the front ends: sliders and dropdowns around the views


def speedup_explorer(alpha: float = 0.8, k: int = 4, c: float = 0.05):
    """Sliders for alpha, k and c; live speedup and tokens-per-pass plots, the best-k heatmap, a readout.

    Returns the widget (display it, or leave it as a cell's last expression)."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import clear_output, display

    style = {"description_width": "initial"}
    alpha_s = w.FloatSlider(value=alpha, min=0.0, max=0.99, step=0.01, description="α acceptance",
                            style=style, continuous_update=True)
    k_s = w.IntSlider(value=k, min=1, max=16, step=1, description="k drafted", style=style)
    c_s = w.FloatSlider(value=c, min=0.0, max=1.0, step=0.05, description="c draft cost", style=style)
    readout = w.HTML()
    out = w.Output()
    heatmap = best_k_grid()  # computed once; every redraw reuses it

    def redraw(_=None):
        view = speedup_view(alpha_s.value, k_s.value, c_s.value)
        readout.value = f"<b>{view.readout}</b>"
        with out:
            clear_output(wait=True)
            fig = draw_speedup(view, heatmap=heatmap)
            display(fig)
            plt.close(fig)

    for s in (alpha_s, k_s, c_s):
        s.observe(redraw, names="value")
    redraw()
    box = w.VBox([w.HBox([alpha_s, k_s, c_s]), readout, out])
    box.sliders = {"alpha": alpha_s, "k": k_s, "c": c_s}  # handles for tests and for scripted demos
    box.readout = readout
    return box


def roofline_calculator(n_params: float = 7e9, dtype: str = "bf16", gpu: str = "H100 SXM", k: int = 4):
    """Dropdowns and sliders for model size, dtype, GPU and k; a live readout and roofline plot."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import clear_output, display

    from specnotes import readouts, roofline, viz_speed

    style = {"description_width": "initial"}
    params_s = w.FloatLogSlider(value=n_params, base=10, min=8, max=11.7, step=0.05,
                                description="parameters", style=style, readout_format=".2e")
    dtype_d = w.Dropdown(options=list(roofline.DTYPE_BYTES), value=dtype, description="dtype")
    gpu_d = w.Dropdown(options=list(roofline.catalog()), value=gpu, description="GPU")
    k_s = w.IntSlider(value=k, min=1, max=16, description="k drafted", style=style)
    readout = w.HTML()
    out = w.Output()

    def redraw(_=None):
        text = readouts.roofline_readout(params_s.value, dtype_d.value, gpu_d.value, k_s.value)
        readout.value = "<pre>" + text + "</pre>"
        with out:
            clear_output(wait=True)
            fig = viz_speed.plot_roofline(gpu_d.value, dtype_d.value, k_s.value)
            display(fig)
            plt.close(fig)

    for control in (params_s, dtype_d, gpu_d, k_s):
        control.observe(redraw, names="value")
    redraw()
    box = w.VBox([w.HBox([params_s, dtype_d]), w.HBox([gpu_d, k_s]), readout, out])
    box.controls = {"n_params": params_s, "dtype": dtype_d, "gpu": gpu_d, "k": k_s}
    box.readout = readout
    return box


def serving_explorer(alpha: float = 0.7, k: int = 4, c: float = 0.05, n_params: float = 8e9,
                     dtype: str = "bf16", gpu: str = "H100 SXM"):
    """Sliders for α, k, c and model size, dropdowns for dtype, GPU and context; the speedup-by-batch
    plot of specnotes.serving with its crossover readout."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import clear_output, display

    from specnotes import readouts, roofline, viz_speed

    style = {"description_width": "initial"}
    alpha_s = w.FloatSlider(value=alpha, min=0.0, max=0.95, step=0.05, description="α acceptance",
                            style=style)
    k_s = w.IntSlider(value=k, min=1, max=12, description="k drafted", style=style)
    c_s = w.FloatSlider(value=c, min=0.0, max=0.5, step=0.01, description="c draft cost", style=style)
    params_s = w.FloatLogSlider(value=n_params, base=10, min=8, max=11.5, step=0.05, description="parameters",
                                style=style, readout_format=".2e")
    dtype_d = w.Dropdown(options=list(roofline.DTYPE_BYTES), value=dtype, description="dtype")
    gpu_d = w.Dropdown(options=list(roofline.catalog()), value=gpu, description="GPU")
    ctx_d = w.Dropdown(options=[0, 1024, 4096, 16384, 32768, 131072], value=4096, description="context")
    readout = w.HTML()
    out = w.Output()

    def redraw(_=None):
        args = (alpha_s.value, k_s.value, c_s.value, params_s.value, dtype_d.value, gpu_d.value)
        readout.value = "<b>" + readouts.serving_readout(*args, ctx_d.value) + "</b>"
        with out:
            clear_output(wait=True)
            fig = viz_speed.plot_serving(*args, contexts=sorted({0, ctx_d.value}))
            display(fig)
            plt.close(fig)

    controls = {"alpha": alpha_s, "k": k_s, "c": c_s, "n_params": params_s, "dtype": dtype_d, "gpu": gpu_d,
                "context": ctx_d}
    for control in controls.values():
        control.observe(redraw, names="value")
    redraw()
    box = w.VBox([w.HBox([alpha_s, k_s, c_s]), w.HBox([params_s, dtype_d]), w.HBox([gpu_d, ctx_d]),
                  readout, out])
    box.controls = controls
    box.sliders = {"alpha": alpha_s, "k": k_s, "c": c_s}
    box.readout = readout
    return box
