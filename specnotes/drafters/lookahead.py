"""Lookahead decoding, simplified: no draft model, only the target. Each verify pass also runs a few
guessed tokens; what the target predicts after them is a free Jacobi-iteration step. Every prediction
the target makes in a pass is stored as an n-gram (the n-1 tokens it saw, then its choice), and later
drafts are chained out of that pool. After Fu et al., 2024. Notebook 06.

The paper runs its lookahead window and its verification branch side by side in one pass with a custom
attention mask; here the guesses ride at the end of the draft under the ordinary causal mask, which keeps
the engine unchanged and the output exact (drafts are point masses, verified as usual).
"""

from __future__ import annotations

import numpy as np

from specnotes import checks
from specnotes.drafters.base import Draft, Drafter, capped


class Lookahead(Drafter):
    """Drafts chained from an n-gram pool filled with the target's own predictions.

    When the pool has no continuation for the tail, the draft is the Jacobi guess: the target's
    predictions from the last pass beyond the point it accepted, or, at the start, tokens from the prompt.
    """

    needs = frozenset({"predictions"})

    def __init__(self, n: int = 3, window: int = 4, max_tokens: int = 16, seed: int = 0):
        n = checks.whole(n, "n (the n-gram length)", low=2, scalar=True)
        window = checks.whole(window, "window", low=0, scalar=True)
        max_tokens = checks.whole(max_tokens, "max_tokens", scalar=True)
        seed = checks.whole(seed, "seed", low=0, scalar=True)
        self.n, self.window, self.max_tokens = n, window, max_tokens
        self.rng = np.random.default_rng(seed)
        self.pool: dict[tuple, int] = {}
        self.guess: list[int] = []
        self.prompt: list[int] = []

    def reset(self, prompt: list[int]) -> None:
        self.pool, self.guess, self.prompt = {}, [], list(prompt)

    def chain(self, tokens: list[int], limit: int) -> list[int]:
        """Follow the pool from the sequence's last n-1 tokens."""
        out: list[int] = []
        ctx = tuple(tokens[-(self.n - 1):])
        while len(out) < limit:
            nxt = self.pool.get(ctx)
            if nxt is None:
                break
            out.append(nxt)
            ctx = (*ctx[1:], nxt)
        return out

    def propose(self, tokens: list[int], k: int | None, sampler) -> Draft:
        draft = self.chain(tokens, capped(self.max_tokens, k))
        if not draft:
            draft = self.guess[: self.window]
            if len(draft) < self.window and self.prompt:
                fill = self.rng.choice(self.prompt, self.window - len(draft))
                draft = [*draft, *map(int, fill)]
        return Draft(draft[:k])

    def update(self, feedback) -> None:
        # the pool: each (n-1)-gram of [context, last token, drafts] maps to the target's prediction after
        # it; the Jacobi step: predictions past the accepted prefix (and the target's own next token) are
        # the next guesses for the positions after the new sequence end
        tokens, preds = feedback.tokens, feedback.predictions
        inputs = [tokens[feedback.before - 1], *feedback.drafted]  # the pass's inputs
        ctx = tokens[max(0, feedback.before - self.n + 1):feedback.before - 1] if self.n > 2 else []
        context = [*ctx, *inputs]  # the n-1 tokens ending at each input
        for j, pred in enumerate(preds[:len(inputs)]):
            end = len(ctx) + j + 1
            if end >= self.n - 1:
                self.pool[tuple(context[end - (self.n - 1):end])] = pred
        self.guess = list(preds[feedback.accepted + 1:])
