"""The acceptance rule, exactly: enumeration in Fractions, properties over random (p, q), edge cases."""

import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specnotes import rules, stats, toy


def fractions(weights):
    total = sum(weights)
    return np.array([Fraction(w, total) for w in weights], dtype=object)


@st.composite
def p_and_q(draw):
    """Random (p, q) over 2..6 tokens as exact Fractions: zeros and ties come up often, and so does p == q."""
    vocab = draw(st.integers(2, 6))
    weights = st.lists(st.integers(0, 4), min_size=vocab, max_size=vocab).filter(lambda w: sum(w) > 0)
    p = fractions(draw(weights))
    q = p.copy() if draw(st.integers(0, 4)) == 0 else fractions(draw(weights))
    return p, q


@settings(max_examples=1500, deadline=None)
@given(p_and_q())
def test_one_round_emits_exactly_p(pq):
    p, q = pq
    emitted = rules.emitted_distribution(p, q)
    assert list(emitted) == list(p)  # Fraction equality: no tolerance at all


@settings(max_examples=300, deadline=None)
@given(p_and_q())
def test_acceptance_rate_is_one_minus_total_variation(pq):
    p, q = pq
    alpha = (q * rules.acceptance_probability(p, q)).sum()
    assert alpha == 1 - sum(abs(a - b) for a, b in zip(p, q, strict=True)) / 2


def test_float_rule_matches_the_fraction_rule():
    rng = np.random.default_rng(0)
    for _ in range(200):
        p, q = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
        p[rng.integers(5)] = 0
        p /= p.sum()
        np.testing.assert_allclose(rules.emitted_distribution(p, q), p, atol=1e-14)


def test_residual_of_identical_distributions_never_divides_by_zero():
    p = np.array([0.5, 0.5, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a 0/0 would warn
        r = rules.residual(p, p)
        a = rules.acceptance_probability(p, p)
    assert np.all(np.isfinite(r)) and r.sum() == pytest.approx(1.0)
    assert np.all(a == 1.0)


def test_greedy_is_the_one_hot_special_case():
    p = np.array([0.0, 1.0, 0.0, 0.0])  # greedy target: all mass on its argmax
    q = np.array([0.4, 0.3, 0.2, 0.1])
    a = rules.acceptance_probability(p, q)
    assert list(a) == [0.0, 1.0, 0.0, 0.0]  # a draft survives only if it is the target's argmax
    assert list(rules.residual(p, q)) == [0.0, 1.0, 0.0, 0.0]  # and a rejection yields the argmax


def test_zero_target_probability_is_never_accepted():
    p, q = np.array([0.0, 0.6, 0.4]), np.array([0.5, 0.25, 0.25])
    assert rules.acceptance_probability(p, q)[0] == 0.0
    assert rules.residual(p, q)[0] == 0.0


@pytest.mark.parametrize("bad, message", [
    ([0.5, 0.6], "not normalized"),
    ([1.2, -0.2], "negative"),
    ([np.nan, 1.0], "NaN"),
    ([[2.0, 1.0, -3.0]], "negative"),
])
def test_bad_distributions_raise_clear_errors(bad, message):
    with pytest.raises(ValueError, match=message):
        rules.emitted_distribution(np.array(bad), np.ones(np.shape(bad)[-1]) / np.shape(bad)[-1])


def test_first_rejection_counts_the_accepted_prefix():
    accepted = np.array([[True, True, False], [False, True, True], [True, True, True]])
    assert list(rules.first_rejection(accepted)) == [2, 0, 3]


def test_row_verify_samples_p_at_the_first_position():
    """rules.verify on explicit rows (the engine's view) against the exact answer, by chi-square."""
    P, Q = toy.seed_pair()
    m, k = 200_000, 2
    rng = np.random.default_rng(5)
    prev = np.zeros(m, dtype=np.int64)
    drafted, ctx = toy.draft(Q, prev, k, rng.random((m, k)))
    n_acc, nxt = rules.verify(P[ctx], Q[ctx[:, :-1]], drafted, rng.random((m, k)), rng.random(m))
    first = np.where(n_acc > 0, drafted[:, 0], nxt)
    _, p_value = stats.chi2_test(first[:, None], P[toy.BOS])
    assert p_value > stats.FLAG_P
