"""Adaptive k (specnotes.adaptive), the confidence stop, the numerics diagnostic and arrival times."""

import numpy as np
import pytest
import torch

from specnotes import adaptive, engine, models, numerics, surgery, theory
from specnotes.drafters import DraftModel, PromptLookup

TARGET = models.tiny_llama(seed=0, layers=4)
DRAFT = surgery.truncated(TARGET, 2)
PROMPT = torch.tensor([[5, 17, 42, 8, 99, 3, 17, 42]])


def greedy(n):
    return engine.generate(TARGET, PromptLookup(), PROMPT, n, eos_token_id=-1).tokens


def test_heuristic_schedule_is_transformers_rule():
    h = adaptive.Heuristic(start=5)
    h.observe(5, 5)
    assert h.next_k() == 7
    h.observe(7, 3)
    assert h.next_k() == 6
    for _ in range(10):
        h.observe(6, 0)
    assert h.next_k() == 1  # never below k_min
    h.observe(0, 0)  # a round with no draft changes nothing
    assert h.next_k() == 1


def test_controller_picks_best_k_and_turns_itself_off():
    c = adaptive.Controller(c=0.05, prior=0.8, prior_weight=1e9)  # α pinned at the prior
    k, s = c.plan(0.8)
    assert (k, pytest.approx(s)) == tuple(int(x) if i == 0 else x for i, x in
                                           enumerate(theory.best_k(0.8, 0.05, k_max=12)))
    assert c.next_k() == k
    # a slow drafter that is rarely right: no k beats plain decoding, so it drafts nothing, with probes
    off = adaptive.Controller(c=0.9, prior=0.1, prior_weight=1e9, probe_every=4)
    ks = [off.next_k() for _ in range(8)]
    assert ks == [0, 0, 0, 1, 0, 0, 0, 1]
    # the estimate follows what it observes
    live = adaptive.Controller(c=0.1, prior=0.5, prior_weight=2, decay=0.5)
    for _ in range(20):
        live.observe(4, 4)
    assert live.alpha > 0.95
    for _ in range(20):
        live.observe(4, 0)
    assert live.alpha < 0.05


def test_controller_respects_a_costly_verify_curve():
    flat = adaptive.Controller(c=0.0, prior=0.7, prior_weight=1e9)
    steep = adaptive.Controller(c=0.0, prior=0.7, prior_weight=1e9, verify_cost=[0, 1, 1.1, 1.2, 1.6, 1.7])
    assert steep.plan(0.7)[0] < flat.plan(0.7)[0]


@pytest.mark.parametrize("schedule", [adaptive.Fixed(3), adaptive.Heuristic(), adaptive.Controller(0.2)],
                         ids=["fixed", "heuristic", "controller"])
def test_adaptive_drafting_stays_exact(schedule):
    want = greedy(30)
    got = engine.generate(TARGET, adaptive.AdaptiveK(DraftModel(DRAFT), schedule), PROMPT, 30,
                          eos_token_id=-1)
    assert got.tokens == want
    lengths = got.drafted_counts
    if isinstance(schedule, adaptive.Fixed):
        assert lengths.max() == 3 and np.mean(lengths == 3) > 0.7  # shorter only where room ran out


def test_confidence_stop_cuts_drafts_and_stays_exact():
    long = engine.generate(TARGET, DraftModel(DRAFT), PROMPT, 30, k=8, eos_token_id=-1)
    short = engine.generate(TARGET, DraftModel(DRAFT, stop_below=0.5), PROMPT, 30, k=8, eos_token_id=-1)
    assert short.tokens == long.tokens == greedy(30)
    assert short.drafted_counts.mean() < long.drafted_counts.mean()
    with pytest.raises(ValueError, match="threshold"):
        DraftModel(DRAFT, stop_below=1.5)


def test_arrival_times_come_in_bursts():
    res = engine.generate(TARGET, PromptLookup(), torch.tensor([[1, 2, 3, 4] * 6]), 20, eos_token_id=-1)
    t = res.arrival_times
    assert t.shape == (len(res.tokens),) and np.all(np.diff(t) >= 0)
    assert np.sum(np.diff(t) == 0) == len(res.tokens) - len(res.trace)  # one wait per round


def test_verify_vs_steps_compares_the_two_paths_position_by_position():
    fp32 = numerics.verify_vs_steps(TARGET, PROMPT, k=4)
    assert len(fp32.max_abs_diff) == 5 and all(fp32.same_argmax)
    assert 0 < max(fp32.max_abs_diff) < 1e-4 * max(fp32.logit_scale, 1)  # rounding, not a bug
    bf16 = numerics.verify_vs_steps(TARGET, PROMPT, k=4, dtype="bfloat16")
    assert bf16.dtype == "bfloat16" and np.all(np.isfinite(bf16.max_abs_diff)) and len(bf16.margin) == 5
    assert next(TARGET.parameters()).dtype == torch.float32  # the diagnostic did not convert the original


def test_first_divergence_reports_a_planted_difference(monkeypatch):
    d = numerics.first_divergence(TARGET, PROMPT, PromptLookup(), max_new_tokens=20)
    assert d.position is None and d.plain == d.speculative and len(d.margins) == 20
    assert d.smallest_margin == pytest.approx(min(d.margins))

    real = engine.generate

    def flipped(*args, **kwargs):  # a planted numerics flip at position 7
        res = real(*args, **kwargs)
        res.tokens[7] = (res.tokens[7] + 1) % 256
        return res

    monkeypatch.setattr(engine, "generate", flipped)
    d = numerics.first_divergence(TARGET, PROMPT, PromptLookup(), max_new_tokens=20)
    assert d.position == 7 and d.margin_there == pytest.approx(d.margins[7])
    assert d.smallest_margin == pytest.approx(min(d.margins[:8]))
