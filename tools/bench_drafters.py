"""Notebook 06's drafter table as a benchmark: every drafter on every task type of the held-out prompts.

`make bench` runs it and writes bench/drafters.json and bench/drafters.md. For each prompt, plain greedy
decoding and every drafter run back to back (round-robin), so speedups are ratios measured at the same
moment, after a warm-up run of each (drafter_table.run times them with timing.round_robin); every run is
also checked to give plain greedy's tokens.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from specnotes import drafter_table, live, models, quick_mode
from specnotes.decode import prompt_ids
from specnotes.drafters import registry
from specnotes.env import environment, model_facts
from specnotes.paths import write_atomic
from specnotes.prompts import FREE_FORM, KINDS, prompt_set

K = 3
TRAINED = ("early-exit+adapter", "distilled-draft", "medusa", "eagle-lite", "eagle-lite+gate", "eagle3-lite",
           "parallel-lite")
GOAL = 1.4  # the free-form verdict's bar: a clear win on text with no earlier copy in the prompt


def free_form_verdict(target, tokenizer, free: list[drafter_table.Row], prompts: list[dict]) -> tuple:
    """The trained drafters on free-form text against GOAL: (verdicts, markdown), with the verify-cost
    curve measured on the first free-form prompt (live.verdicts)."""
    trained = [r for r in free if r.drafter in TRAINED]
    if not trained:
        return [], ""
    prompt = next(p["text"] for p in prompts if p["kind"] in FREE_FORM)
    found = live.verdicts(target, prompt_ids(tokenizer, prompt), trained, GOAL)
    return found, drafter_table.markdown_verdicts(found, GOAL)


def main() -> int:
    quick = quick_mode()
    per_kind = 1 if quick else 4
    max_new_tokens = 48 if quick else 128
    target, tokenizer = models.load(device="cpu")
    # label the report with what ran (the CPU, fp32), not with the machine's default GPU device
    machine = {**environment().as_dict(), **model_facts(target)}
    heldout = prompt_set("heldout")
    prompts = [p for kind in KINDS
               for p in [q for q in heldout if q["kind"] == kind][:per_kind]]
    drafters = registry.entries()  # the table's rows, each at its own engine k
    start = time.perf_counter()
    runs = drafter_table.run(target, tokenizer, drafters, prompts, max_new_tokens=max_new_tokens, k=K)
    rows = drafter_table.table(runs)
    free = drafter_table.free_form(runs)
    found, verdict = free_form_verdict(target, tokenizer, free, prompts)
    report = {
        "machine": machine, "k": K, "max_new_tokens": max_new_tokens, "prompts_per_kind": per_kind,
        "greedy": True, "seconds": time.perf_counter() - start,
        "all_identical_to_plain": all(r.identical for r in runs),
        "rows": drafter_table.as_records(rows),
        "free_form_rows": drafter_table.as_records(free),
        "free_form_goal": GOAL, "free_form_verdicts": [asdict(v) for v in found],
        "runs": [asdict(r) for r in runs],
    }
    out = Path("bench")
    out.mkdir(exist_ok=True)
    write_atomic(out / "drafters.json", json.dumps(report, indent=1) + "\n")
    text = (
        "# Drafters on SmolLM2-135M-Instruct, held-out prompts (greedy)\n\n"
        f"{machine['device']} ({machine['device_name']}), {machine['dtype']}, {machine['threads']} "
        f"threads, torch {machine['torch']}, transformers {machine['transformers']}. "
        f"{per_kind} held-out prompt(s) per task type, up to "
        f"{max_new_tokens} new tokens, k = {K} for the model drafters (the model-free ones choose their "
        "own length). Plain decoding and every drafter run back to back per prompt; speedup = plain time "
        "/ speculative time. c = drafting time per round / plain time per token.\n\n"
        f"Every run identical to plain greedy: {report['all_identical_to_plain']}.\n\n"
        + drafter_table.markdown(rows)
        + "\n## Free-form text (story + qa prompts together)\n\n"
        "The text a model drafter has to guess: no earlier copy of it sits in the prompt.\n\n"
        + drafter_table.markdown(free)
        + f"\n## The trained drafters against {GOAL:g}× on free-form text\n\n"
        "What stops each one, on notebook 05's formula: a round of round(drafts/round) drafts at the "
        "measured α, its measured drafting cost c, and a verify pass over that many positions + 1 "
        "(measured on this machine, in plain steps). \"α\": the formula reaches the goal at the α in "
        "the table, at this cost. \"cost\": no α does, at this draft length. \"not α\": the measured α meets "
        "the formula's need, so what the formula leaves out stops it (α falling by position, the loop's cost "
        "per round).\n\n"
        + verdict
    )
    write_atomic(out / "drafters.md", text)
    print(text)
    return 0 if report["all_identical_to_plain"] else 1


if __name__ == "__main__":
    sys.exit(main())
