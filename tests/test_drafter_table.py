"""The drafter table's arithmetic (specnotes.drafter_table) and the bench's free-form verdict, on made-up
runs."""

from __future__ import annotations

import pytest

from specnotes import drafter_table
from specnotes.metrics import Acceptance
from tests.notebook_utils import tool


def _run(drafter, kind, accepted, judged, seconds, plain_seconds=2.0, new_tokens=20, calls=10):
    """`judged` rounds of one drafted token each, `accepted` of them kept."""
    acc = Acceptance(calls, judged, judged, accepted, judged, None, (judged,), (accepted,))
    return drafter_table.Run(drafter, kind, 0, new_tokens, seconds, plain_seconds, 0.1, calls, acc, True)


RUNS = [
    _run("a", "copy", 9, 10, 0.5),  # a shines on copying only
    _run("a", "story", 1, 10, 2.5),
    _run("a", "qa", 1, 10, 2.5),
    _run("b", "copy", 3, 10, 2.0),
    _run("b", "story", 6, 10, 1.5),
    _run("b", "qa", 5, 10, 1.8),
]


def test_rows_add_up_counts_and_times_before_taking_ratios():
    rows = {(r.drafter, r.kind): r for r in drafter_table.table(RUNS)}
    assert rows["b", "all"].alpha == pytest.approx(14 / 30)
    assert rows["b", "all"].speedup == pytest.approx(6.0 / 5.3)  # not the mean of the three ratios
    assert rows["a", "copy"].speedup == pytest.approx(4.0)
    # the counts behind the rates: rounds, drafts proposed, rounds whose scan reached each position
    assert (rows["b", "all"].rounds, rows["b", "all"].drafted, rows["b", "all"].reached) == (30, 30, [30])
    assert (rows["a", "story"].rounds, rows["a", "story"].drafted) == (10, 10)
    assert rows["b", "all"].kept == [14] and rows["b", "all"].first_and_rest[0] == pytest.approx(14 / 30)


def test_free_form_rows_pool_story_and_qa_only():
    free = {r.drafter: r for r in drafter_table.free_form(RUNS)}
    assert {r.kind for r in free.values()} == {"free-form"}
    assert free["a"].alpha == pytest.approx(2 / 20)  # its copy run does not count
    assert free["b"].alpha == pytest.approx(11 / 20)
    assert free["b"].speedup == pytest.approx(4.0 / 3.3)


def test_the_verdict_names_what_stops_each_drafter_short_of_the_goal():
    from dataclasses import replace

    base = drafter_table.free_form(RUNS)[1]  # b: α 0.55, one draft a round
    rows = [replace(base, drafter="fast", speedup=1.5),
            replace(base, drafter="short-of-alpha", c=0.1, speedup=1.1),
            replace(base, drafter="too-costly", c=0.5, speedup=0.9)]
    verify = [0.0, 1.0, 1.2, 1.5]
    found = {v.drafter: v for v in drafter_table.verdicts(rows, verify, goal=1.4)}
    assert found["fast"].limit == "reaches it"
    # one draft a round, a 2-position verify pass of 1.2 steps: (1 + α) / 1.3 >= 1.4 needs α >= 0.82
    assert found["short-of-alpha"].limit == "α"
    assert found["short-of-alpha"].verify == pytest.approx(1.2)
    assert found["short-of-alpha"].needed == pytest.approx(0.82)
    # at c = 0.5 a round costs 1.7 steps for at most 2 tokens: 1.18x with every draft accepted
    assert found["too-costly"].limit == "cost" and found["too-costly"].needed != found["too-costly"].needed
    # α enough by the formula, yet short of the goal: what the formula leaves out is named instead
    decays = replace(base, drafter="decays", c=0.1, alpha=0.9, speedup=1.2)
    rest = drafter_table.verdicts([decays], verify, 1.4)[0]
    assert rest.limit == "the rest" and rest.needed == pytest.approx(0.82)
    assert "not α (0.90 ≥ 0.82)" in drafter_table.markdown_verdicts([rest], 1.4)
    # the verify pass is read from the curve: a dearer one raises the α needed
    dearer = drafter_table.verdicts(rows[1:2], [0.0, 1.0, 1.25], goal=1.4)[0]
    assert dearer.needed == pytest.approx(1.4 * 1.35 - 1)
    text = drafter_table.markdown_verdicts(list(found.values()), 1.4)
    assert "Reaching 1.4× plain: fast (1.50×" in text and "α: 0.55 measured, 0.82 needed" in text
    assert "cost: c + verify = 1.70 steps a round" in text
    assert "None reaches 1.4× plain here; the closest is short-of-alpha, at 1.100× plain" in (
        drafter_table.markdown_verdicts([found["short-of-alpha"], found["too-costly"]], 1.4))
    with pytest.raises(ValueError, match="verify_cost"):
        drafter_table.verdicts(rows, [0.0], goal=1.4)


def test_the_bench_judges_only_the_trained_drafters():
    bench = tool("bench_drafters")
    names = ["prompt-lookup"] * 3 + ["eagle-lite"] * 3  # only the second is a trained drafter
    runs = [drafter_table.Run(**{**vars(r), "drafter": name}) for r, name in zip(RUNS, names, strict=True)]
    free = drafter_table.free_form(runs)
    assert {r.drafter for r in free} == {"prompt-lookup", "eagle-lite"}
    assert bench.free_form_verdict(None, None, free[:1], []) == ([], "")  # no trained drafter: no verdict
    assert set(bench.TRAINED) >= {"eagle3-lite", "parallel-lite", "eagle-lite", "distilled-draft"}


def test_the_verdict_names_the_closest_drafter_to_three_decimals_when_none_reaches_the_goal(monkeypatch):
    from dataclasses import replace

    bench = tool("bench_drafters")
    base = drafter_table.free_form(RUNS)[1]
    rows = [replace(base, drafter="eagle-lite", speedup=1.3976), replace(base, drafter="medusa", speedup=0.8)]
    monkeypatch.setattr(bench, "prompt_ids", lambda tokenizer, text: None)
    monkeypatch.setattr(bench.live, "verdicts", lambda target, ids, found, goal: drafter_table.verdicts(
        found, [0.0, 1.0, 1.1, 1.2], goal))
    free = [{"kind": "story", "text": "a story"}]
    _, text = bench.free_form_verdict(None, None, rows, free)
    # the table prints 1.40×, so the sentence says how far short it is
    assert "| eagle-lite | 1.40× |" in text and "the closest is eagle-lite, at 1.398× plain" in text
    _, text = bench.free_form_verdict(None, None, [replace(rows[0], speedup=1.5)], free)
    assert "Reaching 1.4× plain: eagle-lite" in text and "closest" not in text


class _Words:
    """A tokenizer of the tiny model: each word's length is its token id (no chat template)."""

    eos_token_id = None
    chat_template = None

    def __call__(self, text, return_tensors="pt"):
        import torch

        return {"input_ids": torch.tensor([[len(w) for w in text.split()]])}


def test_the_table_is_timed_round_robin_with_a_warm_up_of_every_drafter():
    from specnotes import models
    from specnotes.drafters import PromptLookup

    made = []

    def make():
        made.append(1)
        return PromptLookup()

    prompts = [{"kind": "story", "text": "a bb a bb a bb ccc"}, {"kind": "copy", "text": "dddd a bb a bb"},
               {"kind": "story", "text": "ee ffffff a"}]
    runs = drafter_table.run(models.tiny_llama(seed=0, layers=1), _Words(), {"pl": make}, prompts,
                             max_new_tokens=6, k=2, progress=False, repeats=2, warmup=1)
    assert len(made) == 1 + 2 * 3  # one warm-up run, then each prompt in each repeat
    assert [(r.drafter, r.kind, r.prompt) for r in runs] == [("pl", "story", 0), ("pl", "copy", 1),
                                                             ("pl", "story", 2)]  # in the prompts' order
    assert all(r.identical and r.new_tokens == 6 and r.seconds > 0 and r.plain_seconds > 0 for r in runs)
    assert all(r.acceptance.emitted == 6 and len(r.acceptance.per_request) == 1 for r in runs)
    with pytest.raises(ValueError, match="plain"):
        drafter_table.run(None, _Words(), {"plain": make}, prompts)


def _rows(speedups: dict) -> list:
    return [drafter_table.Row(name, "all", 0.5, [], 1.5, 1.0, 0.1, 0.05, s, True)
            for name, s in speedups.items()]


def test_bands_give_each_drafter_its_median_and_spread_over_repeats():
    tables = [_rows({"a": 1.0, "b": 2.0}), _rows({"a": 1.4, "b": 1.6}), _rows({"a": 1.1, "b": 1.9})]
    assert drafter_table.bands(tables) == {"a": (1.1, 1.0, 1.4), "b": (1.9, 1.6, 2.0)}
    with pytest.raises(ValueError, match="no row of kind 'copy'"):
        drafter_table.bands(tables, kind="copy")


def test_repeated_runs_are_separate_round_robins_with_one_warm_up():
    from specnotes import models
    from specnotes.drafters import PromptLookup

    made = []

    def make():
        made.append(1)
        return PromptLookup()

    prompts = [{"kind": "copy", "text": "a bb a bb a bb ccc"}, {"kind": "story", "text": "ee ffffff a"}]
    tables = drafter_table.repeated(models.tiny_llama(seed=0, layers=1), _Words(), {"pl": make}, prompts,
                                    repeats=3, warmup=1, progress=False, max_new_tokens=5, k=2)
    assert len(tables) == 3 and len(made) == 1 + 3 * 2  # the warm-up before the first repeat only
    assert all({(r.drafter, r.kind) for r in rows} == {("pl", "copy"), ("pl", "story"), ("pl", "all")}
               for rows in tables)
    median, low, high = drafter_table.bands(tables)["pl"]
    assert 0 < low <= median <= high
