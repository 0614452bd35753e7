"""The batched flip sweep (specnotes.batch_sweep): its reductions on made-up points (ratios within a repeat,
the band, the crossover read off the medians), a real run on a tiny model, the whole-batch rollback
comparison, and the plain baseline beside transformers' batched generate."""

import copy

import matplotlib
import pytest

from specnotes import batch_sweep, models, viz_serving
from specnotes.batch_sweep import BatchSweep, Point
from specnotes.drafters import DraftModel, PromptLookup
from tests.conftest import noisy

matplotlib.use("Agg")


def made_up(rates: dict) -> BatchSweep:
    """rates[(mode, batch)] = tokens/s per repeat, on one mix; 100 tokens per run."""
    points = []
    for (mode, batch), per_repeat in rates.items():
        for r, rate in enumerate(per_repeat):
            points.append(Point("mix", mode, batch, r, 100 / rate, 100, 10, 5, 10, 20, 5, batch))
    return BatchSweep(points, 100)


def test_ratios_are_taken_within_a_repeat_and_the_crossover_from_the_medians():
    sweep = made_up({("plain", 1): [10, 20, 10], ("spec", 1): [20, 30, 30],
                     ("plain", 4): [40, 40, 40], ("spec", 4): [50, 30, 36],
                     ("plain", 8): [80, 80, 80], ("spec", 8): [40, 40, 120]})
    assert list(sweep.ratios("mix", "spec", 1)) == [2.0, 1.5, 3.0]  # each repeat against its own plain
    median, low, high = sweep.band("mix", "spec")
    assert list(median) == [2.0, 0.9, 0.5]
    assert list(low) == [1.5, 0.75, 0.5] and list(high) == [3.0, 1.25, 1.5]
    assert sweep.crossover("mix", "spec") == 4
    assert "below plain from B = 4 on" in sweep.markdown() and sweep.above("mix", "spec") == [1]
    never = made_up({("plain", 1): [10], ("spec", 1): [20], ("plain", 2): [10], ("spec", 2): [11]})
    assert never.crossover("mix", "spec") is None
    assert "not below plain at B = 2" in never.markdown()
    # a dip below 1 that recovers is not the flip: the crossover is where it stays below
    dip = made_up({("plain", 1): [10], ("spec", 1): [9], ("plain", 2): [10], ("spec", 2): [12],
                   ("plain", 4): [10], ("spec", 4): [8]})
    assert dip.crossover("mix", "spec") == 4 and dip.above("mix", "spec") == [2]
    with pytest.raises(ValueError, match="mode must be one of"):
        sweep.ratios("mix", "plain", 1)


def test_every_batch_size_serves_the_whole_mix():
    mix = ["a", "b", "c", "d", "e"]
    assert batch_sweep.chunked(mix, 2) == [["a", "b"], ["c", "d"], ["e"]]
    assert batch_sweep.chunked(mix, 2, offset=1) == [["b", "c"], ["d", "e"], ["a"]]
    assert batch_sweep.chunked(mix, 7) == [["a", "b", "c", "d", "e", "a", "b"]]


@pytest.fixture(scope="module")
def pair():
    target = models.tiny_llama(seed=0, layers=4).double()
    return target, noisy(copy.deepcopy(target), seed=1, scale=0.02)


def test_a_real_sweep_times_every_mode_and_keeps_plains_tokens(pair):
    target, draft = pair
    prompts = {"repeating": [[5, 9, 2, 77, 5, 9, 2], [4, 4, 8, 4, 4]], "other": [[1, 2, 3], [9, 8, 7, 6]]}
    sweep = batch_sweep.sweep(target, prompts, {"lookup": PromptLookup, "draft": lambda: DraftModel(draft)},
                              batches=(1, 3), max_new_tokens=6, repeats=2, k=3, progress=False)
    assert len(sweep.points) == 2 * 2 * 2 * 3 and sweep.modes() == ["lookup", "draft"]
    def served(p):
        return batch_sweep.chunked(prompts[p.mix], p.batch, p.repeat)

    assert all(p.tokens == 6 * sum(map(len, served(p))) and p.same_as_plain == sum(map(len, served(p)))
               for p in sweep.points)
    assert all(p.passes == 6 * len(served(p)) for p in sweep.points if p.mode == "plain")
    assert sweep.alpha("repeating", "draft") > 0 and 0 < sweep.draft_length("repeating", "draft") <= 3
    assert len(sweep.ratios("other", "draft", 3)) == 2
    assert viz_serving.plot_batch_flip(sweep, {("other", "draft"): 2}).axes
    with pytest.raises(ValueError, match="at least one drafter"):
        batch_sweep.sweep(target, prompts, {}, batches=(1,), progress=False)


def test_the_whole_batch_rollback_is_measured_as_lossless_and_wasteful(pair):
    target, draft = pair
    rows = batch_sweep.rows([[5, 9, 2, 77, 5, 9, 2], [4, 4, 8, 4, 4], [1, 2, 3]], 5)
    assert rows[3] == rows[0]  # the prompts cycle
    waste = batch_sweep.rollback_waste(target, rows, lambda: DraftModel(draft), max_new_tokens=12, k=4)
    assert waste.identical and waste.dropped > 0 and 0 < waste.dropped_fraction <= 1
    assert waste.shortest_passes >= waste.own_passes


def test_plain_batch_beside_transformers_batched_generate(pair):
    target, _ = pair
    versus = batch_sweep.versus_transformers(target, [[5, 9, 2], [4, 4, 8, 4, 4, 1, 1]], batch=3,
                                             max_new_tokens=5, repeats=2)
    assert versus["identical"] == 3 and len(versus["ours_s"]) == len(versus["theirs_s"]) == 2
    assert versus["ratio"] > 0
