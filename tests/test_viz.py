"""The figures of speed (specnotes.viz_roofline, viz_timing, viz_cache, viz_trees, viz_drafters and
viz_serving), drawn headless: what each one shows, and the one return convention every one of them follows."""

import inspect
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pytest

from specnotes import tree, viz_cache, viz_drafters, viz_roofline, viz_serving, viz_timing, viz_trees
from specnotes.batch_sweep import BatchSweep, Point
from specnotes.loadgen import Summary, Sweep

TREE = tree.static_tree([[10, 11, 12], [20, 21], [30]], tree.default_choices((3, 2, 1)))
ROWS = [SimpleNamespace(drafter=d, kind=kind, tokens_per_call=1.5, speedup=1.2, alpha=0.4,
                        per_position=[0.6, 0.4, 0.2], reached=[50, 30, 12])
        for d in ("a", "b") for kind in ("copy", "all")]
RUNS = [SimpleNamespace(mode=m, prompt_kind=kind, sampling="greedy", tokens_per_s=20.0,
                        tokens_per_s_spread=(18.0, 22.0), speedup=1.3,
                        prediction=SimpleNamespace(predicted_speedup=1.4) if m != "plain" else None)
        for m in ("plain", "engine-prompt-lookup") for kind in ("copy", "free")]  # Record's fields
SWEEP = [{"temperature": t, "drafter": d, "kind": k, "alpha": 0.5, "tokens_per_call": 1.5}
         for t in (0.0, 1.0) for d in ("a", "b") for k in ("copy", "story", "all")]
# four rounds that each drafted 3 tokens and kept 1 of them plus the target's own: the cache grows by 2
RESULT = SimpleNamespace(trace=[SimpleNamespace(cache_len=10 + 2 * i, drafted=[1, 2, 3], accepted=1)
                                for i in range(1, 5)])
FLIP = BatchSweep([Point("mix", mode, b, 0, 1.0, rate, 1, 0, 0, 0, 0, b)
                   for (mode, b), rate in {("plain", 1): 10, ("spec", 1): 20, ("plain", 4): 40,
                                           ("spec", 4): 30}.items()], 10)
LOAD = Sweep([1, 4], {(m, c): [Summary(c, t * f, t, 0.1, 0.01, 0.02, 2.0, 4) for f in (0.9, 1.1)]
                     for (m, c), t in {("plain", 1): 10, ("ngram", 1): 15, ("plain", 4): 30,
                                       ("ngram", 4): 27}.items()})
BANDS = {"a": (1.2, 1.0, 1.3), "b": (0.8, 0.7, 0.9)}
HISTORIES = {("copy", "cost-aware"): [3, 4, 0], ("free", "cost-aware"): [1, 0, 0]}
# one call per figure of the module, each drawing into the `ax` (or `fig`) it is given
FIGURES = {
    "plot_step_times": lambda ax: viz_timing.plot_step_times(0.2, np.full(9, 0.05), prompt_tokens=30, ax=ax),
    "plot_roofline": lambda ax: viz_roofline.plot_roofline("H100 SXM", "bf16", ax=ax),
    "plot_tokens_curve": lambda ax: viz_roofline.plot_tokens_curve([1, 2, 4], [0.01, 0.011, 0.013],
                                                                [0.009, 0.009, 0.01], ax=ax),
    "plot_cache_lengths": lambda ax: viz_cache.plot_cache_lengths(RESULT, prompt_len=11, ax=ax),
    "plot_tree_and_mask": lambda fig: viz_trees.plot_tree_and_mask(TREE, fig=fig),
    "plot_parallel_pass": lambda fig: viz_trees.plot_parallel_pass(
        [0, 1, 2, 3], np.tril(np.ones((4, 4), bool)), 2, fig=fig),
    "plot_tree_sizes": lambda ax: viz_trees.plot_tree_sizes([1, 3, 7], [1.5, 1.8, 2.1], [1.2, 1.1, 0.9],
                                                            ax=ax),
    "plot_drafter_bars": lambda ax: viz_drafters.plot_drafter_bars(ROWS, "speedup", ax=ax),
    "plot_position_acceptance": lambda ax: viz_drafters.plot_position_acceptance(ROWS, ax=ax),
    "plot_mode_rates": lambda ax: viz_timing.plot_mode_rates(RUNS, ax=ax),
    "plot_predicted_vs_measured": lambda ax: viz_timing.plot_predicted_vs_measured(RUNS, ax=ax),
    "plot_serving": lambda ax: viz_serving.plot_serving(0.7, 4, 0.05, 8e9, "bf16", "H100 SXM", ax=ax),
    "plot_crossover_by_context": lambda ax: viz_serving.plot_crossover_by_context(
        0.7, 4, 0.05, 8e9, "bf16", "H100 SXM", [0, 64, 4096], ax=ax),
    "plot_batch_flip": lambda fig: viz_serving.plot_batch_flip(FLIP, {("mix", "spec"): 2}, fig=fig),
    "plot_load_flip": lambda fig: viz_serving.plot_load_flip({"copy": LOAD, "free": LOAD}, ["ngram"],
                                                             predicted={"copy": 2}, fig=fig),
    "plot_batch_grid": lambda ax: viz_serving.plot_batch_grid({(1, 1): 0.01, (2, 1): 0.011}, ax=ax),
    "plot_measured_crossover": lambda ax: viz_serving.plot_measured_crossover({1: 2.0}, {1: 2.1}, ax=ax),
    "plot_temperature_sweep": lambda ax: viz_serving.plot_temperature_sweep(SWEEP, ax=ax),
    "plot_arrivals": lambda ax: viz_serving.plot_arrivals({"plain": [0.0, 0.1, 0.2]}, ax=ax),
    "plot_speedup_bands": lambda ax: viz_drafters.plot_speedup_bands(BANDS, ax=ax),
    "plot_k_over_time": lambda fig: viz_serving.plot_k_over_time(HISTORIES, fig=fig),
}
# these take fig=, the others ax=
MULTI_PANEL = {"plot_tree_and_mask", "plot_parallel_pass", "plot_batch_flip", "plot_load_flip",
               "plot_k_over_time"}


MODULES = (viz_cache, viz_drafters, viz_roofline, viz_serving, viz_timing, viz_trees)


def figure(name):
    return next(getattr(m, name) for m in MODULES if hasattr(m, name))


def test_every_function_of_the_modules_is_a_figure_covered_here():
    defined = {name for m in MODULES for name, f in inspect.getmembers(m, inspect.isfunction)
               if f.__module__ == m.__name__}
    assert defined == set(FIGURES)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_figure_returns_the_figure_it_drew_on(name):
    where = "fig" if name in MULTI_PANEL else "ax"
    assert where in inspect.signature(figure(name)).parameters
    new = FIGURES[name](None)  # a figure of its own
    assert isinstance(new, plt.Figure) and new.axes
    mine = plt.figure()
    into = mine if name in MULTI_PANEL else mine.add_subplot(1, 2, 2)
    assert FIGURES[name](into) is mine  # drawn into the one it was given
    plt.close(new)
    plt.close(mine)


def test_step_time_plot_has_one_bar_per_forward_pass():
    fig = viz_timing.plot_step_times(0.2, np.full(9, 0.05), prompt_tokens=30)
    ax = fig.axes[0]
    assert len(ax.patches) == 10
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights[-1] == 200 and heights[0] == 50
    plt.close(fig)


def test_cache_plot_marks_the_verify_pass_above_the_rollback():
    fig = viz_cache.plot_cache_lengths(RESULT, prompt_len=11)
    before, after = (line.get_ydata() for line in fig.axes[0].lines)
    assert list(after) == [12, 14, 16, 18]  # what the rounds kept
    assert list(before) == [14, 16, 18, 20]  # the round before's cache + 3 drafts + 1 input
    plt.close(fig)


def test_cache_plot_zooms_on_the_first_rounds_beside_the_whole_run():
    fig = viz_cache.plot_cache_lengths(RESULT, prompt_len=11, zoom=2)
    assert len(fig.axes) == 2
    before, after = (line.get_ydata() for line in fig.axes[1].lines)
    assert list(after) == [12, 14] and list(before) == [14, 16]
    plt.close(fig)


def test_notebook_08_plots_draw_headless():
    grid = {(b, t): 0.01 * b * (1 + 0.1 * t) for b in (1, 2, 4) for t in (1, 4)}
    fig = viz_serving.plot_batch_grid(grid)
    assert len(fig.axes[0].lines) == 2
    fig2 = viz_serving.plot_measured_crossover({1: 2.0, 4: 0.9}, {1: 2.1, 4: 1.2})
    assert len(fig2.axes[0].lines) == 3  # two curves and the break-even line
    fig3 = viz_serving.plot_temperature_sweep(SWEEP)
    assert len(fig3.axes[0].lines) == 4  # the "all" rows are left out
    fig4 = viz_serving.plot_arrivals({"plain": np.arange(10) * 0.05,
                                      "spec": np.repeat(np.arange(5) * 0.06, 2)})
    assert "median" in fig4.axes[0].get_legend().get_texts()[0].get_text()
    for f in (fig, fig2, fig3, fig4):
        plt.close(f)


@pytest.mark.parametrize("gpu", ["H100 SXM", "L4", "T4", "Apple M2 Max"])
@pytest.mark.parametrize("alpha,k,c", [(0.0, 1, 0.0), (0.95, 12, 0.5), (0.5, 4, 0.1)])
def test_serving_plot_over_the_explorers_control_grid(gpu, alpha, k, c):
    fig = viz_serving.plot_serving(alpha, k, c, 8e9, "bf16", gpu, contexts=(0, 32768))
    assert len(fig.axes[0].lines) >= 4
    plt.close(fig)


def test_tree_plots_draw_headless():
    fig = viz_trees.plot_tree_and_mask(TREE, labels=["a", "b", "c", "d", "e", "f"])
    mask_ax = fig.axes[1]
    assert mask_ax.images[0].get_array().shape == (7, 7)
    fig2 = viz_trees.plot_tree_sizes([1, 3, 7], [1.5, 1.8, 2.1], [1.2, 1.1, 0.9], labels=["a", "b", "c"])
    assert len(fig2.axes[0].lines) == 3
    for f in (fig, fig2):
        plt.close(f)


def test_the_parallel_pass_draws_its_mask_and_counts_its_guesses():
    from specnotes.training import parallel

    positions, see = parallel.block_layout(3, [2], 4)  # 3 committed pairs, then 3 slots at positions 3..5
    fig = viz_trees.plot_parallel_pass(positions, see, 3)
    rows, mask = fig.axes
    assert np.array_equal(mask.images[0].get_array(), see)
    assert rows.get_title() == "4 guesses from one pass"  # the last pair's output and the 3 slots
    labels = [t.get_text() for t in rows.texts]
    assert "mask slot 3  at position 5" in labels and "guesses x7" in labels and "(fills the cache)" in labels
    with pytest.raises(ValueError, match="pairs"):
        viz_trees.plot_parallel_pass(positions, see, 0)
    plt.close(fig)


def test_position_plot_counts_the_rounds_behind_each_point():
    fig = viz_drafters.plot_position_acceptance(ROWS)
    top, counts = fig.axes
    assert [list(line.get_ydata()) for line in counts.lines] == [[50, 30, 12]] * 2  # one line per "all" row
    assert counts.get_yscale() == "log" and len(top.lines) == 2
    plt.close(fig)


def test_the_crossover_plot_marks_where_there_is_none_and_the_memory_limit():
    from specnotes import serving

    fig = viz_serving.plot_crossover_by_context(0.7, 4, 0.05, 8e9, "bf16", "H100 SXM", [0, 4096])
    cross, never, fits = fig.axes[0].lines
    assert cross.get_ydata()[0] == serving.crossover_batch(0.7, 4, 0.05, 8e9, "bf16", "H100 SXM", 0)
    assert np.isnan(cross.get_ydata()[1]) and list(never.get_xdata()) == [4096]  # no crossing at 4k
    assert fits.get_ydata()[1] == serving.largest_batch(4, 8e9, "bf16", "H100 SXM", 4096)
    plt.close(fig)


def test_speedup_bands_draw_each_median_with_its_repeats_and_k_over_time_one_line_per_policy():
    fig = viz_drafters.plot_speedup_bands({"a": (1.2, 1.0, 1.3), "b": (0.8, 0.7, 0.9)})
    ax = fig.axes[0]
    assert [p.get_height() for p in ax.patches] == [1.2, 0.8]
    (segments,) = ax.collections[0].get_segments()[:1]  # the first bar's error bar: lowest to highest repeat
    assert segments[0][1] == pytest.approx(1.0) and segments[1][1] == pytest.approx(1.3)
    fig2 = viz_serving.plot_k_over_time({("copy", "a"): [3, 4], ("copy", "b"): [0, 1], ("free", "a"): [1]})
    assert len(fig2.axes) == 2 and len(fig2.axes[0].lines) == 2 and len(fig2.axes[1].lines) == 1
    with pytest.raises(ValueError, match="empty"):
        viz_drafters.plot_speedup_bands({})
    with pytest.raises(ValueError, match="non-empty"):
        viz_serving.plot_k_over_time({("copy", "a"): []})
    for f in (fig, fig2):
        plt.close(f)
