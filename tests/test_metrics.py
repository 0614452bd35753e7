"""The metrics people misread: each definition on a hand-counted trace, vLLM's counters against the same
run, the conversions, per-chunk ITL against TPOT, and the errors on counts that cannot be."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specnotes.engine import Result, Round
from specnotes.metrics import Acceptance, convert, latency

EOS = 2
# k = 3. Per round: drafted, judged = min(accepted + 1, drafted), accepted, emitted
TRACE = [Round([5, 6, 7], 1, 9, 0, at=0.1),  # corrected: 3, 2, 1, 2
         Round([4, 5, 6], 3, 7, 0, at=0.2),  # bonus: 3, 3, 3, 4
         Round([], 0, 8, 0, at=0.3),  # drafted nothing (a plain step): 0, 0, 0, 1
         Round([5, 6, 7], 0, 5, 0, at=0.4),  # all rejected: 3, 1, 0, 1
         Round([6, EOS], 2, None, 0, at=0.5)]  # EOS among the drafts (cut there), no target token: 2, 2, 2, 2
RUN = Result(list(range(10)), TRACE, stopped_on_eos=True)  # 11 drafted, 8 judged, 6 accepted, 10 emitted
RUN_COUNTS = Acceptance(rounds=5, drafting_rounds=4, drafted=11, accepted=6, judged=8, emitted=10,
                        judged_at=(4, 3, 1), kept_at=(3, 2, 1), proposed=11)


def vllm_counters(trace, k):
    """What vLLM's SpecDecodingStats.observe_draft would sum over these rounds (only those that drafted)."""
    drafting = [r for r in trace if r.drafted]
    per_position = [sum(r.accepted > i for r in drafting) for i in range(k)]
    return (len(drafting), sum(len(r.drafted) for r in drafting), sum(r.accepted for r in drafting),
            per_position)


def test_from_result_counts_the_hand_trace():
    assert Acceptance.from_result(RUN) == RUN_COUNTS


def test_alpha_divides_by_the_drafts_judged():
    assert Acceptance.from_result(RUN).alpha == pytest.approx(6 / 8) == RUN.alpha


def test_draft_acceptance_rate_divides_by_every_drafted_token():
    assert Acceptance.from_result(RUN).draft_acceptance_rate == pytest.approx(6 / 11)


@pytest.mark.parametrize("with_bonus, drafting_only, expected", [
    (True, True, 1 + 6 / 4), (False, True, 6 / 4), (True, False, 1 + 6 / 5), (False, False, 6 / 5)])
def test_mean_acceptance_length_with_and_without_the_bonus(with_bonus, drafting_only, expected):
    got = Acceptance.from_result(RUN).mean_acceptance_length(with_bonus, drafting_only)
    assert got == pytest.approx(expected)


def test_tokens_per_pass_counts_no_target_token_in_an_eos_round():
    m = Acceptance.from_result(RUN)
    assert m.tokens_per_pass == pytest.approx(10 / 5) == RUN.tokens_per_call
    assert m.mean_acceptance_length(drafting_only=False) == pytest.approx(2.2)  # one more: no EOS allowance


def test_from_result_reads_any_trace_of_rounds_and_sums_a_list():
    fake = SimpleNamespace(trace=[SimpleNamespace(drafted=[1, 2], accepted=1, next_token=3, judged=2)])
    assert Acceptance.from_result(fake) == Acceptance(1, 1, 2, 1, 2, 2, (1, 1), (1, 0), 2)
    both = Acceptance.from_result([RUN, fake])
    assert (both.rounds, both.drafted, both.judged, both.accepted, both.emitted) == (6, 13, 10, 7, 12)
    assert (both.judged_at, both.kept_at) == ((5, 4, 1), (4, 2, 1))  # summed position by position
    assert both.requests == (RUN_COUNTS, Acceptance.from_result(fake))


def test_per_position_counts_are_the_rounds_whose_scan_reached_each_position():
    m = Acceptance.from_result(RUN)
    judged, kept = m.position_counts
    assert judged.tolist() == [4, 3, 1] and kept.tolist() == [3, 2, 1]
    assert m.per_position_acceptance.tolist() == pytest.approx([3 / 4, 2 / 3, 1.0])
    assert m.mean_draft == pytest.approx(11 / 4)
    # position 1 alone, then positions 2 and 3 pooled by their counts (3 of 4), not their rates' mean
    assert m.first_and_rest == pytest.approx((3 / 4, 3 / 4))
    assert Acceptance(1, 1, 1, 0, 1, None, (1,), (0,)).first_and_rest[1] != 0.0  # nan: nothing after 1


def test_a_tree_round_records_the_tokens_it_proposed_beside_the_line_it_judged():
    tree = SimpleNamespace(drafted=[4, 5], accepted=1, next_token=3, judged=2, size=7)  # 7 nodes
    m = Acceptance.from_trace([tree, Round([1], 0, 2, 0)])
    assert (m.drafted, m.proposed, m.judged) == (3, 8, 3)


# Two requests: a long one whose 10 rounds keep all 3 drafts, a short one whose single round keeps none.
LONG = [Round([1, 2, 3], 3, 4, 0)] * 10  # alpha 30 / 30 = 1, 4 tokens per drafting round with the bonus
SHORT = [Round([1, 2, 3], 0, 4, 0)]  # alpha 0 / 1 = 0, 1 token per drafting round


def test_pooled_figures_lean_toward_the_longer_request_and_per_request_ones_do_not():
    both = Acceptance.from_result([Result([0] * 40, LONG), Result([0], SHORT)])
    assert both.alpha == pytest.approx(30 / 31)  # pooled over every judged draft: the long request's
    assert both.alpha_per_request == pytest.approx((1.0 + 0.0) / 2)  # each request weighs the same
    assert both.mean_acceptance_length() == pytest.approx(1 + 30 / 11)
    assert both.mean_acceptance_length_per_request() == pytest.approx((4 + 1) / 2)
    assert both.mean_acceptance_length_per_request(with_bonus=False) == pytest.approx((3 + 0) / 2)
    assert both.alpha > both.alpha_per_request
    one = Acceptance.from_result(Result([0] * 40, LONG))  # one request: the two definitions agree
    assert one.per_request == (one,) and one.alpha_per_request == one.alpha == 1.0


def test_pooling_keeps_every_request_and_forgets_positions_a_record_does_not_hold():
    run = Acceptance.from_result(RUN)
    nested = Acceptance.pool([Acceptance.pool([run, run]), run])
    assert len(nested.requests) == 3 and nested.accepted == 18
    assert nested.judged_at == (12, 9, 3)
    vllm = Acceptance.from_vllm(4, 12, 7)
    assert Acceptance.pool([run, vllm]).judged_at == () and Acceptance.pool([run, vllm]).judged is None
    with pytest.raises(TypeError, match="Acceptance"):
        Acceptance.pool([])


def test_from_vllm_agrees_with_from_result_on_the_same_run():
    trace = TRACE[:4] + [Round([6, 7, EOS], 3, None, 0)]  # every draft full length, so judged is recoverable
    ours = Acceptance.from_result(Result(list(range(11)), trace, True))
    theirs = Acceptance.from_vllm(*vllm_counters(trace, 3))
    assert theirs == Acceptance(None, 4, 12, 7, 9, None)
    assert (theirs.drafting_rounds, theirs.drafted, theirs.accepted, theirs.judged) == (
        ours.drafting_rounds, ours.drafted, ours.accepted, ours.judged)
    assert theirs.alpha == ours.alpha == pytest.approx(7 / 9)
    assert theirs.draft_acceptance_rate == ours.draft_acceptance_rate == pytest.approx(7 / 12)
    assert theirs.mean_acceptance_length() == ours.mean_acceptance_length() == pytest.approx(1 + 7 / 4)
    assert np.isnan(theirs.tokens_per_pass)  # vLLM's counters hold no rounds without drafts


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 4)), min_size=1, max_size=30))
def test_from_vllm_recovers_judged_whenever_every_draft_is_full_length(rounds):
    trace = [Round([1] * 4 if drafts else [], min(a, 4) if drafts else 0, 3, 0) for drafts, a in rounds]
    ours, theirs = Acceptance.from_result(Result([], trace)), Acceptance.from_vllm(*vllm_counters(trace, 4))
    assert theirs.judged == ours.judged and theirs.accepted == ours.accepted
    assert not ours.alpha < ours.draft_acceptance_rate  # judged <= drafted (both nan with no drafts)


def test_from_vllm_leaves_alpha_unknown_without_per_position_counts_or_after_short_drafts():
    assert np.isnan(Acceptance.from_vllm(4, 12, 7).alpha)
    short = Acceptance.from_vllm(*vllm_counters(TRACE, 3))  # the EOS round drafted 2 of 3
    assert short.judged is None and np.isnan(short.alpha)
    assert short.draft_acceptance_rate == pytest.approx(6 / 11)


def test_rows_show_one_run_under_every_definition():
    rows = Acceptance.from_result(RUN).rows()
    assert [round(v, 4) for _, v, _ in rows] == [0.75, 0.5455, 2.5, 1.5, 2.2, 1.2, 2.0]
    assert "draft_acceptance_rate" in rows[1][2] and "mean_acceptance_length" in rows[2][2]
    assert "SGLang" in rows[-1][2] and "specnotes" in rows[0][2]
    assert "0.750" in Acceptance.from_result(RUN).table().splitlines()[0]
    two = Acceptance.from_result([Result([0] * 40, LONG), Result([0], SHORT)]).rows()
    assert [round(v, 4) for _, v, who in two if "per request" in who] == [0.5, 2.5]


def test_convert_between_lengths_and_the_draft_acceptance_rate():
    assert convert(2.5, "length_with_bonus", "length_without_bonus") == pytest.approx(1.5)
    assert convert(1.5, "length_without_bonus", "length_with_bonus") == pytest.approx(2.5)
    assert convert(2.5, "length_with_bonus", "draft_acceptance_rate", k=3) == pytest.approx(0.5)
    assert convert(0.5, "draft_acceptance_rate", "length_with_bonus", k=4) == pytest.approx(3.0)
    full = Acceptance.from_vllm(*vllm_counters(TRACE[:4], 3))  # every draft had k = 3 tokens
    assert convert(full.mean_acceptance_length(), "length_with_bonus", "draft_acceptance_rate", k=3) == (
        pytest.approx(full.draft_acceptance_rate))


def test_per_chunk_itl_is_three_times_tpot_when_chunks_carry_three_tokens():
    times = np.repeat([0.1, 0.2, 0.3, 0.4], 3)
    lat = latency(times)
    assert (lat.chunks, lat.tokens) == (4, 12)
    assert lat.chunk_itl == pytest.approx(0.1) and lat.tpot == pytest.approx(0.3 / 11)
    np.testing.assert_allclose(lat.chunk_gaps, [0.1, 0.1, 0.1])


def test_latency_of_a_run_reads_its_arrival_times():
    lat = latency(RUN.arrival_times)  # rounds of 2, 4, 1, 1, 2 tokens, 0.1 s apart
    assert (lat.chunks, lat.tokens) == (5, 10)
    assert lat.chunk_itl == pytest.approx(0.1) and lat.tpot == pytest.approx(0.4 / 9)
    one = latency([0.5])
    assert np.isnan(one.chunk_itl) and np.isnan(one.tpot) and one.chunks == 1


@pytest.mark.parametrize("counts, match", [
    ((5, 4, 11, -1, 8, 10), "accepted must be >= 0"),
    ((5, 4, 11, 12, None, None), r"accepted \(12\) cannot exceed drafted \(11\)"),
    ((3, 4, 11, 6, 8, 10), r"drafting_rounds \(4\) cannot exceed rounds \(3\)"),
    ((5, 4, 3, 2, None, None), r"drafted \(3\) must be >= drafting_rounds \(4\)"),
    ((5, 0, 2, 0, None, None), "0 when no round drafted"),
    ((5, 4, 11, 6, 5, 10), r"judged \(5\) must lie in 6\.\.10"),
    ((5, 4, 11, 6, 11, 10), r"judged \(11\) must lie in 6\.\.10"),
    ((5, 4, 11, 6, 8, 12), r"emitted \(12\) must lie in 6\.\.11"),
    ((5, 4, 11, 2.5, 8, 10), "accepted must be a whole number"),
])
def test_impossible_counts_are_refused_with_what_is_wrong(counts, match):
    with pytest.raises(ValueError, match=match):
        Acceptance.from_counts(*counts)


def test_bad_kinds_and_bad_vllm_counters_are_refused():
    with pytest.raises(TypeError, match="accepted must be a number"):
        Acceptance.from_counts(5, 4, 11, True)
    with pytest.raises(TypeError, match="from_result takes a specnotes.engine.Result"):
        Acceptance.from_result(TRACE[0])
    with pytest.raises(ValueError, match="non-increasing"):
        Acceptance.from_vllm(4, 12, 7, [2, 3, 2])
    with pytest.raises(ValueError, match="sums to 6, not num_accepted_tokens"):
        Acceptance.from_vllm(4, 12, 7, [3, 2, 1])


def test_bad_conversions_and_arrival_times_are_refused():
    with pytest.raises(ValueError, match="alpha needs the judged count"):
        convert(0.7, "alpha", "length_with_bonus")
    with pytest.raises(ValueError, match="needs k"):
        convert(2.5, "length_with_bonus", "draft_acceptance_rate")
    with pytest.raises(ValueError, match="means 4 accepted drafts per round, outside 0..3"):
        convert(5.0, "length_with_bonus", "length_without_bonus", k=3)
    with pytest.raises(ValueError, match="draft_acceptance_rate must lie in"):
        convert(1.2, "draft_acceptance_rate", "length_with_bonus", k=3)
    with pytest.raises(ValueError, match="must not decrease"):
        latency([0.1, 0.3, 0.2])
    with pytest.raises(ValueError, match="arrival_times must be >= 0"):
        latency([-0.1, 0.2])
