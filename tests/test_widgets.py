"""The explorers: the speedup explorer's pure view (specnotes.viz_speedup) over the whole slider grid and
its drawing at the grid's edges, and each widget itself, built headless, answering slider moves. (The
readouts the roofline calculator and the serving explorer show are tested in test_readouts, their figures
in test_viz.)"""

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pytest

from specnotes import theory, viz_speedup, widgets

HEATMAP = viz_speedup.best_k_grid()


def test_view_is_consistent_over_the_full_slider_grid():
    for alpha, k, c in itertools.product(viz_speedup.ALPHA_GRID, viz_speedup.K_GRID, viz_speedup.C_GRID):
        view = viz_speedup.speedup_view(alpha, int(k), c)
        assert (view.alpha, view.c) == (alpha, c)
        assert view.best_speedup == view.speedups.max()
        assert view.speedups[view.best_k - 1] == view.best_speedup
        assert view.speedup_at_k == pytest.approx(view.speedups[k - 1], rel=1e-12)
        assert np.all(np.diff(view.tokens) >= 0) and view.tokens[-1] <= view.ceiling + 1e-9
        assert f"k={view.best_k}" in view.readout


@pytest.mark.parametrize("alpha, k, c", list(itertools.product([0.0, 0.5, 0.99], [1, 16], [0.0, 1.0]))
                         + [(0.8, 4, 0.05)])
def test_drawing_works_at_the_edges_of_the_grid(alpha, k, c):
    fig = viz_speedup.draw_speedup(viz_speedup.speedup_view(alpha, k, c), heatmap=HEATMAP)
    assert len(fig.axes) == 4  # three panels and the colorbar
    mine = plt.figure()
    assert viz_speedup.draw_speedup(viz_speedup.speedup_view(alpha, k, c), heatmap=HEATMAP, fig=mine) is mine
    for f in (fig, mine):
        plt.close(f)


def test_heatmap_shows_speculation_pays_only_when_alpha_exceeds_c():
    best_k, best_speedup = HEATMAP
    alphas, cs = np.meshgrid(viz_speedup.ALPHA_GRID, viz_speedup.C_GRID)
    pays = best_speedup > 1 + 1e-12
    assert np.array_equal(pays, alphas > cs + 1e-12)
    assert best_k.shape == (len(viz_speedup.C_GRID), len(viz_speedup.ALPHA_GRID))


def test_explorer_builds_headless_and_reacts_to_sliders():
    box = widgets.speedup_explorer(alpha=0.8, k=4, c=0.05)
    before = box.readout.value
    assert "best k=8" in before
    box.sliders["alpha"].value = 0.5
    box.sliders["c"].value = 0.2
    after = box.readout.value
    assert after != before and "best k=1" in after
    box.sliders["k"].value = 8
    assert "SLOWER" in box.readout.value  # 0.77x: the seed's loss case
    assert theory.speedup(0.5, 8, 0.2) < 1


def test_roofline_calculator_builds_headless_and_follows_its_controls():
    box = widgets.roofline_calculator()
    assert "239 tokens/s" in box.readout.value  # the seed's 7B bf16 on an H100, ~240
    box.controls["gpu"].value = "T4"
    box.controls["dtype"].value = "int4"
    assert "T4" in box.readout.value and "int4" in box.readout.value


def test_serving_explorer_builds_headless_and_follows_its_controls():
    box = widgets.serving_explorer()
    assert "every batch that fits" in box.readout.value  # 4k context: memory-bound until memory runs out
    box.controls["context"].value = 0
    before = box.readout.value
    assert "at batch 1" in before and "stops paying at batch" in before
    box.controls["alpha"].value = 0.3
    assert box.readout.value != before
    box.controls["n_params"].value = 3e11
    assert "do not fit" in box.readout.value
