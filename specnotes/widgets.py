"""The interactive explorers' front ends: sliders and dropdowns, built from core ipywidgets and inline
matplotlib (they work on Colab too), each redrawing one pure view.

Notebook 05 uses speedup_explorer(), whose view and figure are specnotes.viz_speedup; 01 uses
roofline_calculator() and 08 serving_explorer(), whose readouts are in specnotes.readouts and whose
figures are specnotes.viz_roofline's and specnotes.viz_serving's.
"""

from __future__ import annotations

import ipywidgets as w
import matplotlib.pyplot as plt
from IPython.display import clear_output, display

from specnotes import readouts, roofline, viz_roofline, viz_serving, viz_speedup


def speedup_explorer(alpha: float = 0.8, k: int = 4, c: float = 0.05, c_pass: float = 0.0):
    """Sliders for alpha, k and the two draft costs: c per drafted token (a chain drafter's steps) and
    c_pass per round (a parallel drafter's one pass for all k); live speedup and tokens-per-pass plots,
    the best-k heatmap, a readout.

    Returns the widget (display it, or leave it as a cell's last expression)."""
    style = {"description_width": "initial"}
    alpha_s = w.FloatSlider(value=alpha, min=0.0, max=0.99, step=0.01, description="α acceptance",
                            style=style, continuous_update=True)
    k_s = w.IntSlider(value=k, min=1, max=16, step=1, description="k drafted", style=style)
    c_s = w.FloatSlider(value=c, min=0.0, max=1.0, step=0.05, description="c per token", style=style)
    pass_s = w.FloatSlider(value=c_pass, min=0.0, max=1.0, step=0.05, description="c per round",
                           style=style)
    readout = w.HTML()
    out = w.Output()
    heatmaps = {}  # c_pass -> best_k_grid, computed once per value; redraws reuse it

    def redraw(_=None):
        view = viz_speedup.speedup_view(alpha_s.value, k_s.value, c_s.value, c_pass=pass_s.value)
        readout.value = f"<b>{view.readout}</b>"
        if view.c_pass not in heatmaps:
            heatmaps[view.c_pass] = viz_speedup.best_k_grid(c_pass=view.c_pass)
        with out:
            clear_output(wait=True)
            fig = viz_speedup.draw_speedup(view, heatmap=heatmaps[view.c_pass])
            display(fig)
            plt.close(fig)

    for s in (alpha_s, k_s, c_s, pass_s):
        s.observe(redraw, names="value")
    redraw()
    box = w.VBox([w.HBox([alpha_s, k_s, c_s, pass_s]), readout, out])
    box.sliders = {"alpha": alpha_s, "k": k_s, "c": c_s, "c_pass": pass_s}  # handles for tests and demos
    box.readout = readout
    return box


def roofline_calculator(n_params: float = 7e9, dtype: str = "bf16", gpu: str = "H100 SXM", k: int = 4):
    """Dropdowns and sliders for model size, dtype, GPU and k; a live readout and roofline plot."""
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
            fig = viz_roofline.plot_roofline(gpu_d.value, dtype_d.value, k_s.value)
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
            fig = viz_serving.plot_serving(*args, contexts=sorted({0, ctx_d.value}))
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
