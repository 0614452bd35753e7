"""The batched sweep as a benchmark: notebook 08 §2's flip, and the plain batched baseline against
transformers' own batched generate.

`make bench` runs it and writes bench/batch.json and bench/batch.md:
- total tokens/s of engine.plain_batch and engine.generate_batch (prompt lookup, the distilled draft model)
  at each batch size on the copy-heavy and free-form mixes, greedy, round-robin; the ratio per batch with
  its range over the repeats, and the batch at which each falls below plain (specnotes.batch_sweep);
- plain_batch against transformers' left-padded batched generate at batch 16, side by side, with the
  rows whose tokens agree.
SPECNOTES_QUICK=1 is the short run: batches 1 to 8, 16 tokens, 2 repeats.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from specnotes import batch_sweep, models, quick_mode
from specnotes.drafters import DraftModel, PromptLookup
from specnotes.env import environment, model_facts
from specnotes.paths import write_atomic
from specnotes.training.distilled import load_distilled_draft

DRAFT_K = 2  # the distilled draft drafts row by row in a batch: its cost grows with B, so a short k


def main() -> int:
    quick = quick_mode()
    batches = (1, 2, 4, 8) if quick else batch_sweep.BATCHES
    tokens, repeats = (16, 2) if quick else (24, 3)
    target, tokenizer = models.load(device="cpu")
    draft = load_distilled_draft(target)
    prompts = batch_sweep.mix_prompts(tokenizer)
    start = time.perf_counter()
    versus = batch_sweep.versus_transformers(target, prompts["copy-heavy"], batch=16, max_new_tokens=32,
                                             repeats=3)
    sweep = batch_sweep.sweep(target, prompts, {"prompt lookup": PromptLookup,
                                                "distilled draft": lambda: DraftModel(draft, k=DRAFT_K)},
                              batches=batches, max_new_tokens=tokens, repeats=repeats)
    crossovers = {f"{mix} / {mode}": sweep.crossover(mix, mode)
                  for mix in sweep.mixes() for mode in sweep.modes()}
    report = {"machine": {**environment().as_dict(), **model_facts(target)}, "quick": quick,
              "seconds": time.perf_counter() - start, "versus_transformers": versus, "crossovers": crossovers,
              "sweep": sweep.as_dict()}
    out = Path("bench")
    out.mkdir(exist_ok=True)
    write_atomic(out / "batch.json", json.dumps(report, indent=1) + "\n")
    text = (
        "# Batched decoding: the flip in the engine, and the plain baseline against transformers\n\n"
        f"plain_batch / transformers' batched generate at B = 16 (32 tokens, greedy, left-padded): "
        f"{versus['ratio']:.2f}x as fast (median of {len(versus['ours_s'])} paired repeats; ours "
        f"{min(versus['ours_s']):.2f}-{max(versus['ours_s']):.2f} s, transformers' "
        f"{min(versus['theirs_s']):.2f}-{max(versus['theirs_s']):.2f} s); rows with identical tokens: "
        f"{versus['identical']} of 16\n\n"
        f"Speculative / plain total tokens/s, {tokens} tokens per row, {repeats} repeats "
        f"(median [lowest, highest]):\n\n" + sweep.markdown())
    spec = [p for p in sweep.points if p.mode != "plain"]
    rows, same = sum(p.tokens for p in spec) // tokens, sum(p.same_as_plain for p in spec)
    text += (f"\nSpeculative rows whose greedy tokens equal the plain row beside them: {same} of {rows}. "
             "In float32 a batch's padding, masked holes and wider verify passes reorder additions, so a "
             "near-tie can go the other way (tests/test_batch.py checks token identity in float64).\n")
    write_atomic(out / "batch.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
