"""The CUDA path of every notebook's main code, in one command, with one JSON report.

    python tools/gpu_smoke.py                          # on the GPU: the real model, fp32, fp16 and bf16
    python tools/gpu_smoke.py --device cpu --tiny      # what CI runs: tiny models, tiny sizes, on the CPU

It runs, on one device:
- fp32: greedy identity with plain greedy for every drafter of notebook 06 (chain and tree), and one
  sampled run each;
- each 16-bit dtype (fp16, and bf16 where the device runs it natively): plain decoding, every drafter
  greedy (the first divergence from plain greedy and its logit margin, as notebook 08 reports it) and
  sampled, the drafter table (drafter_table.run), the quick timing suite of notebook 07, the batch x tokens
  grid of notebook 08 and the numerics diagnostic.
The report (device, dtypes, versions, every figure, seconds per section) goes to --out, by default
bench/gpu_smoke-<machine>.json; commit a GPU run under data/reference_runs/gpu_smoke/ (a folder of its
own: the files at the top of data/reference_runs/ are notebook 07's live-timing references, and
references.references skips, with a warning, any file there that is not one). Under 8 minutes on one GPU
with the real model. The exit status is 1 when an fp32 greedy run differs from plain greedy.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from specnotes import (
    drafter_table,
    engine,
    env,
    live,
    models,
    numerics,
    placement,
    references,
    serving,
    timing,
)
from specnotes.decode import plain_generate, prompt_ids
from specnotes.drafters import registry
from specnotes.paths import write_atomic
from specnotes.training import eagle3, parallel
from specnotes.training.eagle import new_model
from specnotes.training.early_exit import exit_model
from specnotes.training.medusa import new_heads

TEXTS = {
    "copy": "Copy this exactly: the quick brown fox jumps over the lazy dog, and the lazy dog sleeps on.",
    "free": "Write two sentences about a lighthouse.",
}


def the_models(device, dtype, tiny: bool):
    """(target, tokenizer, draft): the offline 135M model and its distilled draft, or tiny random ones
    with the real tokenizer's vocabulary."""
    from specnotes.training.distilled import load_distilled_draft

    if tiny:
        tokenizer = models.load(device="cpu")[1]
        target = models.tiny_llama(0, len(tokenizer), 64, 4).to(device, dtype)
        return target, tokenizer, models.tiny_llama(1, len(tokenizer), 32, 1).to(device, dtype)
    target, tokenizer = models.load(device=device, dtype=dtype)
    return target, tokenizer, load_distilled_draft(target)


def the_parts(target, draft, tiny: bool) -> registry.Parts:
    """The pieces the drafters are built from: the committed ones (and `draft`) on the real model,
    untrained stand-ins of the same shapes on tiny models."""
    parts = _Untrained(target) if tiny else registry.Parts(target)
    parts.once("draft", lambda: draft)
    return parts


def the_drafters(target, draft, tiny: bool) -> dict:
    """name -> (factory, engine k) for one drafter of every family (registry.FAMILIES; Medusa as the
    (3, 2, 2) tree), each at its registry entry's engine k, with 3 as the run's k."""
    parts = the_parts(target, draft, tiny)
    return {name: (entry.factory(target, parts), entry.engine_k(3)) for name, entry in FAMILIES.items()}


FAMILIES = {name.removesuffix("-3-2-2"): registry.ENTRIES[name] for name in registry.FAMILIES}


class _Untrained(registry.Parts):
    """Untrained pieces of the right shapes, for tiny random targets."""

    def heads(self):
        return self.once("heads", lambda: new_heads(self.target, 3))

    def eagle(self):
        return self.once("eagle", lambda: new_model(self.target))

    def eagle3(self):
        return self.once("eagle3", lambda: eagle3.new_model(self.target))

    def parallel(self):
        return self.once("parallel", lambda: parallel.new_model(self.target))

    def exit_adapter(self):
        return {"n_layers": 2, "adapter": self.once("exit", lambda: exit_model(self.target, 2, rank=8))}


def decode_runs(target, tokenizer, draft, tiny: bool, n: int) -> dict:
    """Plain and every drafter, greedy and sampled, on each prompt: tokens, α, tokens per pass, time."""
    out = {}
    makers = the_drafters(target, draft, tiny)
    for kind, text in list(TEXTS.items())[:1 if tiny else None]:
        ids = prompt_ids(tokenizer, text)  # on the CPU: the package moves them to the model
        plain_generate(target, ids, 2)  # warm-up: the first pass of a dtype pays CUDA's and cuBLAS's start
        start = time.perf_counter()
        plain = plain_generate(target, ids, n, eos_token_id=-1)
        rows = {"plain": {"tokens": plain.tokens, "seconds": time.perf_counter() - start,
                          "decode_tokens_per_s": plain.decode_tokens_per_s}}
        for name, (make, k) in makers.items():
            for sampled in (False, True):
                drafter = make()  # built outside the timer (the trained ones read their weights)
                start = time.perf_counter()
                res = engine.generate(target, drafter, ids, n, k=k, do_sample=sampled, seed=0,
                                      eos_token_id=-1)
                seconds = time.perf_counter() - start
                row = {"tokens": res.tokens, "seconds": seconds, "alpha": res.alpha,
                       "tokens_per_pass": res.tokens_per_call}
                if not sampled:
                    where = timing.first_difference(res.tokens, plain.tokens)
                    row["identical"] = where is None
                    row["first_difference"] = where
                rows[f"{name}{' sampled' if sampled else ''}"] = row
        out[kind] = rows
    return out


def divergences(target, tokenizer, draft, tiny: bool, n: int) -> list[dict]:
    """Notebook 08's report for each model drafter: where 16-bit speculative greedy first leaves plain
    greedy, and the logit margin there."""
    makers = the_drafters(target, draft, tiny)
    ids = prompt_ids(tokenizer, TEXTS["free"])
    rows = []
    for name in ("distilled-draft", "early-exit+adapter", "prompt-lookup"):
        make, k = makers[name]
        d = numerics.first_divergence(target, ids, make(), max_new_tokens=n, k=k, name=name)
        rows.append({"drafter": name, "dtype": d.dtype, "position": d.position,
                     "margin_there": d.margin_there, "smallest_margin": d.smallest_margin})
    return rows


def sixteen_bit(target, tokenizer, draft, tiny: bool, n: int) -> dict:
    """Everything notebooks 06-08 run, in the model's (16-bit) dtype."""
    sections, seconds = {}, {}

    def timed(name, fn):
        start = time.perf_counter()
        sections[name] = fn()
        seconds[name] = round(time.perf_counter() - start, 2)

    timed("decode", lambda: decode_runs(target, tokenizer, draft, tiny, n))
    timed("divergence", lambda: divergences(target, tokenizer, draft, tiny, n))
    prompts = [{"kind": kind, "text": text} for kind, text in list(TEXTS.items())[:1 if tiny else None]]
    timed("drafter_table", lambda: drafter_table.as_records(drafter_table.table(drafter_table.run(
        target, tokenizer, FAMILIES, prompts, max_new_tokens=n, k=3, progress=False,
        parts=the_parts(target, draft, tiny)))))

    def live_timings():
        plan = live.Plan(placement.device_of(target).type, env.dtype_name(placement.dtype_of(target)),
                         "loaded", "loaded", "gpu_smoke: the models in memory")
        report = live.run(plan, max_new_tokens=n, repeats=1, prompts_per_kind=1, extra_modes=False,
                             warmup=1, cost_repeats=2, progress=False, loaded=(target, tokenizer, draft))
        return {key: report.as_dict()[key] for key in ("runs", "costs")}

    timed("live_timings", live_timings)
    batches, tokens = ((1, 2), (1, 4)) if tiny else ((1, 4, 16, 64), (1, 2, 4, 8))
    timed("batch_grid", lambda: {f"{b}x{t}": s for (b, t), s in serving.measure_grid(
        target, batches=batches, tokens=tokens, context=16 if tiny else 128, repeats=2,
        progress=False).items()})
    ids = prompt_ids(tokenizer, TEXTS["free"])
    timed("verify_vs_steps", lambda: vars(numerics.verify_vs_steps(target, ids, k=4)))
    return {"sections": sections, "section_seconds": seconds}


def dtypes_for(device) -> list:
    """fp32, fp16, and bf16 where the device runs it natively (every CUDA GPU from Ampere on, the CPU)."""
    out = [torch.float32, torch.float16]
    if env.half_dtype(device) == torch.bfloat16:
        out.append(torch.bfloat16)
    return out


def run(device: str, tiny: bool, n: int) -> dict:
    report = {"machine": env.environment().as_dict(), "device": device, "tiny": tiny, "new_tokens": n,
              "versions": {p: env.version_of(p) for p in ("torch", "transformers", "numpy")}, "runs": {}}
    if torch.device(device).type == "cuda":
        report["cuda"] = torch.version.cuda
    for dtype in dtypes_for(device):
        start = time.perf_counter()
        target, tokenizer, draft = the_models(device, dtype, tiny)
        name = env.dtype_name(dtype)
        facts = env.model_facts(target)
        if dtype == torch.float32:
            entry = {"decode": decode_runs(target, tokenizer, draft, tiny, n)}
        else:
            entry = sixteen_bit(target, tokenizer, draft, tiny, n)
        report["runs"][name] = {"model": facts, **entry, "seconds": round(time.perf_counter() - start, 2)}
        print(f"{name}: {report['runs'][name]['seconds']:.1f} s", flush=True)
        del target, draft
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    fp32 = report["runs"]["float32"]["decode"]
    report["fp32_greedy_identical"] = all(row["identical"] for rows in fp32.values()
                                          for key, row in rows.items() if "identical" in row)
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cuda (default when present) or cpu")
    ap.add_argument("--tiny", action="store_true", help="tiny random models and sizes (CI)")
    ap.add_argument("--tokens", type=int, default=None, help="new tokens per run (32; 8 with --tiny)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.tokens is not None and args.tokens < 1:
        ap.error(f"--tokens must be a whole number >= 1, got {args.tokens}")
    device = args.device or env.default_device()
    try:
        import torch

        kind = torch.device(device).type
    except (RuntimeError, ValueError) as exc:
        ap.error(f"--device {device!r} is not a device torch knows: {exc}")
    if kind == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda, but torch sees no CUDA GPU here (use --device cpu)")
    n = args.tokens or (8 if args.tiny else 32)
    start = time.perf_counter()
    report = run(device, args.tiny, n)
    report["seconds"] = round(time.perf_counter() - start, 1)
    out = args.out or Path("bench") / f"gpu_smoke-{references.fingerprint(report['machine'])}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(report, indent=1) + "\n")
    print(f"fp32 greedy identical to plain greedy for every drafter: {report['fp32_greedy_identical']}")
    print(f"report: {out} ({report['seconds']:.0f} s)")
    return 0 if report["fp32_greedy_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
