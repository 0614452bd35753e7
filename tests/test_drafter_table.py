"""The drafter table's arithmetic (specnotes.drafter_table) and the bench's free-form verdict, on made-up
runs."""

from __future__ import annotations

import pytest

from specnotes import drafter_table
from tests.notebook_utils import tool


def _run(drafter, kind, accepted, judged, seconds, plain_seconds=2.0, new_tokens=20, calls=10):
    return drafter_table.Run(drafter, kind, 0, new_tokens, seconds, plain_seconds, 0.1, calls, judged,
                             accepted,
                       judged, [judged], [accepted], True)


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


def test_free_form_rows_pool_story_and_qa_only():
    free = {r.drafter: r for r in drafter_table.free_form(RUNS)}
    assert {r.kind for r in free.values()} == {"free-form"}
    assert free["a"].alpha == pytest.approx(2 / 20)  # its copy run does not count
    assert free["b"].alpha == pytest.approx(11 / 20)
    assert free["b"].speedup == pytest.approx(4.0 / 3.3)


def test_the_bench_names_only_trained_drafters_with_both_alpha_and_speed():
    bench = tool("bench_drafters")
    names = ["prompt-lookup"] * 3 + ["eagle-lite"] * 3  # only the second is a trained drafter
    runs = [drafter_table.Run(**{**vars(r), "drafter": name}) for r, name in zip(RUNS, names, strict=True)]
    line = bench.best_line(drafter_table.free_form(runs))
    assert "α ≥ 0.5 and a speedup above 1 on free-form text: eagle-lite." in line
    slow = [drafter_table.Run(**{**vars(r), "seconds": r.seconds * 2}) for r in runs]
    assert "free-form text: none." in bench.best_line(drafter_table.free_form(slow))
