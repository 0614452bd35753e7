"""The figures of the exactness argument (specnotes.viz_exactness), drawn headless: what each one shows,
and the return convention they share with every figure of the package."""

import inspect

import matplotlib.pyplot as plt
import numpy as np
import pytest

from specnotes import viz_exactness

P, Q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.2, 0.6])
NS = [100, 1000]
FIGURES = {  # one call per figure of the module, each drawing into the `ax` it is given
    "plot_round": lambda ax: viz_exactness.plot_round(P, Q, ax=ax),
    "plot_convergence": lambda ax: viz_exactness.plot_convergence(NS, {"exact": [0.05, 0.02]}, [0.05, 0.016],
                                                                  ax=ax),
    "plot_token_bias": lambda ax: viz_exactness.plot_token_bias(P, {"exact": P + 0.01, "biased": Q}, ax=ax),
    "plot_pvalues": lambda ax: viz_exactness.plot_pvalues({"exact": [0.3, 0.7, 0.5]}, ax=ax),
    "plot_zoo": lambda ax: viz_exactness.plot_zoo(["exact", "no residual"], [0.01, 0.2], 0.01, [False, True],
                                                  ax=ax),
}


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_figure_returns_the_figure_it_drew_on(name):
    assert "ax" in inspect.signature(getattr(viz_exactness, name)).parameters
    new = FIGURES[name](None)
    assert isinstance(new, plt.Figure) and new.axes
    mine, (_, right) = plt.subplots(1, 2)
    assert FIGURES[name](right) is mine and right.has_data()
    for f in (new, mine):
        plt.close(f)


def test_every_function_of_the_module_is_a_figure_covered_here():
    functions = inspect.getmembers(viz_exactness, inspect.isfunction)
    assert {name for name, f in functions if f.__module__ == viz_exactness.__name__} == set(FIGURES)


def test_round_plot_stacks_acceptance_and_residual_up_to_p():
    fig = viz_exactness.plot_round(P, Q)
    bars = fig.axes[0].patches
    q_bars, accepted, residual = bars[:3], bars[3:6], bars[6:9]
    assert [b.get_height() for b in q_bars] == pytest.approx(Q)
    stacks = [a.get_height() + r.get_height() for a, r in zip(accepted, residual, strict=True)]
    assert stacks == pytest.approx(P)
    assert "α = Σ min(p, q) = 0.600" in fig.axes[0].get_title()
    plt.close(fig)


def test_zoo_plot_colours_the_caught_rules_red():
    fig = FIGURES["plot_zoo"](None)
    colours = [b.get_facecolor()[:3] for b in fig.axes[0].patches]
    assert colours == [plt.matplotlib.colors.to_rgb(c) for c in ("tab:green", "tab:red")]
    plt.close(fig)
