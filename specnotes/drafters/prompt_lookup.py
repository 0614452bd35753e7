"""Prompt lookup: propose the tokens that followed the latest earlier occurrence of the sequence's tail.

A deterministic (point-mass) draft, so verifying it by sample-and-match is exact. Notebooks 02, 06, 07.
"""

from __future__ import annotations

import numpy as np

from specnotes import checks
from specnotes.drafters.base import Draft, Drafter, capped


class PromptLookup(Drafter):
    """n-gram lookup in the prompt and the text generated so far, with an adaptive draft length.

    The longest matching tail (up to max_ngram tokens) wins, and among its matches the most recent one
    with a full-length continuation.
    The draft length starts at num_tokens, grows by `grow` after a fully accepted round (up to
    max_tokens) and drops to one more than what was accepted after a rejection (at least min_tokens):
    long drafts only while they are paying off.

    A tail that matches on only `weak_ngram` tokens or fewer is weak evidence (a common word, a
    newline), so such a draft is capped at min_tokens whatever the history says.

    The defaults were tuned by replaying plain greedy outputs of notebook 07's copy and story prompts
    through the policy with the measured CPU verify-cost curve (a 3-token verify pass costs about a
    plain step there, an 11-token one about two): a 4-token tail finds the right place in a long prompt
    where a 3-token one finds an earlier, wrong copy; growing by 8 regains a long draft within two rounds
    after an edit point; and the weak-match cap stops paying two steps for a guess keyed on one token.
    Free-form text barely matches, so its drafts stay at min_tokens and cost about a plain step.
    """

    def __init__(self, max_ngram: int = 4, num_tokens: int = 10, adaptive: bool = True,
                 min_tokens: int = 2, max_tokens: int = 32, grow: int = 8, weak_ngram: int = 2):
        max_ngram = checks.whole(max_ngram, "max_ngram", scalar=True)
        max_tokens = checks.whole(max_tokens, "max_tokens", scalar=True)
        num_tokens = checks.whole(num_tokens, "num_tokens", high=max_tokens, scalar=True)
        min_tokens = checks.whole(min_tokens, "min_tokens (the shortest adaptive draft)", high=num_tokens,
                                  scalar=True)
        grow = checks.whole(grow, "grow", low=0, scalar=True)
        weak_ngram = checks.whole(weak_ngram, "weak_ngram", low=0, scalar=True)
        self.max_ngram, self.num_tokens, self.adaptive = max_ngram, num_tokens, adaptive
        self.min_tokens, self.max_tokens, self.grow = min_tokens, max_tokens, grow
        self.weak_ngram = weak_ngram
        self.length = num_tokens

    def reset(self, prompt: list[int]) -> None:
        self.length = self.num_tokens

    def lookup(self, tokens: list[int], limit: int) -> list[int]:
        """Up to `limit` tokens that followed the most recent earlier match of the longest tail n-gram."""
        return self.match(tokens, limit)[1]

    def match(self, tokens: list[int], limit: int) -> tuple[int, list[int]]:
        """(length of the matched tail, up to `limit` tokens that followed it); (0, []) without a match."""
        seq = np.asarray(tokens)
        n = len(seq)
        for size in range(min(self.max_ngram, n - 1), 0, -1):
            tail = seq[n - size:]
            # windows ending before the tail itself: starts 0 .. n-size-1
            windows = np.lib.stride_tricks.sliding_window_view(seq[:n - 1], size)
            hits = np.flatnonzero((windows == tail).all(axis=1))
            if hits.size:
                # the most recent match that still has `limit` tokens after it; failing that, the match
                # with the longest continuation (a recent match can run into the end of the sequence)
                available = n - (hits + size)
                full = np.flatnonzero(available >= limit)
                start = int(hits[full[-1]] if full.size else hits[np.argmax(available)]) + size
                return size, seq[start:start + limit].tolist()
        return 0, []

    def propose(self, tokens: list[int], k: int | None, sampler) -> Draft:
        # a lookup costs nothing per drafted token, so the length is our own policy below the cap k
        if not self.adaptive:
            draft = self.lookup(tokens, capped(self.num_tokens, k))
        else:
            size, draft = self.match(tokens, self.length)
            if size <= self.weak_ngram:
                draft = draft[:self.min_tokens]
        return Draft(draft[:k])

    def update(self, feedback) -> None:
        if not self.adaptive or not feedback.drafted:
            return
        if feedback.accepted == len(feedback.drafted):
            self.length = min(self.max_tokens, self.length + self.grow)
        else:
            self.length = max(self.min_tokens, feedback.accepted + 1)
