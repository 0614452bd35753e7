"""Choose EagleLite's chain length k and confidence gate on the validation prompts, never the held-out ones.

    python tools/tune_eagle_gate.py        # about 3 minutes on 2 CPU cores

Runs plain greedy decoding and each (k, min_confidence) setting back to back on the six validation prompts
(prompts.json's "validation": free-form, in no training set and not held out) and prints α, tokens per
target pass and the wall-clock speedup. registry.EAGLE_GATE (specnotes/drafters/registry.py) holds the
setting this picked; the held-out table (notebook 06, `make bench`) then measures it on prompts that took no
part in the choice.
"""

from __future__ import annotations

import sys

from specnotes import drafter_table, models
from specnotes.drafters import EagleLite, registry
from specnotes.prompts import prompt_set
from specnotes.training.eagle import load_eagle

SETTINGS = ((1, None), (1, 0.2), (1, 0.3), (1, 0.4), (2, 0.3), (3, 0.3))  # (k, min_confidence)


def main(max_new_tokens: int = 64) -> int:
    target, tokenizer = models.load(device="cpu")
    trained = load_eagle(target)
    variants = {f"k={k}, gate={gate}": (lambda k=k, gate=gate: EagleLite(target, model=trained, k=k,
                                                                        min_confidence=gate))
                for k, gate in SETTINGS}
    prompts = prompt_set("validation")
    rows = drafter_table.table(drafter_table.run(target, tokenizer, variants, prompts,
                                                 max_new_tokens=max_new_tokens))
    print(f"EagleLite on the {len(prompts)} validation prompts, {max_new_tokens} new tokens each:")
    for r in rows:
        if r.kind == "all":
            print(f"  {r.drafter:<16} α {r.alpha:.2f}  tokens/pass {r.tokens_per_call:.2f}  "
                  f"speedup {r.speedup:.2f}x")
    print(f"the gate in use now: registry.EAGLE_GATE = {registry.EAGLE_GATE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
