"""The one drafter registry: every drafter configuration the package measures, by name, each with the
engine k it runs at. The drafter table (notebook 06, `make bench`), notebook 07's suite, tools/gpu_smoke.py
and the tests build their drafters from it; the tests add test-only entries through the same `Entry`.

An entry builds a fresh drafter from a target and its `Parts` (the trained pieces: the committed weights
here, random-weight stand-ins in the tests), so one configuration is written once. What a drafter is (a
tree drafter, a drafter that reports q) is read from the drafter itself (`traits`), never from a list.

The engine's k: None lets a drafter follow its own length policy (the lookups draft as far as their
match goes); RUN takes the run's k (the table's, notebook 07's) as the cap on drafted tokens per round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from specnotes import engine
from specnotes.drafters.base import Drafter, Recorder
from specnotes.drafters.draft_model import DraftModel
from specnotes.drafters.eagle import EagleLite
from specnotes.drafters.eagle3 import Eagle3Lite
from specnotes.drafters.early_exit import EarlyExit
from specnotes.drafters.lookahead import Lookahead
from specnotes.drafters.medusa import Medusa
from specnotes.drafters.parallel import ParallelLite
from specnotes.drafters.prompt_lookup import PromptLookup
from specnotes.drafters.suffix import Suffix
from specnotes.training.distilled import load_distilled_draft
from specnotes.training.eagle import load_eagle
from specnotes.training.eagle3 import load_eagle3
from specnotes.training.medusa import load_medusa_heads
from specnotes.training.parallel import load_parallel

RUN = "run"  # Entry.k: the run's k caps this drafter's draft (model drafters pay per drafted token)
MEDUSA_WIDTHS = (1,)  # the cheapest tree: on 2 CPU cores wider ones lost as much or more (notebook 06)
EAGLE_K = 1  # one guess per round (scored over the tokens the committed draft was trained on: eagle.VOCAB)
EAGLE_GATE = 0.3  # eagle-lite+gate drafts only when its guess has probability >= 0.3. Chosen with
# tools/tune_eagle_gate.py on the validation prompts: gates from none to 0.4 ran at the same speed there
# (1.25-1.28x), and 0.3 lifts α from 0.49 to 0.67 for 0.1 fewer tokens per pass.
PARALLEL_K = 2  # ParallelLite's guesses per round, of the block of 4 it was trained for. On the validation
# prompts (greedy, 64 tokens, one run of 2026-12-06) k = 2, 3, 4 ran at 1.16x, 0.94x, 0.90x plain: α by
# position fell from 0.41 to 0.20 after the first guess, so the later slots widened the pass for little.
EAGLE3_K = 2  # Eagle3Lite's guesses per round. It was trained on its own chained guesses, and its later
# positions hold up better than EagleLite's, so it was re-tuned for the committed weights with
# tools/tune_eagle_gate.py --drafter eagle3 --repeats 3 (validation prompts, greedy, 64 tokens, one run of
# 2026-12-06): k = 1, 2, 3 ran at 1.22x, 1.26x, 1.06x plain, EagleLite at k = 1 1.24x beside them. The gain
# over k = 1 is small, inside run-to-run noise; k = 3 widens the verify pass to 4 positions, which costs a
# step more on this CPU.


class Parts:
    """The trained pieces drafters are built from, for one target, each loaded the first time it is
    asked for: the committed weights (a test passes random-weight stand-ins through a subclass)."""

    def __init__(self, target):
        self.target, self._made = target, {}

    def once(self, what: str, build: Callable[[], object]):
        if what not in self._made:
            self._made[what] = build()
        return self._made[what]

    def draft_lm(self):
        """A small causal LM on the target's vocabulary: the distilled 2-layer draft."""
        return self.once("draft", lambda: load_distilled_draft(self.target))

    def heads(self):
        return self.once("heads", lambda: load_medusa_heads(self.target))

    def eagle(self):
        return self.once("eagle", lambda: load_eagle(self.target))

    def eagle3(self):
        return self.once("eagle3", lambda: load_eagle3(self.target))

    def parallel(self):
        return self.once("parallel", lambda: load_parallel(self.target))

    def exit_adapter(self) -> dict:
        """EarlyExit's keywords for its trained adapter."""
        return {"adapter": "trained"}


@dataclass(frozen=True)
class Entry:
    """One drafter configuration: build(target, parts) -> a fresh drafter, and the engine k it runs at
    (None: its own length policy; RUN: the run's k; an int: that cap)."""

    build: Callable[[object, Parts], Drafter]
    k: int | str | None = RUN

    def factory(self, target, parts: Parts | None = None) -> Callable[[], Drafter]:
        """A function of no arguments that builds a fresh drafter (each timed run gets its own)."""
        parts = Parts(target) if parts is None else parts
        return lambda: self.build(target, parts)

    def engine_k(self, run_k: int | None) -> int | None:
        """The k to hand engine.generate in a run whose own k is run_k."""
        return run_k if self.k == RUN else self.k


ENTRIES: dict[str, Entry] = {
    "prompt-lookup": Entry(lambda t, p: PromptLookup(), k=None),
    "suffix": Entry(lambda t, p: Suffix(), k=None),
    "lookahead": Entry(lambda t, p: Lookahead(), k=None),
    "early-exit": Entry(lambda t, p: EarlyExit(t)),
    "early-exit+adapter": Entry(lambda t, p: EarlyExit(t, **p.exit_adapter())),
    "distilled-draft": Entry(lambda t, p: DraftModel(p.draft_lm())),
    "medusa": Entry(lambda t, p: Medusa(t, heads=p.heads(), widths=MEDUSA_WIDTHS)),
    "medusa-3-2-2": Entry(lambda t, p: Medusa(t, heads=p.heads(), widths=(3, 2, 2))),  # Medusa's default
    "eagle-lite": Entry(lambda t, p: EagleLite(t, model=p.eagle(), k=EAGLE_K)),
    "eagle-lite+gate": Entry(lambda t, p: EagleLite(t, model=p.eagle(), k=EAGLE_K,
                                                    min_confidence=EAGLE_GATE)),
    # this year's drafters (notebook 06): EAGLE-3's fused features and training-time test at EagleLite's
    # size, two guesses per round (EAGLE3_K); and parallel drafting, a block of guesses from one pass
    "eagle3-lite": Entry(lambda t, p: Eagle3Lite(t, model=p.eagle3(), k=EAGLE3_K)),
    "parallel-lite": Entry(lambda t, p: ParallelLite(t, model=p.parallel(), k=PARALLEL_K), k=None),
    "engine-no-draft": Entry(lambda t, p: Drafter()),  # drafts nothing: the engine's own overhead
}
# the drafter table's rows (notebook 06, make bench)
TABLE = ("prompt-lookup", "suffix", "lookahead", "early-exit", "early-exit+adapter", "distilled-draft",
         "medusa", "eagle-lite", "eagle-lite+gate", "eagle3-lite", "parallel-lite")
# one entry of each drafter family (tools/gpu_smoke.py)
FAMILIES = ("prompt-lookup", "suffix", "lookahead", "early-exit", "early-exit+adapter", "distilled-draft",
            "medusa-3-2-2", "eagle-lite", "eagle3-lite", "parallel-lite")


def entries(names=TABLE, extra: dict[str, Entry] | None = None) -> dict[str, Entry]:
    """name -> Entry for `names`, from ENTRIES and then `extra` (a caller's own entries)."""
    pool = {**ENTRIES, **(extra or {})}
    unknown = [n for n in names if n not in pool]
    if unknown:
        raise ValueError(f"no drafter entry named {unknown}: the registry holds {sorted(pool)}")
    return {name: pool[name] for name in names}


def factories(target, names=TABLE, parts: Parts | None = None) -> dict[str, Callable[[], Drafter]]:
    """name -> factory of a fresh drafter, for the entries `names`, built from one set of parts."""
    parts = Parts(target) if parts is None else parts
    return {name: entry.factory(target, parts) for name, entry in entries(names).items()}


class Traits(NamedTuple):
    reports_q: bool  # some sampled draft carried q, the distribution it was drawn from
    is_tree: bool  # it declares that it drafts trees (Drafter.drafts_trees)


def traits(drafter: Drafter, target, input_ids, max_new_tokens: int = 8, k: int = 3) -> Traits:
    """What a drafter is, read from the drafter: a short sampled generation on `target` (seed 0) whose
    drafts say whether it reports q, and its declared drafts_trees."""
    watch = Recorder(drafter)
    engine.generate(target, watch, input_ids, max_new_tokens, k=k, do_sample=True, seed=0, eos_token_id=-1)
    return Traits(any(d.q is not None for _, d in watch.drafts), bool(drafter.drafts_trees))
