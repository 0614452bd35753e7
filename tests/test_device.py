"""The device and dtype rule, checked on a CPU: what a GPU run would trip over, caught here.

- Construction on the `meta` device: every drafter built around a target (the committed trained ones
  included, on the real model) owns only parameters on the target's device, in its dtype.
- Whole runs on a second device (tests/virtual_device.py: it reports `meta` but keeps real data, and
  refuses what CUDA refuses): ids left on the CPU, modules built on the CPU and implicit host copies
  (`.numpy()` on a device tensor) all raise there. Every notebook's code path runs on it: plain decoding,
  the engine with every chain drafter, the tree drafters, the drafter table, the timing suite, the
  batch grid, the numerics diagnostic and each drafter's quick training. In fp32 the outputs equal the
  CPU's token for token, sampled runs included (same seed, same draws).
- The same paths in float16 and bfloat16 on the CPU. Greedy identity is asserted in fp32 only; in 16 bits
  the first divergence from plain greedy is reported as notebook 08 does, and must fall on a near-tie.
- A planted device bug (the verify pass's ids left on the CPU) fails the checks.
"""

from __future__ import annotations

import contextlib
import json
import re

import pytest
import torch

from specnotes import (
    distill,
    drafter_table,
    engine,
    env,
    live,
    models,
    numerics,
    passes,
    placement,
    serving,
    verify,
)
from specnotes.decode import plain_generate, prompt_ids
from specnotes.drafters import (
    DraftModel,
    Eagle3Lite,
    EagleLite,
    EarlyExit,
    Lookahead,
    Medusa,
    ParallelLite,
    PromptLookup,
    Suffix,
)
from specnotes.surgery import student
from specnotes.training import eagle3, parallel
from specnotes.training.eagle import new_model
from specnotes.training.early_exit import exit_model
from specnotes.training.medusa import new_heads
from tests.notebook_utils import ROOT, cells, source
from tests.virtual_device import VIRTUAL, is_virtual, virtual_device

N = 16  # new tokens per run
HALF = (torch.float16, torch.bfloat16)


@pytest.fixture(scope="module")
def tokenizer(real):
    return real[1]


def wide_pair(dtype=torch.float32):
    """A tiny random target (4 layers) and draft (1 layer) with the real tokenizer's vocabulary, so real
    prompts and the self-distillation windows fit them."""
    vocab = 49152
    target = models.tiny_llama(0, vocab, 64, 4).to(dtype)
    draft = models.tiny_llama(1, vocab, 32, 1).to(dtype)
    return target, draft


def _noise(param, std: float, seed: int) -> None:
    """Set a parameter to seeded noise, drawn on the CPU and copied to its device (a CPU generator may
    not draw into a device tensor)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        param.copy_(torch.randn(param.shape, generator=gen) * std)


def chain_drafters(target, draft):
    with torch.random.fork_rng(devices=[]):  # the adapter's init draws: the same on every device
        torch.manual_seed(0)
        adapter = exit_model(target, 2, rank=8)
    _noise(adapter.model.norm.up.weight, 0.5, 0)  # an adapter that is not the identity, as after training
    return {
        "prompt-lookup": PromptLookup,
        "suffix": Suffix,
        "lookahead": Lookahead,
        "early-exit": lambda: EarlyExit(target, 2),
        "early-exit+adapter": lambda: EarlyExit(target, 2, adapter=adapter),
        "draft-model": lambda: DraftModel(draft),
        "distilled-style student": lambda: DraftModel(student(target, (0, 3))),
    }


def tree_drafters(target):
    heads = new_heads(target, 2)
    for i, p in enumerate(heads.parameters()):  # not the LM head's own guess any more, as after training
        _noise(p, 0.05, i)
    eagle, fused, block = new_model(target), eagle3.new_model(target), parallel.new_model(target)
    return {
        "medusa": lambda: Medusa(target, heads=heads, widths=(2, 1), n_heads=2),
        "eagle-lite": lambda: EagleLite(target, model=eagle, k=2, vocab=None),
        "eagle3-lite": lambda: Eagle3Lite(target, model=fused, k=2, vocab=None),
        "parallel-lite": lambda: ParallelLite(target, model=block, vocab=None),
    }


TEXT = "Copy this exactly: the quick brown fox jumps over the lazy dog, and the lazy dog sleeps."


def every_path(target, draft, tokenizer) -> dict:
    """Run every decoding path of the notebooks once; returns name -> new tokens. The ids are made on the
    CPU on purpose: the package must move them to the model."""
    ids = prompt_ids(tokenizer, TEXT)
    out = {"plain": plain_generate(target, ids, N).tokens,
           "plain sampled": plain_generate(target, ids, N, do_sample=True, seed=3).tokens}
    for name, make in {**chain_drafters(target, draft), **tree_drafters(target)}.items():
        out[name] = engine.generate(target, make(), ids, N, k=3, eos_token_id=-1).tokens
        out[f"{name} sampled"] = engine.generate(target, make(), ids, N, k=3, do_sample=True, seed=3,
                                                 eos_token_id=-1).tokens
    return out


@pytest.fixture(scope="module")
def cpu_fp32(tokenizer):
    return every_path(*wide_pair(), tokenizer)


def test_fp32_greedy_paths_equal_plain_greedy_on_the_cpu(cpu_fp32):
    greedy = {k: v for k, v in cpu_fp32.items() if "sampled" not in k}
    assert all(v == cpu_fp32["plain"] for v in greedy.values()), greedy


# --------------------------------------------------------------------------- construction on meta


def _owned(drafter):
    """The parameters and buffers a drafter owns, whatever its kind."""
    mods = [getattr(drafter, "heads", None), getattr(drafter, "model", None)]
    tensors = [t for m in mods if m is not None for t in (*m.parameters(), *m.buffers())]
    subset = getattr(drafter, "subset", None)
    return tensors + (list(subset) if subset is not None else [])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_drafter_built_around_a_meta_target_lives_on_meta(dtype):
    target, draft = (m.to("meta") for m in wide_pair(dtype))
    built = {**{k: f() for k, f in chain_drafters(target, draft).items()},
             **{k: f() for k, f in tree_drafters(target).items()}}
    for name, drafter in built.items():
        owned = _owned(drafter)
        if name in ("prompt-lookup", "suffix", "lookahead"):
            assert not owned  # model-free
            continue
        assert owned, name
        assert {t.device.type for t in owned} == {"meta"}, name
        assert {t.dtype for t in owned if t.is_floating_point()} == {dtype}, name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_trained_drafters_follow_the_real_target_to_its_device_and_dtype(real, dtype):
    """The committed weights load into drafters around the real 135M model on meta (no data moves)."""
    import copy

    from specnotes.training.distilled import load_distilled_draft

    target = copy.deepcopy(real[0]).to("meta", dtype)
    built = {"medusa": Medusa(target), "eagle-lite": EagleLite(target), "eagle3-lite": Eagle3Lite(target),
             "parallel-lite": ParallelLite(target),
             "early-exit+adapter": EarlyExit(target, adapter="trained"),
             "distilled-draft": DraftModel(load_distilled_draft(target))}
    for name, drafter in built.items():
        owned = _owned(drafter)
        assert {t.device.type for t in owned} == {"meta"}, name
        assert {t.dtype for t in owned if t.is_floating_point()} == {dtype}, name
    assert {p.dtype for p in target.parameters()} == {dtype}  # building drafters left the target alone


# --------------------------------------------------------------------------- the virtual device


def test_the_virtual_device_refuses_what_cuda_refuses():
    with virtual_device():
        x = torch.ones(3).to(VIRTUAL)
        assert is_virtual(x) and x.device == VIRTUAL
        with pytest.raises(RuntimeError, match="same device"):
            x + torch.ones(3)
        with pytest.raises(TypeError, match="numpy"):
            x.numpy()
        assert (x * 2).tolist() == [2.0, 2.0, 2.0] and float(x.sum()) == 3.0  # host reads sync, as on CUDA
        assert not is_virtual(x.cpu()) and x.cpu().numpy().sum() == 3.0
        assert is_virtual(torch.arange(3, device=x.device)) and is_virtual(x + torch.tensor(1.0))
        with pytest.raises(RuntimeError, match="generator"):
            torch.rand(3, device=x.device, generator=torch.Generator().manual_seed(0))  # a CPU generator
        g = torch.Generator(device=x.device)
        assert g.device == VIRTUAL and is_virtual(torch.rand(3, device=g.device, generator=g))


@pytest.fixture(scope="module")
def virtual_fp32(tokenizer):
    target, draft = wide_pair()
    with virtual_device():
        target, draft = target.to(VIRTUAL), draft.to(VIRTUAL)
        return every_path(target, draft, tokenizer)


@pytest.fixture(scope="module")
def cpu_emulated(tokenizer):
    """The CPU run with the virtual device's attention math (the one kernel it replaces), so the second
    device's output can be compared token for token, sampled runs included."""
    with virtual_device():
        return every_path(*wide_pair(), tokenizer)


def test_every_path_runs_on_a_second_device_and_matches_the_cpu_token_for_token(virtual_fp32, cpu_emulated):
    """Sampled runs too: the device's generator draws what the CPU's does for the same seed."""
    assert virtual_fp32 == cpu_emulated


def test_ids_left_on_the_cpu_are_caught_a_planted_bug(tokenizer, monkeypatch):
    """Plant the bug the device rule exists for: the verify pass builds its ids on the CPU."""
    def planted_verify_pass(target, cache, tokens, tree=None, n_uncached=0, hidden=False):
        ids = torch.tensor([tokens])  # no device=: the planted bug
        logits, cache = passes.forward_pass(target, ids, cache, keep=len(tokens) - n_uncached)
        return logits[0], None, cache

    target, _ = wide_pair()
    ids = prompt_ids(tokenizer, TEXT)
    with virtual_device():
        target = target.to(VIRTUAL)
        assert engine.generate(target, PromptLookup(), ids, 8).tokens  # the real one runs
        monkeypatch.setattr(verify, "verify_pass", planted_verify_pass)
        with pytest.raises(RuntimeError, match="same device"):
            engine.generate(target, PromptLookup(), ids, 8)


def test_a_module_built_on_the_cpu_is_caught(tokenizer, monkeypatch):
    """Plant the other kind: Medusa heads cast to the target's dtype but left on the CPU."""
    from specnotes.training import medusa

    target, _ = wide_pair()
    ids = prompt_ids(tokenizer, TEXT)
    with virtual_device():
        target = target.to(VIRTUAL)
        assert engine.generate(target, Medusa(target, heads=new_heads(target, 2), widths=(1,), n_heads=2),
                               ids, 8).tokens
        monkeypatch.setattr(medusa, "new_heads",
                            lambda t, n=3: medusa.MedusaHeads(t, n).to(placement.dtype_of(t)))
        with pytest.raises(RuntimeError, match="same device"):
            engine.generate(target, Medusa(target, heads=medusa.new_heads(target, 2), widths=(1,), n_heads=2),
                            ids, 8)


def test_an_implicit_host_copy_is_caught(tokenizer, monkeypatch):
    """And the third: a teacher pass that calls .numpy() on the device's output without .cpu()."""
    windows = distill.self_windows(limit=2)
    target, _ = wide_pair()
    with virtual_device():
        target = target.to(VIRTUAL)
        ids, probs = distill.teacher_topk(target, windows.inputs, 4, progress=False)
        assert ids.shape == (*windows.inputs.shape, 4)
        monkeypatch.setattr(distill, "host", lambda t: t.detach())  # planted: no copy to the host
        with pytest.raises(TypeError, match="numpy"):
            distill.teacher_topk(target, windows.inputs, 4, progress=False)


# --------------------------------------------------------------------------- 16-bit on the CPU


@pytest.fixture(scope="module", params=HALF, ids=env.dtype_name)
def half_run(request, tokenizer):
    return request.param, every_path(*wide_pair(request.param), tokenizer)


def test_every_path_runs_in_16_bits_on_the_cpu(half_run, cpu_fp32):
    dtype, out = half_run
    assert set(out) == set(cpu_fp32)  # every path ran to the end
    assert all(len(v) == N and all(0 <= t < 49152 for t in v) for v in out.values()), env.dtype_name(dtype)


@pytest.mark.parametrize("dtype", HALF, ids=env.dtype_name)
@pytest.mark.parametrize("drafter", ["draft-model", "early-exit+adapter", "prompt-lookup"])
def test_16_bit_greedy_may_leave_plain_greedy_only_at_a_near_tie(dtype, drafter, tokenizer, record_property):
    """Notebook 08's report: where speculative greedy first differs from plain greedy in 16 bits, and the
    logit margin there. A verify pass rounds differently from one-token passes, so a flip is allowed
    where the top two logits are within the dtype's rounding of each other, and nowhere else: a real
    bug (a wrong rollback, a stale cache) diverges at a clear winner."""
    from specnotes.passes import forward_pass

    target, draft = wide_pair(dtype)
    ids = prompt_ids(tokenizer, TEXT)
    d = numerics.first_divergence(target, ids, chain_drafters(target, draft)[drafter](), max_new_tokens=N,
                                  k=3, name=drafter)
    record_property("first_divergence", {"dtype": d.dtype, "position": d.position, "margin": d.margin_there})
    print(f"{d.dtype} {drafter}: first divergence at {d.position}, margin there {d.margin_there}")
    if d.position is None:
        return
    with torch.inference_mode():
        full = torch.tensor([[*ids[0].tolist(), *d.plain]])
        logits, _ = forward_pass(target, full, keep=len(d.plain) + 1)
    scale = float(logits[0, d.position].abs().max())
    # the two paths sum the same few dozen products per layer in another order: a few units in the last
    # place of the largest logit apart; 16 of them is the tie band
    assert d.margin_there <= 16 * torch.finfo(dtype).eps * scale, (d.margin_there, scale)


# --------------------------------------------------------------------------- the rest of the notebooks


def test_the_drafter_table_runs_on_a_second_device(tokenizer):
    target, draft = wide_pair()
    prompts = [{"kind": "copy", "text": TEXT}]
    makers = {**chain_drafters(target, draft), **tree_drafters(target)}
    reference = drafter_table.run(target, tokenizer, makers, prompts, max_new_tokens=12, k=3, progress=False)
    with virtual_device():
        target, draft = target.to(VIRTUAL), draft.to(VIRTUAL)
        makers = {**chain_drafters(target, draft), **tree_drafters(target)}
        runs = drafter_table.run(target, tokenizer, makers, prompts, max_new_tokens=12, k=3, progress=False)
    assert [(r.drafter, r.acceptance.accepted, r.identical) for r in runs] == \
        [(r.drafter, r.acceptance.accepted, r.identical) for r in reference]
    assert all(r.identical for r in runs)


@pytest.mark.parametrize("where", ["virtual", *HALF], ids=str)
def test_the_timing_suite_runs_on_a_second_device_and_in_16_bits(where, tokenizer):
    dtype = where if where in HALF else torch.float32
    target, draft = wide_pair(dtype)
    ctx = virtual_device() if where == "virtual" else contextlib.nullcontext()
    with ctx:
        if where == "virtual":
            target, draft = target.to(VIRTUAL), draft.to(VIRTUAL)
        plan = live.Plan(placement.device_of(target).type, env.dtype_name(dtype), "tiny", "tiny", "test")
        report = live.run(plan, max_new_tokens=8, repeats=1, prompts_per_kind=1, extra_modes=False,
                             warmup=0, cost_repeats=1, progress=False, loaded=(target, tokenizer, draft))
    assert report.machine["dtype"] == env.dtype_name(dtype)  # labelled with what ran
    assert report.machine["device"] == placement.device_of(target).type
    assert {r.mode for r in report.runs} >= {"plain", "engine-prompt-lookup", "engine-draft-model"}


@pytest.mark.parametrize("where", ["virtual", *HALF], ids=str)
def test_the_batch_grid_and_numerics_run_on_a_second_device_and_in_16_bits(where, tokenizer):
    dtype = where if where in HALF else torch.float32
    target, _ = wide_pair(dtype)
    ids = prompt_ids(tokenizer, TEXT)
    with virtual_device() if where == "virtual" else contextlib.nullcontext():
        if where == "virtual":
            target = target.to(VIRTUAL)
        grid = serving.measure_grid(target, batches=(1, 2), tokens=(1, 4), context=16, repeats=1,
                                    progress=False)
        assert set(grid) == {(1, 1), (1, 4), (2, 1), (2, 4)} and all(v > 0 for v in grid.values())
        half = env.half_dtype(placement.device_of(target))
        cmp = numerics.verify_vs_steps(target, ids, k=3, dtype=half)
        assert cmp.dtype == env.dtype_name(half) and len(cmp.margin) == 4
        d = numerics.first_divergence(target, ids, PromptLookup(), max_new_tokens=12, k=3, dtype=half)
        assert d.dtype == env.dtype_name(half) and len(d.plain) == 12


@pytest.mark.parametrize("where", ["virtual", *HALF], ids=str)
def test_each_drafter_trains_on_a_second_device_and_in_16_bits(where, monkeypatch, tmp_path):
    """Quick training of all four trained drafters: in fp32 beside the target, then cast to its dtype and
    left on its device; the target itself is untouched."""
    from specnotes.training.distilled import train_distilled_draft
    from specnotes.training.eagle import train_eagle
    from specnotes.training.early_exit import train_exit_adapter
    from specnotes.training.medusa import train_medusa

    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))  # the teacher caches of a throwaway target
    dtype = where if where in HALF else torch.float32
    target, _ = wide_pair(dtype)
    data = distill.self_windows(limit=4)
    with virtual_device() if where == "virtual" else contextlib.nullcontext():
        if where == "virtual":
            target = target.to(VIRTUAL)
        before = {n: p.clone() for n, p in target.named_parameters()}
        trained = {
            "medusa": train_medusa(target, 2, steps=2, data=data, teacher_k=4, progress=False)[0],
            "eagle-lite": train_eagle(target, steps=2, data=data, vocab=None, progress=False)[0],
            "exit adapter": train_exit_adapter(target, 2, rank=8, steps=2, data=data, teacher_k=4,
                                               progress=False)[0],
            "distilled": train_distilled_draft(target, (0,), steps=2, data=data, teacher_k=4,
                                               progress=False)[0],
        }
        for name, module in trained.items():
            params = list(module.parameters())
            assert {p.device for p in params} == {placement.device_of(target)}, name
            assert {p.dtype for p in params} == {dtype}, name
            assert all(torch.isfinite(p).all() for p in params), name
        for n, p in target.named_parameters():
            assert p.dtype == dtype and torch.equal(p, before[n]), n


def test_on_a_t4_the_plan_and_labels_say_float16(monkeypatch):
    """The fp16 branch of the dtype rule: a GPU without native bf16 (Colab's T4)."""
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=False: False)
    assert env.default_dtype("cuda") == torch.float16 and env.half_dtype("cuda") == torch.float16
    assert live.plan(device="cuda", online=False).dtype == "float16"
    assert env.half_dtype("cpu") == torch.bfloat16 and env.default_dtype("cpu") == torch.float32


def test_reports_label_the_dtype_that_ran_not_the_default():
    model = models.tiny_llama().to(torch.bfloat16)
    assert env.model_facts(model) == {"device": "cpu", "device_name": env.model_facts(model)["device_name"],
                                      "dtype": "bfloat16"}


@pytest.mark.slow
def test_the_offline_plan_of_a_gpu_runtime_runs_to_the_end_on_a_second_device():
    """Notebook 07 on a GPU runtime without the hub: the offline 135M model in fp16 (a T4's dtype), its
    committed distilled draft and trained early exit, transformers' assisted generation and the engine,
    all on the second device, through the whole suite."""
    with virtual_device():
        plan = live.Plan(VIRTUAL.type, "float16", models.DEFAULT, "distilled", "offline, second device")
        report = live.run(plan, max_new_tokens=4, repeats=1, samplings=("greedy",), prompts_per_kind=1,
                             warmup=0, cost_repeats=1, progress=False)
    assert (report.machine["device"], report.machine["dtype"]) == ("meta", "float16")
    modes = {r.mode for r in report.runs}
    assert modes >= {"plain", "hf-assistant", "engine-draft-model", "engine-early-exit",
                     "engine-prompt-lookup"}


_DTYPE_LITERAL = re.compile(r"""["'](fp32|float32|float|bf16|bfloat16|fp16|float16|half)["']""")
_REFERENCE = re.compile(r"""\(\s*["']float32["']\s*,\s*HALF\s*\)""")  # fp32 as the numerics reference


def typed_dtypes(path) -> list[tuple[int, str]]:
    """(cell, line) where a code cell that runs the live model names a dtype by hand. The model's dtype
    comes from placement.dtype_of(target) and the 16-bit one from env.half_dtype; only fp32 as the reference
    beside HALF is typed. (Catalog scenarios, an 8B model on an H100, do not touch `target`.)"""
    found = []
    for i, cell in enumerate(cells(path)):
        src = source(cell)
        if cell["cell_type"] != "code" or not re.search(r"\btarget\b", src):
            continue
        for line in src.splitlines():
            if _DTYPE_LITERAL.search(_REFERENCE.sub("", line)):
                found.append((i, line.strip()))
    return found


@pytest.mark.parametrize("name", ["07_live_timings", "08_production"])
def test_the_timing_notebooks_read_the_dtype_from_the_model(name):
    assert typed_dtypes(ROOT / "notebooks" / f"{name}.ipynb") == []


def test_a_typed_in_dtype_is_caught(tmp_path):
    nb = json.loads((ROOT / "notebooks" / "08_production.ipynb").read_text())
    cell = next(c for c in nb["cells"] if "placement.dtype_of(target)" in source(c))
    cell["source"] = source(cell).replace("env.dtype_name(placement.dtype_of(target))", '"fp32"')
    (tmp_path / "08.ipynb").write_text(json.dumps(nb))
    assert [line for _, line in typed_dtypes(tmp_path / "08.ipynb")] == [
        next(line.strip() for line in source(cell).splitlines() if '"fp32"' in line)]
