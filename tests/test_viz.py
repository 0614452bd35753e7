import numpy as np

from specnotes.viz import plot_step_times


def test_step_time_plot_has_one_bar_per_forward_pass():
    fig = plot_step_times(0.2, np.full(9, 0.05), prompt_tokens=30)
    ax = fig.axes[0]
    assert len(ax.patches) == 10
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights[-1] == 200 and heights[0] == 50
