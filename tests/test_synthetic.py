"""Synthetic acceptance against the formula (specnotes.synthetic): with every draft position kept at a set
rate, the toy and the engine deliver theory.expected_tokens_positional's tokens per pass within 2%, and a
formula for other rates is off by more (the check can fail)."""

import numpy as np
import pytest

from specnotes import lossy, models, synthetic, theory

PROFILES = [(0.5,), (0.8,), (0.9, 0.7, 0.5, 0.3)]


@pytest.mark.parametrize("rates", PROFILES, ids=str)
def test_the_toy_delivers_the_formula_for_set_rates(rates):
    check = synthetic.on_toy(rates, k=4, n=20_000)
    assert abs(check.error) < 0.02, check


@pytest.fixture(scope="module")
def target():
    return models.tiny_llama(seed=0, layers=2)


@pytest.mark.parametrize("rates", PROFILES[1:], ids=str)
def test_the_engine_delivers_the_formula_for_set_rates(target, rates):
    prompts = [[1 + i, 2, 3] for i in range(64)]
    check = synthetic.on_engine(target, prompts, rates, k=4, max_new_tokens=600, seed=1)
    assert check.rounds > 10_000 and abs(check.error) < 0.02, check


def test_a_formula_for_other_rates_misses_by_more_than_the_tolerance():
    check = synthetic.on_toy((0.9, 0.7, 0.5, 0.3), k=4, n=20_000)
    wrong = float(theory.expected_tokens_positional([0.85, 0.65, 0.45, 0.25]))
    assert abs(check.measured / wrong - 1) > 0.02


def test_per_position_rates_are_the_positions_own():
    knob = lossy.Synthetic((0.9, 0.1))
    assert list(knob.rates(4)) == [0.9, 0.1, 0.1, 0.1]
    assert np.allclose(knob.acceptance(np.ones(3)), [0.9, 0.1, 0.1])
    with pytest.raises(ValueError, match="per-position Synthetic rate has no"):
        lossy.toy_tables(knob, np.eye(3), np.eye(3))
    with pytest.raises(ValueError, match="rate"):
        lossy.Synthetic((0.5, 1.5))
