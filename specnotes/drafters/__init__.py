"""Drafters: where the guesses come from. One file per drafter, all behind the Drafter protocol below.

The engine (specnotes.engine) calls them; notebooks 02, 06 and 07 compare them.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol


class Draft(NamedTuple):
    tokens: list[int]  # the proposed continuation, possibly empty
    q: object | None  # (len(tokens), V) torch tensor: the distribution each token was sampled from;
    #                   None for a deterministic (point-mass) draft


class Drafter(Protocol):
    """What the engine needs from a drafter. It owns its state (a KV cache, a suffix index, ...)."""

    def reset(self, prompt: list[int]) -> None:
        """Start a new generation from these prompt tokens."""

    def propose(self, tokens: list[int], k: int, sampler) -> Draft:
        """Propose up to k tokens to follow `tokens` (the whole sequence so far). `sampler` says how
        the engine samples (greedy or temperature/top-k/top-p) so a model drafter can match it."""

    def update(self, tokens: list[int], n_accepted: int) -> None:
        """The round is over: `tokens` is the whole sequence now, and n_accepted of the proposal were
        kept. Roll back whatever the rejected proposals left behind."""

    # Tree drafters (Medusa, EagleLite) set `tree = True` and implement propose(tokens, states) instead:
    # specnotes.tree.generate verifies their candidate trees and hands them the target's hidden states.
    # Optional: observe(tokens, inputs, predictions). When a drafter has it, the engine calls it after
    # each target pass with the sequence before the pass, the pass's input tokens and the target's argmax
    # after each of them (Lookahead builds its n-gram pool from these).


from specnotes.drafters.distilled import load_distilled_draft  # noqa: E402
from specnotes.drafters.draft_model import DraftModel  # noqa: E402
from specnotes.drafters.eagle import EagleLite  # noqa: E402
from specnotes.drafters.early_exit import EarlyExit  # noqa: E402
from specnotes.drafters.lookahead import Lookahead  # noqa: E402
from specnotes.drafters.medusa import Medusa  # noqa: E402
from specnotes.drafters.prompt_lookup import PromptLookup  # noqa: E402
from specnotes.drafters.suffix import Suffix  # noqa: E402

__all__ = ["Draft", "Drafter", "DraftModel", "EagleLite", "EarlyExit", "Lookahead", "Medusa", "PromptLookup",
           "Suffix", "load_distilled_draft"]
