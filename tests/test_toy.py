"""The toy language and its samplers: the seed's figures, exact enumeration, speed-free (the χ² checks
on its samples are tests/test_stats.py)."""

from fractions import Fraction

import numpy as np
import pytest

from specnotes import stats, toy

P, Q = toy.seed_pair()
EXACT = toy.exact_distribution(P, 4)


def test_seed_pair_has_the_seed_articles_acceptance_per_context():
    assert list(np.round(toy.acceptance_per_context(P, Q), 3)) == [0.672, 0.692, 0.856, 0.863]


def test_make_pair_generalizes_the_seed_pair():
    P2, Q2 = toy.make_pair(vocab=4, seed=2, blend=0.45)
    assert np.array_equal(P, P2) and np.array_equal(Q, Q2)
    big = toy.make_pair(vocab=50, seed=0, blend=0.2)
    assert big.P.shape == (50, 50) and np.allclose(big.Q.sum(axis=1), 1)


@pytest.mark.parametrize("kwargs, match", [({"vocab": 1}, "vocab"), ({"blend": 1.5}, "blend")])
def test_make_pair_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        toy.make_pair(**kwargs)


def test_exact_distribution_is_lexicographic_and_normalized():
    assert EXACT.shape == (256,) and EXACT.sum() == pytest.approx(1.0)
    # sequence (1, 2, 3, 0) has index 1*64 + 2*16 + 3*4 + 0
    assert EXACT[1 * 64 + 2 * 16 + 3 * 4] == pytest.approx(P[0, 1] * P[1, 2] * P[2, 3] * P[3, 0])


@pytest.mark.parametrize("rule", ["exact", "match"])
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_enumerated_speculative_distribution_equals_the_target(rule, k):
    spec = toy.speculative_distribution(P, Q, 4, k, rule=rule)
    np.testing.assert_allclose(spec, EXACT, atol=1e-15)


def test_enumeration_in_fractions_is_exact_and_target_residual_is_not():
    Pf = np.array([[Fraction(n, 12) for n in row] for row in ([6, 3, 3], [4, 4, 4], [0, 3, 9])], dtype=object)
    Qf = np.array([[Fraction(n, 12) for n in row] for row in ([3, 3, 6], [6, 0, 6], [4, 4, 4])], dtype=object)
    target = toy.exact_distribution(Pf, 3)
    assert list(toy.speculative_distribution(Pf, Qf, 3, 2, "exact")) == list(target)
    assert list(toy.speculative_distribution(Pf, Qf, 3, 2, "match")) == list(target)
    assert list(toy.speculative_distribution(Pf, Qf, 3, 2, "target-residual")) != list(target)


def test_target_residual_bias_is_the_seed_articles_0_107_plateau():
    buggy = toy.speculative_distribution(P, Q, 4, 3, rule="target-residual")
    assert 0.5 * np.abs(buggy - EXACT).sum() == pytest.approx(0.106, abs=0.002)


def test_samplers_return_int_arrays_of_the_asked_shape():
    rng = np.random.default_rng(0)
    target = toy.sample_target(P, 100, 7, rng)
    spec, st = toy.sample_speculative(P, Q, 100, 7, 3, rng)
    assert target.shape == spec.shape == (100, 7)
    assert target.dtype.kind == spec.dtype.kind == "i"
    assert st.target_calls.shape == (100,) and st.rounds == st.target_calls.sum()
    assert st.emitted == st.accepted + st.rounds  # every round emits its accepted drafts + 1


def test_measured_alpha_matches_sum_of_min_on_a_single_context():
    """With one context (every row alike), alpha is a single number and the sampler must find it."""
    row_p, row_q = P[0], Q[0]
    Pc, Qc = np.tile(row_p, (4, 1)), np.tile(row_q, (4, 1))
    _, st = toy.sample_speculative(Pc, Qc, 100_000, 8, 3, np.random.default_rng(1))
    alpha = np.minimum(row_p, row_q).sum()
    judged = st.judged_per_position.sum()
    assert abs(st.alpha - alpha) < 5 * np.sqrt(alpha * (1 - alpha) / judged)  # 5 sigma
    assert np.allclose(st.per_position_acceptance, alpha, atol=0.01)


@pytest.mark.parametrize("kwargs, match", [
    ({"k": 0}, "k"), ({"n": 0}, "n"), ({"rule": "nonsense"}, "unknown rule"),
    ({"Q": np.ones((4, 4))}, "normalized"),
])
def test_sample_speculative_rejects_bad_input(kwargs, match):
    args = {"P": P, "Q": Q, "n": 10, "length": 4, "k": 3, "rng": np.random.default_rng(0), **kwargs}
    with pytest.raises(ValueError, match=match):
        toy.sample_speculative(**args)


def test_chunking_does_not_change_the_statistics(monkeypatch):
    monkeypatch.setattr(toy, "CHUNK", 1000)
    samples, st = toy.sample_speculative(P, Q, 5500, 4, 3, np.random.default_rng(3))
    assert samples.shape == (5500, 4) and st.target_calls.min() >= 1
    assert not stats.chi2_test(samples, EXACT).flagged


def test_enumeration_covers_full_rounds_with_bonus_tokens():
    # length 6 with k = 2 and k = 5: rounds that accept everything and continue from the bonus token
    exact6 = toy.exact_distribution(P, 6)
    for k in (2, 5):
        np.testing.assert_allclose(toy.speculative_distribution(P, Q, 6, k), exact6, atol=1e-15)
