"""The speedup formulas: the seed article's tables to 2 decimals, limits, errors, and the toy check."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specnotes import theory, toy

ALPHAS = [0.5, 0.6, 0.7, 0.8, 0.9]
KS = [1, 2, 3, 4, 5, 6, 8]
SEED_TABLES = {  # the seed article's printed tables: speedup per (alpha, k), then best k and its speedup
    0.05: ([[1.43, 1.59, 1.63, 1.61, 1.57, 1.53, 1.43],
            [1.52, 1.78, 1.89, 1.92, 1.91, 1.87, 1.77],
            [1.62, 1.99, 2.20, 2.31, 2.35, 2.35, 2.28],
            [1.71, 2.22, 2.57, 2.80, 2.95, 3.04, 3.09],
            [1.81, 2.46, 2.99, 3.41, 3.75, 4.01, 4.38]],
           [3, 4, 6, 8, 13], [1.63, 1.92, 2.35, 3.09, 4.67]),
    0.2: ([[1.25, 1.25, 1.17, 1.08, 0.98, 0.90, 0.77],
           [1.33, 1.40, 1.36, 1.28, 1.19, 1.10, 0.95],
           [1.42, 1.56, 1.58, 1.54, 1.47, 1.39, 1.23],
           [1.50, 1.74, 1.85, 1.87, 1.84, 1.80, 1.66],
           [1.58, 1.94, 2.15, 2.28, 2.34, 2.37, 2.36]],
          [1, 2, 3, 4, 7], [1.25, 1.40, 1.58, 1.87, 2.37]),
}


@pytest.mark.parametrize("c", sorted(SEED_TABLES))
def test_speedup_table_reproduces_the_seed_table_to_two_decimals(c):
    values, best_ks, best_speedups = SEED_TABLES[c]
    table = theory.speedup_table(ALPHAS, KS, c)

    def printed(x):  # as a table prints it; note 1.575 is stored as 1.57499..., so it prints 1.57
        return [[float(f"{v:.2f}") for v in row] for row in np.atleast_2d(x)]

    assert printed(table.values) == values
    assert list(table.best_k) == best_ks
    assert printed(table.best_speedup)[0] == best_speedups


def test_alpha_one_limit_is_exactly_k_plus_one():
    assert theory.expected_tokens(1.0, 7) == 8.0
    assert theory.speedup(1.0, 4, 0.25) == 2.5
    assert theory.expected_tokens(1 - 1e-12, 3) == pytest.approx(4.0)


@given(st.floats(0, 1), st.integers(1, 30))
def test_expected_tokens_is_the_geometric_sum(alpha, k):
    assert theory.expected_tokens(alpha, k) == pytest.approx(sum(alpha**i for i in range(k + 1)), rel=1e-9)


def test_a_verify_pass_of_one_step_is_the_seed_formula_and_a_costlier_one_divides_it():
    assert theory.speedup(0.8, 4, 0.05, verify=1.0) == theory.speedup(0.8, 4, 0.05)
    e = theory.expected_tokens(0.8, 4)
    assert theory.speedup(0.8, 4, 0.05, verify=1.6) == pytest.approx(e / (4 * 0.05 + 1.6))
    out = theory.speedup(0.8, np.array([1, 2, 3]), 0.0, verify=np.array([1.0, 1.2, 1.4]))
    np.testing.assert_allclose(out, theory.expected_tokens(0.8, np.array([1, 2, 3])) / [1.0, 1.2, 1.4])


def test_a_per_round_draft_cost_is_paid_once_whatever_k():
    e = theory.expected_tokens(0.6, np.array([1, 4, 8]))
    # a parallel drafter: one pass of 0.3 steps for any k, against a chain paying 0.1 per token
    np.testing.assert_allclose(theory.speedup(0.6, np.array([1, 4, 8]), 0.0, c_pass=0.3), e / 1.3)
    ks = np.array([1, 4, 8])
    np.testing.assert_allclose(theory.speedup(0.6, ks, 0.1), e / (1 + 0.1 * ks))
    # both costs together, and with c_pass = 0 the formula is the per-token one
    assert theory.speedup(0.6, 4, 0.1, c_pass=0.3) == pytest.approx(e[1] / (1 + 0.4 + 0.3))
    assert theory.speedup(0.6, 4, 0.1, c_pass=0.0) == theory.speedup(0.6, 4, 0.1)
    # the break-even: one pass for 4 guesses beats 4 steps of c exactly when c_pass < 4 c
    assert theory.speedup(0.6, 4, 0.0, c_pass=0.39) > theory.speedup(0.6, 4, 0.1) > \
        theory.speedup(0.6, 4, 0.0, c_pass=0.41)
    # with nothing to pay per token the best k is the longest draft, and c_pass still lowers the speedup
    k, s = theory.best_k(0.6, 0.0, k_max=12, c_pass=0.3)
    assert k == 12 and s == pytest.approx(theory.speedup(0.6, 12, 0.0, c_pass=0.3))
    with pytest.raises(ValueError, match="c_pass"):
        theory.speedup(0.6, 4, 0.1, c_pass=-0.1)


def test_the_pass_cost_break_even_is_k_c_at_equal_acceptance_and_falls_with_decay():
    # the same α at every position: one pass for k guesses ties k steps of c exactly at c_pass = k c
    np.testing.assert_allclose(theory.pass_cost_break_even([0.6] * 5, 0.6, 0.07), 0.07 * np.arange(1, 6))
    # a parallel drafter's guesses decay: at the break-even both give the same speedup
    decayed = 0.6 * 0.5 ** np.arange(5)
    verify = np.array([0, 1.0, 1.1, 1.25, 1.4, 1.6, 1.8])
    even = theory.pass_cost_break_even(decayed, 0.6, 0.07, verify)
    for k in range(1, 6):
        par = theory.expected_tokens_positional(decayed[:k]) / (even[k - 1] + verify[k + 1])
        assert par == pytest.approx(theory.speedup(0.6, k, 0.07, verify[k + 1]))
    # at k = 1 both guess position 1 alike, so they tie at c; past it the decay lowers the break-even
    assert even[0] == pytest.approx(0.07) and np.all(even[1:] < 0.07 * np.arange(2, 6))
    assert np.all(np.diff(even) < 0.07)
    with pytest.raises(ValueError, match="verify"):
        theory.pass_cost_break_even(decayed, 0.6, 0.07, verify[:4])


def test_alpha_needed_inverts_the_speedup_and_names_an_unreachable_goal():
    # the seed article's row at c = 0.05, k = 4: alpha 0.7 gives 2.31x, so 2.31x needs alpha of about 0.7
    a = theory.alpha_needed(theory.speedup(0.7, 4, 0.05), 4, 0.05)
    assert a == pytest.approx(0.7, abs=1e-9)
    # broadcast over goals and verify costs; the answer reaches the goal and a hair less does not
    goals, verify = np.array([1.2, 1.4, 1.6]), np.array([[1.0], [1.4]])
    need = theory.alpha_needed(goals, 2, 0.07, verify)
    assert need.shape == (2, 3) and np.all(np.diff(need, axis=1) > 0) and np.all(need[1] > need[0])
    np.testing.assert_allclose(theory.speedup(need, 2, 0.07, verify), np.broadcast_to(goals, (2, 3)))
    assert np.all(theory.speedup(need - 1e-6, 2, 0.07, verify) < goals)
    # a per-round cost counts like k*c: the same alpha for c_pass = 2c at k = 2
    per_round = theory.alpha_needed(1.4, 2, 0.0, 1.4, c_pass=0.14)
    assert per_round == pytest.approx(theory.alpha_needed(1.4, 2, 0.07, 1.4))
    # unreachable: at k = 1 a round yields at most 2 tokens, so a cost of 1.5 steps caps it at 1.33x
    assert np.isnan(theory.alpha_needed(1.4, 1, 0.1, 1.4))
    # reached with nothing accepted: a goal at or below 1/cost needs alpha 0
    assert theory.alpha_needed(0.5, 3, 0.1, 1.0) == 0.0
    with pytest.raises(ValueError, match="goal"):
        theory.alpha_needed(-1.0, 2, 0.1)


def test_alpha_needed_best_k_takes_the_least_need_over_k_per_row():
    ks, curve = np.arange(1, 7), np.array([1.07, 1.2, 1.35, 1.5, 1.6, 1.76])  # verify at k + 1 positions
    costs = np.array([[0.0], [0.07], [0.6]])
    alpha, k = theory.alpha_needed_best_k(1.4, ks, costs, curve)
    full = theory.alpha_needed(1.4, ks, costs, curve)  # (3, 6)
    assert alpha.shape == k.shape == (3,)
    for row in range(2):  # reachable rows: the minimum over k, at the k that attains it
        assert alpha[row] == np.nanmin(full[row]) and k[row] == ks[np.nanargmin(full[row])]
        assert theory.speedup(alpha[row], k[row], costs[row, 0], curve[k[row] - 1]) == pytest.approx(1.4)
    assert alpha[1] > alpha[0]  # a dearer draft needs more acceptance
    # c = 0.6 per guess: k guesses cost more than the k + 1 tokens they can yield at any k here
    assert np.all(np.isnan(full[2])) and np.isnan(alpha[2]) and k[2] == 0
    a1, k1 = theory.alpha_needed_best_k(1.4, [2], 0.07, 1.4)  # one k: alpha_needed itself
    assert a1 == pytest.approx(theory.alpha_needed(1.4, 2, 0.07, 1.4)) and k1 == 2
    with pytest.raises(ValueError, match="1-D"):
        theory.alpha_needed_best_k(1.4, np.ones((2, 2), dtype=int), 0.07)


def test_position_alphas_count_each_draft_length_apart():
    # rounds: (drafted, judged, accepted); the scan judges one past the last accepted draft
    drafted, judged, accepted = [2, 2, 10, 10, 0], [2, 1, 10, 10, 0], [1, 0, 10, 9, 0]
    pooled = theory.position_alphas(drafted, judged, accepted)
    np.testing.assert_allclose(pooled[:3], [3 / 4, 2 / 3, 1.0])  # position 1: 4 rounds reached it, 3 kept
    assert pooled.shape == (10,) and pooled[9] == 0.5
    by = theory.position_alphas(drafted, judged, accepted, by_length=True)
    assert sorted(by) == [0, 2, 10] and by[0].size == 0
    np.testing.assert_allclose(by[2], [0.5, 0.0])
    np.testing.assert_allclose(by[10], [1.0] * 9 + [0.5])
    with pytest.raises(ValueError, match="accepted <= judged <= drafted"):
        theory.position_alphas([2], [3], [1])


def test_predicted_speedup_prices_each_draft_length_at_its_own_alpha():
    # long drafts always accepted, short ones never: pooled alpha would blur the two
    by = {0: [], 2: [0.0, 0.0], 4: [1.0] * 4}
    lengths, verify = [2, 4], [0, 1, 1, 1, 1, 1]
    got = theory.predicted_speedup(by, lengths, verify)
    assert got == pytest.approx((1 + 5) / 2 / 1)
    assert theory.predicted_speedup({4: [0.7] * 4}, [4] * 3, verify, draft_cost=0.2) == \
        pytest.approx(theory.speedup(0.7, 4, 0.05))
    # end to end, the first round inside the prompt pass, against a measured plain time
    assert theory.predicted_speedup(by, lengths, verify, prefill=10, n_tokens=30, prompts=1, plain=50) == \
        pytest.approx(50 / (10 + 30 * 1 / 3 - 1))
    with pytest.raises(ValueError, match="draft length 4"):
        theory.predicted_speedup({2: [0.5, 0.5]}, [2, 4], verify)
    with pytest.raises(ValueError, match="n_tokens"):
        theory.predicted_speedup(by, lengths, verify, prefill=10)


def test_arguments_broadcast():
    out = theory.speedup(np.array([[0.5], [0.9]]), np.array([1, 2, 3]), 0.1)
    assert out.shape == (2, 3)
    ks, sp = theory.best_k(np.array([0.5, 0.9]), 0.05)
    assert list(ks) == [3, 13] and sp.shape == (2,)


@pytest.mark.parametrize("call, match", [
    (lambda: theory.speedup(1.2, 3, 0.1), "alpha"),
    (lambda: theory.speedup(-0.1, 3, 0.1), "alpha"),
    (lambda: theory.speedup(0.5, 0, 0.1), "k"),
    (lambda: theory.speedup(0.5, 2.5, 0.1), "k"),
    (lambda: theory.speedup(0.5, 3, -0.1), "c"),
    (lambda: theory.speedup(0.5, 3, 0.1, verify=0), "verify"),
    (lambda: theory.expected_tokens(float("nan"), 3), "alpha"),
    (lambda: theory.expected_tokens_positional([]), "position"),
])
def test_bad_input_raises_a_clear_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_acceptance_rates_on_the_seed_toy():
    P, Q = toy.seed_pair()
    assert list(np.round(theory.acceptance_rate(P, Q), 3)) == [0.672, 0.692, 0.856, 0.863]
    assert np.all(theory.match_acceptance_rate(P, Q) < theory.acceptance_rate(P, Q))
    tv = 0.5 * np.abs(P - Q).sum(axis=1)
    np.testing.assert_allclose(theory.acceptance_rate(P, Q), 1 - tv)


def test_positional_formula_reduces_to_the_iid_one():
    assert theory.expected_tokens_positional([0.7] * 5) == pytest.approx(theory.expected_tokens(0.7, 5))
    assert theory.expected_tokens_positional([1.0, 0.5, 0.0]) == 2.5


@pytest.mark.parametrize("k", range(1, 9))
def test_formula_predicts_measured_tokens_per_call_within_2_percent(k):
    P, Q = toy.seed_pair()
    _, stats = toy.sample_speculative(P, Q, 20_000, 64, k, np.random.default_rng(k))
    predicted = theory.expected_tokens(stats.alpha, k)
    assert abs(stats.tokens_per_call / predicted - 1) < 0.02


def test_positional_acceptance_breaks_the_iid_formula_and_the_positional_one_fixes_it():
    P, Q = toy.seed_pair()
    noise = np.random.default_rng(9).dirichlet(np.ones(4), size=4)
    Qs = [(1 - b) * P + b * noise for b in (0.1, 0.4, 0.7, 0.9, 0.95)]
    rule = toy.depth_round(P, Qs)
    _, stats = toy.sample_speculative(P, Q, 20_000, 64, 5, np.random.default_rng(0), rule=rule)
    predicted = [toy.predicted_alpha(P, Qj) for Qj in Qs]  # from the model alone, no sampling
    iid = theory.expected_tokens(stats.alpha, 5)
    positional = theory.expected_tokens_positional(predicted)
    assert abs(stats.tokens_per_call / iid - 1) > 0.05
    assert abs(stats.tokens_per_call / positional - 1) < 0.02
