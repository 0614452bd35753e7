"""Figures of the exactness argument (notebooks 03 and 04), drawn from toy distributions, no model:
what one round of speculative sampling delivers, how fast correct samplers converge, where a biased one's
error lands, the χ² p-values, and the bug zoo's verdicts. Pure (data in, figure out), tested headless.

Every function here follows one convention: it takes ``ax=None`` (``fig=None`` where it draws several
panels) and returns the matplotlib Figure it drew on. Pass an Axes, say one panel of a ``plt.subplots``
grid, to draw into it (the return is then ``ax.figure``), or leave it None for a new figure. None of them
calls ``plt.show()``; the notebook does.

The figures of speed are the other viz_* modules, one per topic: viz_roofline, viz_timing, viz_cache,
viz_trees, viz_drafters, viz_speedup and viz_serving.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from specnotes import checks, rules
from specnotes.stats import uniform_band

# ---------------------------------------- notebook 03: one round, and testing a sampler


def plot_round(p, q, labels=None, ax=None):
    """Stacked bars per token: what acceptance delivers (min(p, q)) plus what the residual adds
    ((1 - alpha) * residual), against p itself. The two stacks meet p exactly."""
    p, q = checks.distribution(p, "p"), checks.distribution(q, "q")
    accepted = np.minimum(p, q)
    from_residual = (1 - accepted.sum()) * rules.residual(p, q)
    x = np.arange(len(p))
    ax = ax or plt.subplots(figsize=(7, 3.2))[1]
    ax.bar(x - 0.2, q, width=0.35, color="tab:gray", alpha=0.5, label="q (draft proposes)")
    ax.bar(x + 0.2, accepted, width=0.35, color="tab:blue", label="accepted: min(p, q)")
    ax.bar(x + 0.2, from_residual, width=0.35, bottom=accepted, color="tab:orange",
           label="after a rejection: (1-α)·residual")
    ax.scatter(x + 0.2, p, marker="_", s=600, color="k", zorder=3, label="p (target)")
    ax.set_xticks(x, labels if labels is not None else [f"token {i}" for i in x])
    ax.set_ylabel("probability")
    ax.set_title(f"One round: α = Σ min(p, q) = {accepted.sum():.3f}")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return ax.figure


def plot_convergence(ns, tv_by_sampler: dict, expected_noise=None, ax=None):
    """Log-log TV distance against sample size per sampler, with the noise floor of a perfect sampler."""
    ns = np.asarray(ns, dtype=float)
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    for name, tvs in tv_by_sampler.items():
        ax.loglog(ns, tvs, "o-", label=name)
    if expected_noise is not None:
        ax.loglog(ns, expected_noise, "k:", label="expected TV of a perfect sampler (∝ 1/√N)")
    ax.set_xlabel("samples N")
    ax.set_ylabel("total variation to the exact distribution")
    ax.legend(fontsize=8)
    ax.set_title("Correct samplers converge; a biased one stalls")
    return ax.figure


def plot_token_bias(exact_marginal, other_marginals: dict, ax=None):
    """Bars of (sampler's token frequency - target's) per token: where a bias lands."""
    exact_marginal = np.asarray(exact_marginal)
    x = np.arange(len(exact_marginal))
    width = 0.8 / max(len(other_marginals), 1)
    ax = ax or plt.subplots(figsize=(6, 3.2))[1]
    for i, (name, marg) in enumerate(other_marginals.items()):
        ax.bar(x + (i - (len(other_marginals) - 1) / 2) * width, np.asarray(marg) - exact_marginal,
               width=width, label=name)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(x, [f"token {i}" for i in x])
    ax.set_ylabel("frequency − target's")
    ax.legend(fontsize=8)
    return ax.figure


def plot_pvalues(p_values: dict, ax=None):
    """Sorted p-values per sampler against the uniform quantiles a correct sampler follows."""
    ax = ax or plt.subplots(figsize=(4.5, 4))[1]
    sizes = {len(ps) for ps in p_values.values()}
    if len(sizes) == 1:  # one band fits every sampler: where a correct sampler's sorted p-values fall
        n = sizes.pop()
        low, high = uniform_band(n)
        ax.fill_between((np.arange(n) + 0.5) / n, low, high, color="0.85", step="mid",
                        label=f"95% of correct runs ({n} seeds)")
    for name, ps in p_values.items():
        ps = np.sort(np.asarray(ps))
        ax.plot((np.arange(len(ps)) + 0.5) / len(ps), ps, "o", label=name)
    ax.plot([0, 1], [0, 1], "k:", label="uniform")
    ax.set_xlabel("uniform quantile")
    ax.set_ylabel("sorted χ² p-value")
    ax.legend(fontsize=8)
    return ax.figure


# ---------------------------------------- notebook 04: the bug zoo


def plot_zoo(names, tvs, noise_floor: float, flagged, ax=None):
    """Horizontal bars of each rule's TV distance, the exact rule's level marked as the noise floor."""
    if not len(names) == len(tvs) == len(flagged):  # matplotlib would cycle a short colour list silently
        raise ValueError(f"names, tvs and flagged need one entry per rule; got {len(names)}, {len(tvs)} and "
                         f"{len(flagged)}")
    ax = ax or plt.subplots(figsize=(7, 0.4 * len(names) + 1))[1]
    colors = ["tab:red" if f else "tab:green" for f in flagged]
    ax.barh(names, tvs, color=colors)
    ax.axvline(noise_floor, color="k", ls=":", label=f"exact rule (sampling noise) {noise_floor:.4f}")
    ax.set_xscale("log")
    ax.set_xlabel("TV distance to the exact distribution (log)")
    ax.invert_yaxis()
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Red: caught. Green: passes.")
    return ax.figure
