"""The drafter protocol: what a drafter proposes (Draft), what the target's pass taught (Feedback), and
the three methods the engine calls (Drafter). Every drafter in this package subclasses Drafter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

# what a drafter may ask the engine to put in its Feedback (each costs a little, so only on request)
NEEDS = ("predictions", "states")


def capped(n: int, k: int | None) -> int:
    """n, or the cap k when it is smaller (k None: no cap)."""
    return n if k is None else min(n, k)


@dataclass(frozen=True)
class Draft:
    """One round's proposal. A chain (parents None): tokens[i] follows tokens[i-1]. A tree: parents[i] is
    the index of node i's parent (-1: the last committed token), parents listed first (specnotes.tree.Tree).

    q is (len(tokens), V): the distribution each chain token was sampled from, so the rejection rule can
    divide by it; None for point-mass drafts (lookups, greedy guesses, every tree here)."""

    tokens: list[int]
    q: object | None = None
    parents: list[int] | None = None

    @property
    def is_tree(self) -> bool:
        return self.parents is not None


@dataclass(frozen=True)
class Feedback:
    """What one round taught, handed to Drafter.update after the target's pass.

    tokens: the whole sequence now (the engine's own list: copy what you keep); before: its length when
    the round began (tokens[:before] is what the drafter proposed from). drafted: the proposal as judged
    (a tree's accepted branch, then its first-ranked line below), accepted: how many of it the target kept
    (a prefix).
    predictions: the target's argmax after each input of the pass (the last committed token, then each
    drafted token or tree node), only when the drafter's `needs` has "predictions".
    states: (m, d) the target's last hidden states at the m positions committed this round (the first
    round: the whole prompt too), the last of them the one whose logits chose the newest token; only when
    `needs` has "states" ((m, len(state_layers) * d) for a drafter that names state_layers: those layers'
    states side by side). rows: how many sequences shared the round's target pass (1 outside a batch;
    a batch's live rows in generate_batch), so a drafter can price its drafts against the pass it rides."""

    tokens: list[int]
    before: int
    drafted: list[int]
    accepted: int
    predictions: list[int] | None = None
    states: object | None = None
    rows: int = 1


class Drafter:
    """Where the guesses come from. The engine calls reset once per generation, then each round
    propose and, after the target's pass, update. The defaults do nothing, so a drafter overrides only
    what it uses; it owns its state (a KV cache, a suffix index, an n-gram pool, ...).

    k means one thing for every drafter: propose(tokens, k, sampler) returns at most k tokens (a tree: at
    most k levels deep); k=None sets no cap (engine.generate(k=None), the default). How many it proposes
    under the cap is the drafter's own policy: PromptLookup's adaptive length, AdaptiveK's schedule,
    DraftModel's own k if it was given one (else the engine's k, or 5 with no cap). The engine cuts every
    draft to the tokens left before max_new_tokens.

    A drafter that proposes trees declares drafts_trees = True, so the engine can check at start() that
    the verification rule judges trees."""

    needs: ClassVar[frozenset[str]] = frozenset()  # a subset of NEEDS
    drafts_trees: ClassVar[bool] = False
    state_layers: tuple[int, ...] | None = None  # with "states": which of the target's hidden states (indices
    #                                              into output_hidden_states; None: the last, after the norm)
    vocab_size: int | None = None  # a drafter that runs its own LM sets its vocabulary size: the engine
    #                                checks it is the target's (drafts must use the target's tokenizer)

    def reset(self, prompt: list[int]) -> None:
        """Start a new generation from these prompt tokens."""

    def propose(self, tokens: list[int], k: int | None, sampler) -> Draft:
        """Propose at most k tokens continuing `tokens` (k None: no cap). `tokens` is the whole sequence so
        far, the engine's own list: read it, never change it, copy what you keep.
        `sampler` (specnotes.sampling) says how the engine samples, so a model drafter can draw the same way
        and report q."""
        return Draft([])

    def update(self, feedback: Feedback) -> None:
        """The round is over: roll back whatever rejected guesses left behind, learn from the pass."""


class Wrapper(Drafter):
    """A drafter around another one (AdaptiveK, OneHot, the timing and test wrappers): it forwards reset,
    propose and update, and what the inner drafter needs, so a subclass overrides only what it changes."""

    def __init__(self, inner):
        if not isinstance(inner, Drafter):
            raise TypeError(f"{type(self).__name__} wraps a drafter object such as DraftModel(draft), got "
                            f"{inner!r}")
        self.inner = inner
        self.vocab_size, self.needs, self.drafts_trees = inner.vocab_size, inner.needs, inner.drafts_trees
        self.state_layers = inner.state_layers

    def reset(self, prompt: list[int]) -> None:
        self.inner.reset(prompt)

    def propose(self, tokens: list[int], k: int | None, sampler) -> Draft:
        return self.inner.propose(tokens, k, sampler)

    def update(self, feedback: Feedback) -> None:
        self.inner.update(feedback)


class Recorder(Wrapper):
    """The inner drafter, with every round's (context, draft) kept in `drafts`: what it proposed, and from
    what (the registry reads drafters' traits from them, paired_kept prices them)."""

    def __init__(self, inner):
        super().__init__(inner)
        self.drafts: list[tuple[list[int], Draft]] = []

    def propose(self, tokens: list[int], k: int | None, sampler) -> Draft:
        draft = self.inner.propose(tokens, k, sampler)
        self.drafts.append((list(tokens), draft))
        return draft
