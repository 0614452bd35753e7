"""The exactness checks: the χ² test and TV against an exact answer, the noise floor, token marginals and
the convergence experiment, on the toy language (the samplers themselves are tests/test_toy.py)."""

import numpy as np
import pytest
from scipy import stats as sps

from specnotes import stats, toy

P, Q = toy.seed_pair()
EXACT = toy.exact_distribution(P, 4)


def test_correct_samplers_converge_and_the_buggy_one_stalls():
    rng = np.random.default_rng(400_000)
    n = 400_000
    tv_target, _ = stats.chi2_test(toy.sample_target(P, n, 4, rng), EXACT)
    tv_spec, _ = stats.chi2_test(toy.sample_speculative(P, Q, n, 4, 3, rng)[0], EXACT)
    tv_bug, _ = stats.chi2_test(toy.sample_speculative(P, Q, n, 4, 3, rng, rule="target-residual")[0], EXACT)
    assert tv_target < 0.01 and tv_spec < 0.01
    assert tv_bug > 0.09


def test_correct_samplers_p_values_are_uniform_across_30_seeds():
    """A correct sampler's p-values are Uniform(0, 1): none below FLAG_P (false-alarm rate 3e-5 for 30),
    and a KS test does not reject uniformity at 1e-3."""
    for rule in ("exact", "match"):
        p_values = [stats.chi2_test(toy.sample_speculative(P, Q, 30_000, 4, 3, np.random.default_rng(s),
                                                           rule=rule)[0], EXACT).p_value for s in range(30)]
        assert min(p_values) > stats.FLAG_P, rule
        assert sps.kstest(p_values, "uniform").pvalue > 1e-3, rule


def test_chi2_test_pools_rare_cells_and_checks_shapes():
    stuck = np.zeros((2000, 4), dtype=int)  # a sampler that always says 0 0 0 0
    tv, p_value = stats.chi2_test(stuck, EXACT)
    assert tv == pytest.approx(1 - EXACT[0]) and p_value < stats.FLAG_P
    # every cell expects < 5 hits: one pooled cell, a test that could reject nothing. p = 1 would read as
    # "exact", so it refuses and says how many samples it needs
    with pytest.raises(ValueError, match=r"samples: 10 are too few.*draw at least \d+"):
        stats.chi2_test(stuck[:10], EXACT)
    with pytest.raises(ValueError, match="outcomes"):
        stats.chi2_test(stuck, np.ones(100) / 100)


def test_expected_noise_floor_matches_a_perfect_samplers_tv():
    n = 10_000
    tvs = [stats.chi2_test(toy.sample_target(P, n, 4, np.random.default_rng(s)), EXACT)[0] for s in range(20)]
    assert np.mean(tvs) == pytest.approx(stats.expected_tv_noise(EXACT, n), rel=0.05)


def test_the_flag_is_the_one_threshold():
    assert stats.ChiSquare(0.1, stats.FLAG_P / 2).flagged and not stats.ChiSquare(0.0, 0.5).flagged
    tv, p_value = stats.chi2_test(toy.sample_target(P, 5000, 4, np.random.default_rng(0)), EXACT)
    assert 0 < tv < 0.1 and p_value > stats.FLAG_P


def test_sequence_index_is_lexicographic_like_the_exact_distribution():
    assert list(stats.sequence_index([[0, 0], [0, 3], [1, 0], [3, 3]], 4)) == [0, 3, 4, 15]


def test_token_marginals_average_over_positions():
    uniform = np.full(16, 1 / 16)
    np.testing.assert_allclose(stats.token_marginals(uniform, 4, 2), 0.25)
    only_03 = np.zeros(16)
    only_03[3] = 1.0  # the sequence (0, 3)
    np.testing.assert_allclose(stats.token_marginals(only_03, 4, 2), [0.5, 0, 0, 0.5])


def test_convergence_tracks_tv_and_p_for_each_sampler():
    out = stats.convergence(P, Q, [2000, 20_000], 4, 3, samplers=("target", "target-residual"))
    assert set(out) == {"target", "target-residual"} and out["target"].shape == (2, 2)
    assert out["target"][1, 0] < out["target"][0, 0]  # the perfect sampler's TV shrinks with N
    assert out["target-residual"][1, 1] < stats.FLAG_P  # the bug is flagged at 20k sequences


def test_exact_top_k_matches_the_dense_enumeration_and_catches_an_impossible_sample(tiny):
    """On a 6-token model, exact_top_k (top 3) is exact_first_tokens with top_k=3 restricted to its
    support; a sample outside the support makes chi2_on_support fail at once."""
    dense = stats.exact_first_tokens(tiny.small_target, tiny.small_prompt, 2, top_k=3)
    support, probs = stats.exact_top_k(tiny.small_target, tiny.small_prompt, 2, top_k=3)
    assert support.shape == (9, 2) and np.isclose(probs.sum(), 1)
    assert np.allclose(probs, dense[support[:, 0] * 6 + support[:, 1]])
    assert np.isclose(dense.sum() - dense[support[:, 0] * 6 + support[:, 1]].sum(), 0)
    rng = np.random.default_rng(0)
    draws = support[rng.choice(len(support), size=2000, p=probs)]
    assert stats.chi2_on_support(draws, support, probs).p_value > stats.FLAG_P
    outside = next(t for t in range(6) if t not in set(support[:, 0].tolist()))
    bad = np.concatenate([draws, [[outside, support[0, 1]]]])
    assert stats.chi2_on_support(bad, support, probs).p_value == 0.0
