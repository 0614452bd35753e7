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


def test_the_break_even_figure_draws_one_curve_per_decay_and_the_one_pass_line():
    verify = np.linspace(0, 2, 11)
    verify[1] = 1.0
    fig = viz_speedup.draw_pass_break_even(0.6, 0.07, [1.0, 0.7, 0.4], k_max=6, verify=verify)
    ax = fig.axes[0]
    curves = [line for line in ax.get_lines() if len(line.get_xdata()) == 6]
    assert len(curves) == 3
    # no decay: the curve is k c (with any verify curve); the line at c is one pass priced as one step
    np.testing.assert_allclose(curves[0].get_ydata(), 0.07 * np.arange(1, 7))
    np.testing.assert_allclose(curves[1].get_ydata(), theory.pass_cost_break_even(
        0.6 * 0.7 ** np.arange(6), 0.6, 0.07, verify))
    assert any(np.allclose(line.get_ydata(), 0.07) for line in ax.get_lines() if line not in curves)
    plt.close(fig)


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


def test_a_per_round_cost_is_its_own_slider_and_is_paid_once_whatever_k():
    box = widgets.speedup_explorer(alpha=0.6, k=4, c=0.0, c_pass=0.3)
    # a parallel drafter: nothing per token, so the longest draft on the slider is the best
    assert "per round" in box.readout.value and "best k=16" in box.readout.value
    view = viz_speedup.speedup_view(0.6, 4, 0.0, c_pass=0.3)
    np.testing.assert_allclose(view.speedups, theory.speedup(0.6, view.ks, 0.0, c_pass=0.3))
    # the same 0.3 paid per token instead: k = 4 costs 1.2 steps of drafting, and the best k is short
    chain = viz_speedup.speedup_view(0.6, 4, 0.3)
    assert chain.speedup_at_k < view.speedup_at_k and chain.best_k < view.best_k
    box.sliders["c_pass"].value = 0.0
    box.sliders["c"].value = 0.3
    assert box.readout.value == f"<b>{chain.readout}</b>"
    # the heatmap follows the per-round cost: at c_pass = 0.5 a drafter with α = c = 0.1 never pays
    bk, bs = viz_speedup.best_k_grid(c_pass=0.5)
    assert bs.max() < HEATMAP[1].max() and np.all(bs <= HEATMAP[1] + 1e-12)
    assert "every k costs more" in viz_speedup.speedup_view(0.1, 1, 0.1, c_pass=0.5).readout


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
