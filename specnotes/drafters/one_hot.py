"""OneHot: any drafter's guesses verified as point masses, its q dropped, as engines without draft
probabilities do. Notebooks 04 and 09 use it beside vLLM's draft_model path.
"""

from __future__ import annotations

from specnotes.drafters.base import Draft, Wrapper
from specnotes.sampling import Sampler


class OneHot(Wrapper):
    """The inner drafter's guesses verified as point masses: its q is dropped, as in engines that pass no
    draft probabilities. Still exact, for any drafter: a sampled target keeps guess x with probability
    p(x) instead of min(1, p(x)/q(x)), and a rejection resamples p without x.

    greedy=True (the default) also has the inner drafter draft its argmax (vLLM's default,
    draft_sample_method="greedy"); greedy=False keeps its sampled guesses and only drops q."""

    def __init__(self, inner, greedy: bool = True):
        super().__init__(inner)
        if not isinstance(greedy, bool):
            raise TypeError(f"greedy must be True or False, got {greedy!r}")
        self.greedy, self._argmax = greedy, Sampler(do_sample=False)

    def propose(self, tokens: list[int], k: int | None, sampler) -> Draft:
        draft = self.inner.propose(tokens, k, self._argmax if self.greedy else sampler)
        return Draft(draft.tokens, None, draft.parents)
