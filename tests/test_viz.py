import numpy as np

from specnotes import viz
from specnotes.viz import plot_step_times


def test_step_time_plot_has_one_bar_per_forward_pass():
    fig = plot_step_times(0.2, np.full(9, 0.05), prompt_tokens=30)
    ax = fig.axes[0]
    assert len(ax.patches) == 10
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights[-1] == 200 and heights[0] == 50


def test_notebook_08_plots_draw_headless():
    import matplotlib.pyplot as plt

    grid = {(b, t): 0.01 * b * (1 + 0.1 * t) for b in (1, 2, 4) for t in (1, 4)}
    fig = viz.plot_batch_grid(grid)
    assert len(fig.axes[0].lines) == 2
    fig2 = viz.plot_measured_crossover({1: 2.0, 4: 0.9}, {1: 2.1, 4: 1.2})
    assert len(fig2.axes[0].lines) == 3  # two curves and the break-even line
    sweep = [{"temperature": t, "drafter": d, "kind": k, "alpha": 0.5, "tokens_per_call": 1.5}
             for t in (0.0, 1.0) for d in ("a", "b") for k in ("copy", "story", "all")]
    fig3 = viz.plot_temperature_sweep(sweep)
    assert len(fig3.axes[0].lines) == 4  # the "all" rows are left out
    fig4 = viz.plot_arrivals({"plain": np.arange(10) * 0.05, "spec": np.repeat(np.arange(5) * 0.06, 2)})
    assert "median" in fig4.axes[0].get_legend().get_texts()[0].get_text()
    for f in (fig, fig2, fig3, fig4):
        plt.close(f)


def test_tree_plots_draw_headless():
    import matplotlib.pyplot as plt

    from specnotes import tree

    t = tree.static_tree([[10, 11, 12], [20, 21], [30]], tree.default_choices((3, 2, 1)))
    fig = viz.plot_tree_and_mask(t, labels=["a", "b", "c", "d", "e", "f"])
    mask_ax = fig.axes[1]
    assert mask_ax.images[0].get_array().shape == (7, 7)
    fig2 = viz.plot_tree_sizes([1, 3, 7], [1.5, 1.8, 2.1], [1.2, 1.1, 0.9], labels=["a", "b", "c"])
    assert len(fig2.axes[0].lines) == 3
    for f in (fig, fig2):
        plt.close(f)
