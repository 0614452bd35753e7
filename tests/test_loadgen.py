"""Notebook 09's reducers. First loadgen.Sweep's, on a hand-made sweep: the medians, ratios and spreads the
notebook prints, checked against values worked out by hand, over three repeats chosen so that a mean in place
of the median gives other numbers (the live sweep against a stand-in server is in test_server.py). Then the
audit's two in stats: the power of the chi-square test against a given alternative, and the TV of sampled
tokens position by position."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from specnotes import loadgen, stats


def summary(c, total, ttft=0.5):
    return loadgen.Summary(concurrency=c, total_tps=total, request_tps=total / c, ttft_s=ttft,
                           itl_token_s=0.1, itl_chunk_s=0.2, tokens_per_chunk=1.5, requests=c)


# total tokens/s of three repeats, per (mode, level)
TOTALS = {("plain", 1): [10.0, 11.0, 30.0], ("plain", 4): [40.0, 20.0, 30.0],
          ("ngram", 1): [5.0, 22.0, 6.0], ("ngram", 4): [15.0, 45.0, 18.0]}
SWEEP = loadgen.Sweep([1, 4], {key: [summary(key[1], t) for t in totals] for key, totals in TOTALS.items()})


def test_the_median_is_over_repeats_per_level_in_level_order():
    assert SWEEP.median("plain", "total_tps") == [11.0, 30.0]  # means would be 17 and 30
    assert SWEEP.median("ngram") == [6.0, 18.0]  # means 11 and 26; total_tps is the default
    assert SWEEP.median("plain", "request_tps") == [11.0, 7.5]  # total / c
    assert all(isinstance(v, float) for v in SWEEP.median("plain"))


def test_the_ratio_is_of_medians_not_of_means():
    ratio = SWEEP.ratio("ngram", "plain")
    assert isinstance(ratio, np.ndarray)
    np.testing.assert_allclose(ratio, [6 / 11, 18 / 30], rtol=0, atol=1e-15)  # means: 11/17 and 26/30
    np.testing.assert_allclose(SWEEP.ratio("plain", "ngram"), [11 / 6, 30 / 18], rtol=0, atol=1e-15)


def test_the_ratio_is_what_notebook_09_computed_by_hand_to_the_last_bit():
    def by_hand(name):  # notebook 09's old median helper
        return [float(np.median([s.total_tps for s in SWEEP.runs[(name, c)]])) for c in [1, 4]]

    assert SWEEP.median("ngram") == by_hand("ngram")
    hand_ratio = np.array(by_hand("ngram")) / np.array(by_hand("plain"))
    assert np.array_equal(SWEEP.ratio("ngram", "plain"), hand_ratio)


def test_the_spread_is_the_lowest_and_highest_repeat_per_level():
    assert SWEEP.spread("plain") == ([10.0, 20.0], [30.0, 40.0])
    assert SWEEP.spread("ngram", "total_tps") == ([5.0, 15.0], [22.0, 45.0])


def test_an_even_number_of_repeats_takes_the_middle_two():
    two = loadgen.Sweep([2], {("a", 2): [summary(2, 3.0), summary(2, 8.0)],
                              ("b", 2): [summary(2, 1.0, ttft=0.25), summary(2, 1.0, ttft=1.0)]})
    assert two.median("a") == [5.5]
    assert two.median("b", "ttft_s") == [0.625]
    assert two.modes == ["a", "b"]


@pytest.mark.parametrize("call, name", [
    (lambda: SWEEP.median("eagle"), "mode"), (lambda: SWEEP.ratio("ngram", "plan"), "mode"),
    (lambda: SWEEP.median("plain", "tps"), "field"), (lambda: SWEEP.spread("plain", "concurrent"), "field"),
])
def test_an_unknown_mode_or_field_is_named(call, name):
    with pytest.raises(ValueError, match=f"^{name} must be one of|^{name} must be a Summary field"):
        call()


# --------------------------------------------------------------------------- the audit's reducers, in stats


def test_power_is_the_noncentral_chi_square_worked_out_by_hand():
    # df 1: X = (Z + sqrt(nc))^2 with nc = 100 * 2 * 0.1^2 / 0.5 = 4,
    # so P(X > c) = P(Z > sqrt(c) - 2) + P(Z < -sqrt(c) - 2)
    root_c = sps.norm.isf(0.025)  # chi2(1).isf(0.05) = 1.96^2
    by_hand = sps.norm.sf(root_c - 2) + sps.norm.cdf(-root_c - 2)
    assert stats.power([0.5, 0.5], [0.6, 0.4], 100, level=0.05) == pytest.approx(by_hand, rel=1e-9)
    assert stats.power([0.5, 0.5, 0.0], [0.6, 0.4, 0.0], 100, level=0.05) == pytest.approx(by_hand, rel=1e-9)
    same = [0.2, 0.3, 0.5]
    assert stats.power(same, same, 50, level=0.01) == pytest.approx(0.01)  # no change: the false-alarm rate


def test_power_agrees_with_samples_for_power():
    probs = np.array([0.4, 0.3, 0.2, 0.1])
    shift = 0.2
    alt = (1 - shift) * probs
    alt[0] += shift
    n = stats.samples_for_power(probs, shift)
    assert stats.power(probs, alt, n) >= 0.9 > stats.power(probs, alt, n - 1)


@pytest.mark.parametrize("args, name", [
    (([0.5, 0.5], [0.2, 0.3, 0.5], 10), "alternative"), (([1.0], [1.0], 10), "probs"),
    (([0.5, 0.5], [0.5, 0.5], 0), "n"), (([0.5, 0.5], [0.6, 0.4], 10, 0.0), "level"),
])
def test_power_names_a_bad_argument(args, name):
    with pytest.raises(ValueError, match=name):
        stats.power(*args)


def test_position_tv_splits_the_first_token_from_the_second_after_a_given_first():
    samples = np.array([[1, 0], [1, 2], [0, 1], [1, 0]])
    got = stats.position_tv(samples, [0.25, 0.75, 0.0], [0.5, 0.5, 0.0], given=1)
    assert got.first_tv == 0.0  # first tokens 0, 1, 1, 1: exactly the first distribution
    np.testing.assert_allclose(got.second, [2 / 3, 0, 1 / 3])  # after a 1: 0, 2, 0
    assert got.second_tv == pytest.approx(0.5 * (1 / 6 + 1 / 2 + 1 / 3)) and got.n == 3
    none = stats.position_tv(samples, [0.25, 0.75, 0.0], [0.5, 0.5, 0.0], given=2)
    assert none.n == 0 and not none.second.any() and none.second_tv == pytest.approx(0.5)


@pytest.mark.parametrize("samples", [np.array([[0, 3]]), np.array([[0], [1]]), np.zeros((0, 2), int),
                                     np.array([[0.0, 1.0]])])
def test_position_tv_names_bad_samples(samples):
    with pytest.raises(ValueError, match="samples"):
        stats.position_tv(samples, [0.5, 0.5, 0.0], [0.5, 0.5, 0.0], given=0)
