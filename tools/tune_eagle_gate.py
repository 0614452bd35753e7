"""Choose EagleLite's or Eagle3Lite's chain length k (and EagleLite's confidence gate) on the validation
prompts, never the held-out ones.

    python tools/tune_eagle_gate.py                    # EagleLite: about 3 minutes on 2 CPU cores
    python tools/tune_eagle_gate.py --drafter eagle3   # Eagle3Lite at k = 1, 2, 3, EagleLite's k beside it

Runs plain greedy decoding and each setting back to back on the six validation prompts (prompts.json's
"validation": free-form, in no training set and not held out) and prints α, α by position, tokens per
target pass and the wall-clock speedup. registry.EAGLE_GATE and registry.EAGLE3_K
(specnotes/drafters/registry.py) hold what this picked; the held-out table (notebook 06, `make bench`) then
measures them on prompts that took no part in the choice.
"""

from __future__ import annotations

import argparse
import sys

from specnotes import drafter_table, models
from specnotes.drafters import Eagle3Lite, EagleLite, registry
from specnotes.prompts import prompt_set
from specnotes.training.eagle import load_eagle
from specnotes.training.eagle3 import load_eagle3

GATES = ((1, None), (1, 0.2), (1, 0.3), (1, 0.4), (2, 0.3), (3, 0.3))  # EagleLite's (k, min_confidence)
EAGLE3_KS = (1, 2, 3)


def variants(target, drafter: str) -> dict:
    """name -> factory of a fresh drafter, for each setting tried."""
    trained = load_eagle(target)
    if drafter == "eagle":
        return {f"k={k}, gate={gate}": (lambda k=k, gate=gate: EagleLite(target, model=trained, k=k,
                                                                         min_confidence=gate))
                for k, gate in GATES}
    fused = load_eagle3(target)
    out = {f"eagle-lite k={registry.EAGLE_K}": lambda: EagleLite(target, model=trained, k=registry.EAGLE_K)}
    out.update({f"eagle3-lite k={k}": (lambda k=k: Eagle3Lite(target, model=fused, k=k)) for k in EAGLE3_KS})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drafter", choices=["eagle", "eagle3"], default="eagle")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=1, help="timed runs of each, the median kept")
    args = ap.parse_args(argv)
    target, tokenizer = models.load(device="cpu")
    prompts = prompt_set("validation")
    runs = drafter_table.run(target, tokenizer, variants(target, args.drafter), prompts,
                             max_new_tokens=args.max_new_tokens, repeats=args.repeats)
    print(f"on the {len(prompts)} validation prompts, {args.max_new_tokens} new tokens each, greedy:")
    for r in drafter_table.table(runs):
        if r.kind == "all":
            print(f"  {r.drafter:<18} α {r.alpha:.2f}  tokens/pass {r.tokens_per_call:.2f}  "
                  f"speedup {r.speedup:.2f}x  α by position {[round(a, 2) for a in r.per_position]}  "
                  f"identical to plain: {r.identical}")
    print(f"in use now: registry.EAGLE_K = {registry.EAGLE_K}, EAGLE_GATE = {registry.EAGLE_GATE}, "
          f"EAGLE3_K = {registry.EAGLE3_K}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
