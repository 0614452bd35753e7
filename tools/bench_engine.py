"""The engine's prompt lookup against transformers' own (prompt_lookup_num_tokens=10), greedy, same model.

`make bench` runs it and writes bench/engine_prompt_lookup.json and .md. Modes run round-robin after a
warm-up, so a noisy neighbour slows all of them alike; figures are medians with the runs beside them.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from specnotes import engine, models, quick_mode
from specnotes.decode import prompt_ids
from specnotes.drafters import PromptLookup
from specnotes.env import environment

PASSAGE = ("The lighthouse keeper climbed the spiral stairs every evening at dusk. He trimmed the wick, "
           "polished the great lens, and wound the clockwork that turned the light. Ships far out at sea "
           "counted the flashes, five seconds apart, and knew exactly where the rocks lay.")
PROMPTS = {
    "copy": f"Copy the following paragraph exactly, word for word:\n\n{PASSAGE}",
    "free": "Write a short story about a robot who learns to paint.",
}


class CountCalls:
    """A forward hook that counts target passes."""

    def __init__(self, model):
        self.n = 0
        self.handle = model.register_forward_hook(self)

    def __call__(self, *args):
        self.n += 1


def run_mode(mode, model, ids, max_new_tokens):
    if mode == "plain":
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                             do_sample=False)
        return out[0, ids.shape[1]:].tolist()
    if mode == "hf-prompt-lookup":
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                             do_sample=False, prompt_lookup_num_tokens=10)
        return out[0, ids.shape[1]:].tolist()
    if mode == "engine-prompt-lookup":
        return engine.generate(model, PromptLookup(), ids, max_new_tokens).tokens
    raise ValueError(mode)


def main() -> int:
    quick = quick_mode()
    repeats = 3 if quick else 7
    max_new_tokens = 96 if quick else 160
    model, tokenizer = models.load(device="cpu")
    env = environment()
    modes = ["plain", "hf-prompt-lookup", "engine-prompt-lookup"]
    runs = []
    for kind, text in PROMPTS.items():
        ids = prompt_ids(tokenizer, text)
        outputs, seconds, calls = {}, {m: [] for m in modes}, {}
        for m in modes:  # warm-up, and the tokens each mode produces
            outputs[m] = run_mode(m, model, ids, max_new_tokens)
        for _ in range(repeats):
            for m in modes:  # round-robin
                counter = CountCalls(model)
                start = time.perf_counter()
                tokens = run_mode(m, model, ids, max_new_tokens)
                seconds[m].append(time.perf_counter() - start)
                counter.handle.remove()
                calls[m] = counter.n
                assert tokens == outputs[m], f"{m} is not deterministic"
        plain_rate = len(outputs["plain"]) / np.median(seconds["plain"])
        hf_rate = len(outputs["hf-prompt-lookup"]) / np.median(seconds["hf-prompt-lookup"])
        for m in modes:
            rate = len(outputs[m]) / np.median(seconds[m])
            runs.append({
                "mode": m, "prompt_kind": kind, "sampling": "greedy", "new_tokens": len(outputs[m]),
                "tokens_per_s": rate, "tokens_per_call": len(outputs[m]) / calls[m],
                "target_calls": calls[m], "seconds": seconds[m],
                "speedup": rate / plain_rate, "vs_hf_prompt_lookup": rate / hf_rate,
                "identical_to_plain": outputs[m] == outputs["plain"],
            })
    report = {"machine": env.as_dict(), "max_new_tokens": max_new_tokens, "repeats": repeats, "runs": runs}
    out = Path("bench")
    out.mkdir(exist_ok=True)
    (out / "engine_prompt_lookup.json").write_text(json.dumps(report, indent=1))
    lines = [
        "# Prompt lookup: specnotes engine vs transformers (greedy, SmolLM2-135M)",
        "",
        f"{env.device} ({env.device_name}), {env.dtype}, {env.threads} threads, torch {env.torch}, "
        f"transformers {env.transformers}; {repeats} round-robin repeats, medians; up to "
        f"{max_new_tokens} new tokens.",
        "",
        "transformers' prompt lookup runs at its settings (n-grams up to 2, 10 drafted tokens); the "
        "engine's at its defaults (n-grams up to 3, a length that adapts from 10 up to 32). tokens/call "
        "counts every target forward call, the prefill included.",
        "",
        "| prompt | mode | tokens/s | tokens/call | x plain | x HF lookup | same tokens as plain |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in runs:
        lines.append(f"| {r['prompt_kind']} | {r['mode']} | {r['tokens_per_s']:.1f} | "
                     f"{r['tokens_per_call']:.2f} | {r['speedup']:.2f} | {r['vs_hf_prompt_lookup']:.2f} | "
                     f"{r['identical_to_plain']} |")
    (out / "engine_prompt_lookup.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
