"""Adaptive k (specnotes.adaptive), the confidence stop, the numerics diagnostic and arrival times."""

import copy

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


CPU_CURVE = np.r_[0.0, np.ones(8), 1 + 0.125 * np.arange(1, 600)]  # flat to 8 positions, then compute-bound


def test_cost_aware_learns_alpha_by_position():
    cost = adaptive.CostAware(prior=0.5, prior_weight=1, decay=0.9, k_max=6, verify_cost=[0, 1, 1.1, 1.2])
    for _ in range(60):  # the first draft is always kept, the second never
        cost.observe(4, 1)
    assert cost.alphas[0] > 0.95 and cost.alphas[1] < 0.05
    assert np.allclose(cost.alphas[2:], 0.5)  # never judged: still the prior
    assert cost.plan()[0] == 1  # verifying past a position that never survives buys nothing, at a cost


def test_cost_aware_prices_survival_against_the_verify_curve():
    alphas = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    free = adaptive.CostAware(k_max=6).plan(alphas)
    costly = adaptive.CostAware(k_max=6, verify_cost=[0, 1, 1.3, 1.6, 1.9, 2.2, 2.5, 2.8]).plan(alphas)
    assert free[0] == 6 and 0 < costly[0] < 6 and costly[1] < free[1]
    # its prediction is the positional formula over the cost of the pass it chose
    m = costly[0]
    want = theory.expected_tokens_positional(alphas[:m]) / (1 + 0.3 * m)
    assert costly[1] == pytest.approx(want)
    # a drafter that costs a target step per token never pays
    assert adaptive.CostAware(c=1.0, k_max=6).plan(alphas) == (0, 1.0)


def test_cost_aware_turns_speculation_down_at_large_batch_by_itself():
    alphas = [0.8] * 12
    ks = {rows: adaptive.CostAware(verify_cost=CPU_CURVE, rows=rows).plan(alphas)[0]
          for rows in (1, 2, 8, 32)}
    assert ks[1] > 0 and ks[32] == 0 and ks[1] >= ks[2] >= ks[8] >= ks[32]
    off = adaptive.CostAware(verify_cost=CPU_CURVE, rows=32, probe_every=3)
    assert [off.next_k() for _ in range(6)] == [0, 0, 1, 0, 0, 1]  # probes keep α learning


def test_cost_by_positions_reads_a_measured_grid_by_total_positions():
    grid = {(1, 1): 0.010, (1, 4): 0.020, (2, 2): 0.022, (4, 1): 0.018, (2, 1): 0.015, (4, 4): 0.080}
    cost = adaptive.cost_by_positions(grid)
    assert cost.shape == (17,) and cost[0] == 0 and cost[1] == 1
    assert cost[2] == pytest.approx(1.5) and cost[4] == pytest.approx(2.0)  # (1,4), (2,2), (4,1) averaged
    assert cost[3] == pytest.approx(1.75) and cost[16] == pytest.approx(8.0)  # interpolated between cells
    with pytest.raises(ValueError, match=r"\(1, 1\) cell"):
        adaptive.cost_by_positions({(2, 1): 0.01})


def test_cost_aware_follows_the_width_of_the_pass_it_rides():
    alphas = [0.8] * 12
    alone = adaptive.CostAware(verify_cost=CPU_CURVE, prior=0.8, prior_weight=1e9)
    assert alone.plan(alphas)[0] > 0
    alone.observe(3, 3, rows=32)  # a round in a 32-row batch: the next pass is compute-bound
    assert alone.rows == 32 and alone.plan(alphas)[0] == 0
    alone.observe(3, 3, rows=1)  # the batch drained to one row: drafting pays again
    assert alone.plan(alphas)[0] > 0
    alone.observe(3, 3, rows=32)
    alone.reset()
    assert alone.rows == 1  # a new generation starts alone until its first feedback says otherwise
    with pytest.raises(ValueError, match="rows"):
        adaptive.CostAware(rows=0)


def test_cost_aware_verifies_fewer_positions_per_row_in_a_wide_batch_by_itself():
    # the target drafting for itself: every draft survives, so alone it verifies several positions a pass
    prompts = [[5 + i, 17, 42, 8, 99, 3] * 2 for i in range(32)]

    def drafted_per_round(batch):
        def make():
            return adaptive.AdaptiveK(DraftModel(TARGET), adaptive.CostAware(verify_cost=CPU_CURVE))

        results = engine.generate_batch(TARGET, make, prompts[:batch], 16, k=8, eos_token_id=-1)
        rounds = [r for res in results for r in res.trace[1:]]  # after the first round's feedback
        return np.mean([len(r.drafted) for r in rounds])

    alone, wide = drafted_per_round(1), drafted_per_round(32)
    assert alone >= 2 and wide < 0.5 * alone  # the same schedule, told only the width of each pass


def test_cost_aware_drafting_stays_exact_in_a_batch():
    target = copy.deepcopy(TARGET).double()  # float64: no near-ties between batch shapes
    prompts = [[5, 17, 42, 8, 99, 3, 17, 42], [7, 7, 1, 2, 3, 7, 7, 1]]
    shared = adaptive.CostAware(rows=2)  # one budget for the pass: both rows' drafters share it
    want = engine.generate_batch(target, PromptLookup, prompts, 20, k=8, eos_token_id=-1)
    got = engine.generate_batch(target, lambda: adaptive.AdaptiveK(PromptLookup(), shared), prompts, 20, k=8,
                                eos_token_id=-1)
    assert [r.tokens for r in got] == [r.tokens for r in want]


@pytest.mark.parametrize("schedule", [adaptive.Fixed(3), adaptive.Heuristic(), adaptive.Controller(0.2),
                                      adaptive.CostAware(0.2)],
                         ids=["fixed", "heuristic", "controller", "cost-aware"])
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


def test_versus_hindsight_compares_a_policy_with_the_best_fixed_k_and_its_noise():
    bands = {"fixed k=1": (0.8, 0.7, 0.9), "fixed k=4": (1.5, 1.4, 1.6), "cost-aware": (1.45, 1.3, 1.5)}
    verdict = adaptive.versus_hindsight(bands, "cost-aware", ["fixed k=1", "fixed k=4"])
    assert verdict["best"] == "fixed k=4" and verdict["holds"]  # 1.45 is within k=4's lowest repeat, 1.4
    slower = {**bands, "cost-aware": (1.35, 1.2, 1.5)}
    assert not adaptive.versus_hindsight(slower, "cost-aware", ["fixed k=1", "fixed k=4"])["holds"]
    with pytest.raises(ValueError, match="no entry"):
        adaptive.versus_hindsight(bands, "controller", ["fixed k=1"])
