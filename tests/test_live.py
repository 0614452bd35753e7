"""Notebook 07's harness: the round-robin timer and its call counter, the cost-model prediction against
the closed-form formula, the report's schema on the real model, and the CUDA plan with the device mocked."""

import json

import numpy as np
import pytest
import torch

from specnotes import live, live_summary, models, references, theory, timing
from specnotes.timing import Output, Sample, first_difference

TINY = models.tiny_llama(seed=0, layers=2)


def test_the_cost_model_reduces_to_the_formula_when_a_verify_pass_costs_one_step():
    for alpha, k, c in [(0.8, 4, 0.05), (0.5, 1, 0.2), (0.95, 8, 0.0), (0.0, 3, 0.1)]:
        got = theory.predicted_speedup([alpha] * k, [k] * 50, np.ones(k + 2), draft_cost=k * c)
        assert got == pytest.approx(theory.speedup(alpha, k, c), rel=1e-12)


def test_the_cost_model_charges_wider_passes_and_the_prefill():
    # two rounds: one plain step (1 token, cost 1) and a 2-token draft with alpha 1 (3 tokens, cost 2)
    got = theory.predicted_speedup([1.0, 1.0], [0, 2], [0, 1, 1.5, 2.0])
    assert got == pytest.approx((1 + 3) / 2 / ((1 + 2) / 2))
    # with a prefill of 10 steps and 20 tokens: (10 + 20) / (10 + 20 * 0.75)
    assert theory.predicted_speedup([1.0, 1.0], [0, 2], [0, 1, 1.5, 2.0], prefill=10, n_tokens=20) == \
        pytest.approx(30 / 25)
    with pytest.raises(ValueError, match="widths up to 3"):
        theory.predicted_speedup([0.5, 0.5], [2], [0, 1, 1])
    with pytest.raises(ValueError, match="only 1 positions"):
        theory.predicted_speedup([0.5], [2], [0, 1, 1, 1])


def test_first_difference():
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2


def test_round_robin_interleaves_modes_counts_calls_and_drops_the_warm_up():
    def plain(ids, do_sample, seed):
        out = TINY.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=do_sample,
                            eos_token_id=None, pad_token_id=1)
        return Output(out[0, ids.shape[1]:].tolist())

    def one_pass(ids, do_sample, seed):
        TINY(ids)
        return Output([0])

    prompts = {"copy": [torch.tensor([[5, 6, 7]])], "free": [torch.tensor([[8, 9]])]}
    samples = timing.round_robin(TINY, {"plain": plain, "one": one_pass}, prompts, ("greedy",), repeats=2,
                                warmup=1, progress=False)
    assert [(s.mode, s.prompt_kind) for s in samples[:4]] == [
        ("plain", "copy"), ("one", "copy"), ("plain", "free"), ("one", "free")]
    assert len(samples) == 8  # 2 repeats x 2 prompts x 2 modes; the warm-up round is not recorded
    assert {s.target_calls for s in samples if s.mode == "plain"} == {6}  # prefill + 5 decode steps
    assert {s.target_calls for s in samples if s.mode == "one"} == {1}
    with pytest.raises(ValueError, match="sampling"):
        timing.round_robin(TINY, {"one": one_pass}, prompts, ("beam",), progress=False)


def fake(mode, kind, prompt, seconds, tokens, calls=4):
    return Sample(mode, kind, prompt, "greedy", seconds, calls, Output(tokens))


def test_summaries_compare_each_mode_with_plain_from_the_same_round_robin():
    costs = {"copy": [live_summary.Costs(0.1, 0.05, [0, 1, 1.2])]}
    samples = [  # two repeats of three modes, round-robin
        fake("plain", "copy", 0, 2.0, [1, 2, 3, 4]), fake("fast", "copy", 0, 1.0, [1, 2, 3, 4], 2),
        fake("wrong", "copy", 0, 3.0, [1, 2, 9, 4]),
        fake("plain", "copy", 0, 4.0, [1, 2, 3, 4]), fake("fast", "copy", 0, 1.0, [1, 2, 3, 4], 2),
        fake("wrong", "copy", 0, 3.0, [1, 2, 9, 4]),
    ]
    recs = {r.mode: r for r in live_summary.summarize(samples, costs)}
    assert recs["plain"].tokens_per_s == pytest.approx(4 / 3.0)  # median of 2 and 4
    assert recs["plain"].seconds_by_repeat == [2.0, 4.0] and recs["plain"].tokens_per_s_spread == (1.0, 2.0)
    assert recs["fast"].speedup == pytest.approx(3.0)
    assert recs["fast"].identical_to_plain and recs["fast"].tokens_per_call == 2
    assert recs["wrong"].identical_to_plain is False and recs["wrong"].first_difference == 2
    assert recs["fast"].prediction is None  # not an engine mode: nothing to predict from
    # repeat by repeat, fast ran 2x then 4x plain: a range of 2x, not resolved, though the median says 3x
    r = live_summary.ratio(recs["fast"], recs["plain"])
    assert (r.median, r.low, r.high, r.repeats, r.resolved) == (3.0, 2.0, 4.0, 2, False)
    assert str(r) == "not resolved at this size (repeats 2.00–4.00×)"


@pytest.mark.parametrize("each, resolved", [
    ([1.20, 1.25, 1.22], True), ([1.20, 1.40, 1.30], False),  # spread 20% of the median
    ([0.97, 1.05, 1.01], False),  # on both sides of 1: not even the sign is known
    ([0.80, 0.84, 0.82], True), ([1.5], False),  # one repeat has no spread to judge by
])
def test_a_ratio_is_resolved_only_when_its_repeats_agree_on_the_side_of_one_and_within_ten_percent(
        each, resolved):
    r = live_summary.Ratio(float(np.median(each)), min(each), max(each), len(each))
    assert r.resolved is resolved
    assert ("not resolved" in str(r)) is not resolved
    assert (f"{r.median:.2f}×" in str(r)) is resolved  # an unresolved ratio is not printed as a number


def test_ratio_pairs_the_repeats_of_two_records_of_the_same_prompts():
    recs = {r.mode: r for r in live_summary.summarize([fake("plain", "copy", 0, 2.0, [1, 2]),
                                               fake("fast", "copy", 0, 1.0, [1, 2])], COSTS)}
    assert live_summary.ratio(recs["fast"], recs["plain"]).median == pytest.approx(2.0)
    other = live_summary.Record(**{**vars(recs["plain"]), "sampling": "sample"})
    with pytest.raises(ValueError, match="same prompts"):
        live_summary.ratio(recs["fast"], other)


def test_the_report_has_every_mode_on_both_prompt_kinds_on_the_real_model(real):
    report = live.run(max_new_tokens=12, repeats=1, samplings=("greedy", "sample"), prompts_per_kind=1,
                         extra_modes=False, warmup=0, cost_repeats=1, progress=False)
    runs = report.runs
    assert all(isinstance(r, live_summary.Record) for r in runs)
    modes = {"plain", "hf-prompt-lookup", "hf-assistant", "engine-no-draft", "engine-prompt-lookup",
             "engine-draft-model"}
    assert {(r.mode, r.prompt_kind, r.sampling) for r in runs} == {
        (m, k, s) for m in modes for k in ("copy", "free") for s in ("greedy", "sample")}
    greedy = [r for r in runs if r.sampling == "greedy"]
    assert all(r.identical_to_plain for r in greedy)
    assert all(r.identical_to_plain is None for r in runs if r.sampling == "sample")
    predicted = {r.mode for r in runs if r.prediction is not None}
    assert predicted == {"engine-prompt-lookup", "engine-draft-model"}  # no-draft is the calibration
    assert all(np.isfinite(r.prediction.round_overhead_ms) for r in runs if r.mode in predicted)
    assert report.machine["threads"] >= 1 and report.machine["torch"]
    assert "| copy | greedy | engine-prompt-lookup |" in live.markdown(report)
    as_json = json.loads(json.dumps(report.as_dict()))  # bench/report.json and the references
    assert as_json["runs"][0]["mode"] == runs[0].mode and as_json["plan"]["target"] == report.plan.target
    assert "this machine" in references.side_by_side(report, [as_json])


def test_on_a_gpu_the_plan_is_the_seed_pair_in_bf16(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=False: True)
    gpu = live.plan(device="cuda", online=True)
    assert (gpu.target, gpu.draft, gpu.dtype) == (*live.HUB_PAIR, "bfloat16")
    offline_gpu = live.plan(device="cuda", online=False)
    assert (offline_gpu.target, offline_gpu.draft) == (models.DEFAULT, "distilled")
    assert offline_gpu.dtype == "bfloat16"
    cpu = live.plan(device="cpu")
    assert (cpu.target, cpu.draft, cpu.dtype) == (models.DEFAULT, "distilled", "float32")


def test_the_timer_synchronizes_the_device_it_is_given(monkeypatch):
    seen = []
    monkeypatch.setattr(timing, "sync", lambda device: seen.append(device))
    timing.round_robin(TINY, {"one": lambda ids, s, seed: Output([0])}, {"copy": [torch.tensor([[1, 2]])]},
                      ("greedy",), repeats=1, warmup=0, device="cuda", progress=False)
    assert seen == ["cuda", "cuda"]  # before and after the timed call


def test_references_are_fingerprinted_and_shown_side_by_side(tmp_path):
    rep = {"fingerprint": "cpu-x-2t-float32", "machine": {}, "runs": [
        {"mode": "plain", "prompt_kind": "copy", "sampling": "greedy", "speedup": 1.0, "tokens_per_s": 20.0}]}
    other = {"fingerprint": "cuda-h200-1t-bfloat16", "machine": {}, "runs": [
        {"mode": "plain", "prompt_kind": "copy", "sampling": "greedy", "speedup": 1.0,
         "tokens_per_s": 300.0}]}
    references.save_reference(other, tmp_path)
    refs = references.references(tmp_path)
    table = references.side_by_side(rep, refs)
    assert "reference cuda-h200-1t-bfloat16" in table and "300 tok/s" in table and "20 tok/s" in table
    machine = {"device": "cpu", "device_name": "x86_64", "threads": 2, "dtype": "float32"}
    assert references.fingerprint(machine) == "cpu-x86-64-2t-float32"


def reference(fp="cpu-x-2t-float32", tokens_per_s=20.0):
    return {"fingerprint": fp, "machine": {"device": "cpu"}, "runs": [
        {"mode": "plain", "prompt_kind": "copy", "sampling": "greedy", "speedup": 1.0,
         "tokens_per_s": tokens_per_s}]}


def test_save_reference_refuses_to_replace_a_committed_reference_unless_forced(tmp_path):
    path = references.save_reference(reference(tokens_per_s=20.0), tmp_path)
    with pytest.raises(FileExistsError, match=r"cpu-x-2t-float32\.json.*--force"):
        references.save_reference(reference(tokens_per_s=99.0), tmp_path)
    assert json.loads(path.read_text())["runs"][0]["tokens_per_s"] == 20.0  # the record is untouched
    assert references.save_reference(reference(tokens_per_s=99.0), tmp_path, force=True) == path
    assert json.loads(path.read_text())["runs"][0]["tokens_per_s"] == 99.0


class _DiskFull:
    """A file whose write stores the first half of the data, then fails as a full disk does."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def write(self, data):
        self.f.write(data[: len(data) // 2])
        self.f.flush()
        raise OSError(28, "No space left on device")

    def __getattr__(self, name):
        return getattr(self.f, name)


def disk_full_under(folder, monkeypatch):
    """Every file opened for writing under `folder` fails half-way through its write."""
    import builtins
    import io

    real = io.open

    def fake_open(file, mode="r", *args, **kwargs):
        f = real(file, mode, *args, **kwargs)
        return _DiskFull(f) if ("w" in mode and str(folder) in str(file)) else f

    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(builtins, "open", fake_open)


def test_a_reference_write_that_fails_half_way_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = references.save_reference(reference(tokens_per_s=20.0), tmp_path)
    before = path.read_text()
    disk_full_under(tmp_path, monkeypatch)
    with pytest.raises(OSError, match="No space"):
        references.save_reference(reference(tokens_per_s=99.0), tmp_path, force=True)
    monkeypatch.undo()
    assert path.read_text() == before  # notebook 07 still reads the old reference
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # and no temporary file is left behind


def test_unreadable_references_are_skipped_with_a_warning_naming_the_file(tmp_path):
    good = references.save_reference(reference("cuda-h200-1t-bfloat16", 300.0), tmp_path)
    text = good.read_text()
    (tmp_path / "a-truncated.json").write_text(text[: len(text) // 2])  # a write cut short
    (tmp_path / "b-list.json").write_text("[1, 2]")
    (tmp_path / "c-no-runs.json").write_text(json.dumps({"fingerprint": "c", "machine": {}}))
    bad_run = reference("d")
    del bad_run["runs"][0]["speedup"]
    (tmp_path / "d-no-speedup.json").write_text(json.dumps(bad_run))
    (tmp_path / "e-not-utf8.json").write_bytes(b"\xff\xfe\x00")
    with pytest.warns(UserWarning) as caught:
        refs = references.references(tmp_path)
    assert [r["fingerprint"] for r in refs] == ["cuda-h200-1t-bfloat16"]
    said = [str(w.message) for w in caught]
    for name, why in [("a-truncated.json", "JSON"), ("b-list.json", "list"), ("c-no-runs.json", "runs"),
                      ("d-no-speedup.json", "speedup"), ("e-not-utf8.json", "")]:
        assert any(name in m and why in m for m in said), (name, said)
    assert "300 tok/s" in references.side_by_side(reference(), refs)  # notebook 07's cell goes on


def test_every_report_writer_writes_atomically():
    """A half-written report or reference (a full disk, a killed run) must not replace a whole one: every
    writer of bench/ reports and reference runs goes through paths.write_atomic."""
    import re

    from tests.notebook_utils import ROOT

    for rel in ("specnotes/references.py", "tools/bench_live.py", "tools/bench_toy.py",
                "tools/bench_drafters.py", "tools/gpu_smoke.py"):
        source = (ROOT / rel).read_text()
        assert not re.search(r"\.write_(text|bytes)\(|json\.dump\(|open\([^)]*[\"']w", source), rel
        assert "write_atomic(" in source, rel


def record(mode="plain", new_tokens=20, seconds_by_repeat=(1.0,)):
    """A live_summary.Record of one copy prompt, greedy, identical to plain, nothing predicted."""
    seconds = float(np.median(seconds_by_repeat))
    rate = new_tokens / seconds
    return live_summary.Record(mode, "copy", "greedy", 1, new_tokens, seconds, list(seconds_by_repeat), rate,
                       (rate, rate), rate, new_tokens, 1.0, 1.0, True, None, None)


def fake_report(fp, runs=None):
    machine = {"device": "cpu", "device_name": "x", "dtype": "float32", "threads": 2, "torch": "t",
               "transformers": "t"}
    return live.Report(machine, fp, live.Plan("cpu", "float32", "t", "d", "test"),
                       {"max_new_tokens": 4, "repeats": 1}, {}, runs or [record()])


def test_bench_live_refuses_to_replace_a_reference_before_it_times_anything(tmp_path, monkeypatch, capsys):
    from tests.notebook_utils import tool

    bench_live = tool("bench_live")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(references, "REFERENCES", tmp_path / "refs")
    p = live.plan(device="cpu")
    fp = references.plan_fingerprint(p)
    monkeypatch.setattr(live, "plan", lambda *a, **k: p)
    committed = references.save_reference(fake_report(fp))
    assert committed.parent == tmp_path / "refs"

    def never(*args, **kwargs):
        raise AssertionError("the suite ran before the overwrite was refused")

    monkeypatch.setattr(live, "run", never)
    with pytest.raises(SystemExit):
        bench_live.main(["--save-reference"])
    said = capsys.readouterr().err
    assert committed.name in said and "--force" in said
    new = fake_report(fp, [record(new_tokens=99)])
    monkeypatch.setattr(live, "run", lambda *a, **k: new)
    assert bench_live.main(["--save-reference", "--force"]) == 0
    assert json.loads(committed.read_text())["runs"][0]["tokens_per_s"] == 99.0
    assert json.loads((tmp_path / "bench" / "report.json").read_text()) == json.loads(
        json.dumps(new.as_dict()))


@pytest.mark.parametrize("engine, said", [
    ((1.0, 1.02, 0.98), "= 1.22× (repeats 1.20–1.25×), identical tokens: True"),
    ((1.0, 1.1, 0.9), "= not resolved at this size (repeats 1.11–1.36×), identical tokens: True"),
])
def test_bench_live_prints_an_engine_over_transformers_ratio_only_where_its_repeats_resolve_it(engine, said):
    from tests.notebook_utils import tool

    hf = (1.22, 1.224, 1.225)  # seconds by repeat: each engine repeat is timed against its hf repeat
    runs = [record("hf-prompt-lookup", 50, hf), record("engine-prompt-lookup", 50, engine)]
    lines = tool("bench_live").engine_vs_hf(fake_report("cpu-x-2t-float32", runs))
    assert lines == [f"- copy, greedy: engine prompt lookup / transformers prompt lookup {said}"]


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("kwargs, name", [
    *[(dict(max_new_tokens=v), "max_new_tokens") for v in (0, -1, 2.5, True, NAN, "64")],
    *[(dict(repeats=v), "repeats") for v in (0, 1.5, True, INF)],
    *[(dict(k=v), "k") for v in (0, -3, 2.5, False)],
    *[(dict(prompts_per_kind=v), "prompts_per_kind") for v in (0, -1, 1.5, True)],
    *[(dict(warmup=v), "warmup") for v in (-1, 0.5, True)],
    *[(dict(cost_repeats=v), "cost_repeats") for v in (0, NAN, True)],
    (dict(samplings="greedy"), "samplings"), (dict(samplings=()), "samplings"),
    (dict(samplings=("beam",)), "sampling"), (dict(p="cpu"), "p"),
])
def test_the_suite_refuses_bad_settings_before_it_loads_a_model(monkeypatch, kwargs, name):
    def never(p):
        raise AssertionError("models loaded before the settings were checked")

    monkeypatch.setattr(live, "load", never)
    with pytest.raises((ValueError, TypeError), match=name):
        live.run(progress=False, **kwargs)


@pytest.mark.parametrize("kwargs, name", [(dict(k=0), "k"), (dict(k=2.5), "k"), (dict(k=True), "k"),
                                          (dict(max_new_tokens=0), "max_new_tokens"),
                                          (dict(max_new_tokens=NAN), "max_new_tokens")])
def test_modes_refuse_bad_settings_when_built_not_when_first_timed(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        live.modes(TINY, TINY, extra=False, **kwargs)


IDS = torch.tensor([[5, 6, 7, 8]])


@pytest.mark.parametrize("kwargs, name", [
    *[(dict(max_width=v), "max_width") for v in (0, -1, 2.5, True, INF)],
    *[(dict(context_extra=v), "context_extra") for v in (-1, 1.5, NAN)],
    *[(dict(repeats=v), "repeats") for v in (0, -1, 1.5, True)],
    *[(dict(ids=v), "ids") for v in (torch.tensor([5, 6]), torch.zeros(1, 0, dtype=torch.long),
                                     torch.tensor([[5, 999]]), torch.tensor([[5.0, 6.0]]), [[5, 6]])],
])
def test_measure_costs_names_the_bad_argument(kwargs, name):
    args = {"ids": IDS, "max_width": 2, "context_extra": 2, "repeats": 1, **kwargs}
    with pytest.raises((ValueError, TypeError), match=name):
        live.measure_costs(TINY, **args)


def test_measure_costs_can_measure_at_the_prompts_own_context():
    costs = live.measure_costs(TINY, IDS, 3, context_extra=0, repeats=1)
    assert len(costs.verify) == 4 and costs.verify[1] == 1.0 and costs.step_s > 0


def test_verdicts_price_each_row_at_its_own_draft_width_on_a_curve_measured_wide_enough():
    from dataclasses import replace

    from specnotes import drafter_table

    row = drafter_table.Row("d", "free-form", 0.5, [0.5], 1.5, 1.0, 0.1, 0.05, 1.1, True, rounds=10,
                            drafted=10)
    long = replace(row, drafter="long", drafted=40)  # 4 drafts a round: verified at width 5
    found = live.verdicts(TINY, IDS, [row, long], goal=1.4, repeats=1)
    assert [v.drafter for v in found] == ["d", "long"] and [round(v.mean_draft) for v in found] == [1, 4]
    assert all(v.verify > 0 and v.limit in ("reaches it", "α", "cost", "the rest") for v in found)
    assert live.verdicts(TINY, IDS, [], goal=1.4) == []


COSTS = {"copy": [live_summary.Costs(0.1, 0.05, [0, 1, 1.2])]}
GOOD = [fake("plain", "copy", 0, 2.0, [1, 2]), fake("fast", "copy", 0, 1.0, [1, 2])]


@pytest.mark.parametrize("samples, costs, error, match", [
    ([], COSTS, ValueError, "samples"),
    ([fake("fast", "copy", 0, 1.0, [1, 2])], COSTS, ValueError, "plain"),
    ([fake("plain", "copy", 0, 2.0, [1]), *(fake("fast", "copy", i, 1.0, [1]) for i in (0, 1))],
     {"copy": COSTS["copy"] * 2}, ValueError, "plain"),  # plain timed on fewer prompts
    *[([fake("plain", "copy", 0, v, [1, 2])], COSTS, ValueError, "seconds") for v in (0.0, -1.0, NAN, INF)],
    ([fake("plain", "copy", 0, 1.0, [])], COSTS, ValueError, "no tokens"),
    ([1, 2], COSTS, TypeError, "samples"),
    (GOOD, {}, ValueError, "costs"),
    (GOOD + [fake("plain", "copy", 1, 2.0, [1]), fake("fast", "copy", 1, 1.0, [1])], COSTS, ValueError,
     "costs"),
    (GOOD, {"copy": [(0.1, 0.05, [0, 1])]}, TypeError, "costs"),
    ([fake("plain", "copy", i, 2.0, [1, 2]) for i in (0, 1, 0)], {"copy": COSTS["copy"] * 2}, ValueError,
     "repeat"),
    ([fake("plain", "copy", 1, 2.0, [1, 2])], {"copy": COSTS["copy"] * 2}, ValueError, "prompt"),
])
def test_summarize_names_what_is_wrong_with_its_samples(samples, costs, error, match):
    with pytest.raises(error, match=match):
        live_summary.summarize(samples, costs)


def test_summarize_takes_any_iterable_of_samples():
    assert live_summary.summarize(iter(GOOD), COSTS) == live_summary.summarize(GOOD, COSTS)


MACHINE = {"device": "cpu", "device_name": "x", "threads": 2, "dtype": "float32"}


def test_fingerprints_are_file_name_safe_and_refuse_a_machine_without_its_facts():
    assert references.fingerprint({**MACHINE, "device": "../../etc", "dtype": "a/b"}) == "etc-x-2t-a-b"
    with pytest.raises(ValueError, match="device.*threads.*dtype"):
        references.fingerprint({})
    with pytest.raises(TypeError, match="machine"):
        references.fingerprint(None)
    with pytest.raises((ValueError, TypeError), match="threads"):
        references.fingerprint({**MACHINE, "threads": "lots"})
    # the committed one
    assert references.fingerprint({**MACHINE, "device_name": "cpu"}) == "cpu-cpu-2t-float32"


def test_save_reference_writes_nowhere_but_its_folder(tmp_path):
    with pytest.raises(ValueError, match="fingerprint"):
        references.save_reference(reference("../escaped"), tmp_path / "refs")
    with pytest.raises(ValueError, match="fingerprint"):
        references.save_reference({"runs": []}, tmp_path / "refs")
    assert list(tmp_path.rglob("*")) == []


def test_side_by_side_names_what_is_wrong_with_its_arguments():
    rep = reference()
    with pytest.raises(TypeError, match="refs"):
        references.side_by_side(rep, rep)  # one reference, not a list of them
    with pytest.raises(ValueError, match="sampling"):
        references.side_by_side(rep, [rep], sampling="beam")
    with pytest.raises(ValueError, match=r"refs\[0\].*runs"):
        references.side_by_side(rep, [{"fingerprint": "y", "machine": {}}])
    with pytest.raises(ValueError, match="report.*speedup"):
        references.side_by_side({**rep, "runs": [{**rep["runs"][0], "speedup": None}]}, [])


def test_plan_names_a_bad_device_or_online_flag(monkeypatch):
    with pytest.raises(ValueError, match="device"):
        live.plan(device="tpu")
    with pytest.raises(TypeError, match="device"):
        live.plan(device=5)
    with pytest.raises(TypeError, match="online"):
        live.plan(device="cpu", online="no")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=False: True)
    assert live.plan(device="cuda:0", online=True).target == live.HUB_PAIR[0]  # an indexed GPU too


def _calibration(seconds, tokens=(4, 6)):
    """engine-no-draft's reduced timing over prompts that generated `tokens`, taking `seconds` in all."""
    prompts = list(range(len(tokens)))
    return live_summary.Timed(prompts, {}, sum(tokens), seconds, np.array([seconds]), sum(tokens), 0.0, None)


COST = [live_summary.Costs(prefill_s=0.05, step_s=0.02, verify=[0.0, 1.0]),
        live_summary.Costs(prefill_s=0.07, step_s=0.04, verify=[0.0, 1.0])]


@pytest.mark.parametrize("seconds, overhead", [
    # 2 prompt passes (0.12 s) and 10 - 2 decode steps at the mean step 0.03 s (0.24 s): 0.36 s of passes
    (0.46, (0.46 - 0.36) / 10),  # 0.1 s more than the passes, over 10 rounds: +10 ms a round
    (0.30, (0.30 - 0.36) / 10)])  # faster than the cost model says: -6 ms a round, kept, not clamped to 0
def test_the_round_overhead_is_the_raw_estimate_negative_when_the_cost_model_over_predicts(seconds, overhead):
    got = live_summary.round_overhead(_calibration(seconds), COST)
    assert got == pytest.approx(overhead)
    assert (got < 0) == (seconds < 0.36)


def test_the_markdown_shows_a_negative_overhead_with_a_note():
    pred = live_summary.Prediction(1.2, 24.0, 1.1, 0.5, [0.5], 2.0, 0.1, 1.2, round_overhead_ms=-6.0)
    report = fake_report("cpu-x-2t-float32", [record(), live_summary.Record(
        **{**vars(record("engine-prompt-lookup")), "prediction": pred})])
    text = live.markdown(report)
    assert "-6.0" in text and "over-predicts" in text
