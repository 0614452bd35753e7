"""A tree drafter that guesses at random: the tests' tool for checking the tree rules are exact."""

from __future__ import annotations

import numpy as np

from specnotes import checks, tree
from specnotes.drafters.base import Draft, Drafter, capped


class RandomTree(Drafter):
    """Distinct random tokens in a fixed static-tree shape. Useless for speed, ideal for testing a sampling
    rule, since it produces rejections of every kind. Its depth is len(widths), cut to the engine's k."""

    drafts_trees = True

    def __init__(self, vocab: int, widths=(3, 2, 1), seed: int = 0):
        vocab = checks.whole(vocab, "vocab", scalar=True)
        widths = [checks.whole(w, "widths (each at most vocab)", high=vocab, scalar=True) for w in widths]
        self.vocab, self.widths = vocab, tuple(widths)
        self.rng = np.random.default_rng(checks.whole(seed, "seed", low=0, scalar=True))

    def propose(self, tokens: list[int], k: int | None, sampler) -> Draft:
        candidates = [self.rng.permutation(self.vocab)[:w].tolist() for w in self.widths]
        t = tree.static_tree(candidates, tree.default_choices(self.widths)).cut(capped(len(self.widths), k))
        return Draft(t.tokens, None, t.parents)
