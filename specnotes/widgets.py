"""Interactive explorers built from core ipywidgets and inline matplotlib (they work on Colab too).

Notebook 05 uses speedup_explorer(); each callback draws through one pure function in specnotes.viz.
"""

from __future__ import annotations


def speedup_explorer(alpha: float = 0.8, k: int = 4, c: float = 0.05):
    """Sliders for alpha, k and c; live speedup and tokens-per-pass plots, the best-k heatmap, a readout.

    Returns the widget (display it, or leave it as a cell's last expression)."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import clear_output, display

    from specnotes import viz

    style = {"description_width": "initial"}
    alpha_s = w.FloatSlider(value=alpha, min=0.0, max=0.99, step=0.01, description="α acceptance",
                            style=style, continuous_update=True)
    k_s = w.IntSlider(value=k, min=1, max=16, step=1, description="k drafted", style=style)
    c_s = w.FloatSlider(value=c, min=0.0, max=1.0, step=0.05, description="c draft cost", style=style)
    readout = w.HTML()
    out = w.Output()
    heatmap = viz.best_k_grid()  # computed once; every redraw reuses it

    def redraw(_=None):
        view = viz.speedup_view(alpha_s.value, k_s.value, c_s.value)
        readout.value = f"<b>{view.readout}</b>"
        with out:
            clear_output(wait=True)
            fig = viz.draw_speedup(view, alpha_s.value, c_s.value, heatmap=heatmap)
            display(fig)
            plt.close(fig)

    for s in (alpha_s, k_s, c_s):
        s.observe(redraw, names="value")
    redraw()
    box = w.VBox([w.HBox([alpha_s, k_s, c_s]), readout, out])
    box.sliders = {"alpha": alpha_s, "k": k_s, "c": c_s}  # handles for tests and for scripted demos
    box.readout = readout
    return box
