"""The exactness checks: the χ² test and TV against an exact answer, the noise floor, token marginals and
the convergence experiment, on the toy language (the samplers themselves are tests/test_toy.py)."""

import numpy as np
import pytest
from scipy import stats as sps

from specnotes import bugzoo, stats, toy

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


def test_the_uniform_band_holds_correct_p_values_and_not_a_skewed_set():
    # 4000 sets of 30 uniform p-values: each sorted position falls inside its 95% band 95% of the time
    low, high = stats.uniform_band(30)
    sets = np.sort(np.random.default_rng(0).uniform(size=(4000, 30)), axis=1)
    inside = ((sets >= low) & (sets <= high)).mean(axis=0)
    assert np.all(np.abs(inside - 0.95) < 0.015)
    # a sampler whose p-values are squared (piled towards 0) leaves the band at most positions
    assert ((sets**2 < low) | (sets**2 > high)).mean() > 0.5
    assert np.all(np.diff(low) > 0) and np.all(low < high)


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
    out = bugzoo.convergence(P, Q, [2000, 20_000], 4, 3, samplers=("target", "target-residual"))
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


def test_exact_head_partitions_every_continuation_exactly(tiny):
    """On a 6-token model, each of exact_head's cells (top 2 per step, the rest in OTHER) has the dense
    enumeration's probability of the continuations it holds, and the cells cover everything once."""
    dense = stats.exact_first_tokens(tiny.small_target, tiny.small_prompt, 2).reshape(6, 6)
    support, probs = stats.exact_head(tiny.small_target, tiny.small_prompt, 2, top=2)
    assert np.isclose(probs.sum(), 1) and len(support) == 1 + 2 + 4
    firsts = [int(t) for t in support[:, 0] if t != stats.OTHER]
    for row, p in zip(support.tolist(), probs, strict=True):
        if row[0] == stats.OTHER:
            want = dense[[t for t in range(6) if t not in firsts]].sum()
        elif row[1] == stats.OTHER:
            seconds = [r[1] for r in support.tolist() if r[0] == row[0] and r[1] != stats.OTHER]
            want = dense[row[0], [t for t in range(6) if t not in seconds]].sum()
        else:
            want = dense[row[0], row[1]]
        assert np.isclose(p, want)


def test_chi2_on_head_passes_the_exact_sampler_and_flags_a_planted_bias(tiny):
    """Samples from the dense distribution pass; the same samples with 30% of them moved to one likely
    continuation (a sampler that keeps a favoured draft too often) are flagged."""
    dense = stats.exact_first_tokens(tiny.small_target, tiny.small_prompt, 2)
    support, probs = stats.exact_head(tiny.small_target, tiny.small_prompt, 2, top=2)
    rng = np.random.default_rng(1)
    flat = rng.choice(36, size=3000, p=dense)
    draws = np.stack([flat // 6, flat % 6], axis=1)
    assert not stats.chi2_on_head(draws, support, probs).flagged
    biased = draws.copy()
    biased[rng.random(len(draws)) < 0.3] = support[np.argmax(probs)]
    assert support[np.argmax(probs)][1] != stats.OTHER
    assert stats.chi2_on_head(biased, support, probs).flagged


def test_samples_for_power_is_enough_and_not_far_too_many():
    """At the size it gives, a sampler with the planted shift is flagged in most simulated runs; at a
    fifth of it, rarely: the power calculation is neither a guess nor a blanket 'lots'."""
    probs = np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04])
    shift = 0.2
    n = stats.samples_for_power(probs, shift)
    assert stats.samples_for_power(probs, 0.4) < n < stats.samples_for_power(probs, 0.1)
    alt = (1 - shift) * probs
    alt[0] += shift
    rng = np.random.default_rng(2)

    def flagged_share(size):
        hits = 0
        for _ in range(60):
            counts = rng.multinomial(size, alt)
            draws = np.repeat(np.arange(6), counts)[:, None]
            hits += stats.chi2_test(draws, probs).flagged
        return hits / 60

    assert flagged_share(n) >= 0.75
    assert flagged_share(n // 5) <= 0.3
    with pytest.raises(ValueError):
        stats.samples_for_power(probs, 0.0)
