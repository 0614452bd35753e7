"""A separate, smaller causal LM as the drafter: it keeps its own KV cache and, when sampling, reports q.

Notebooks 02, 06 and 07 use it; any model with the target's vocabulary works.
"""

from __future__ import annotations

from specnotes import checks
from specnotes.drafters.base import Draft, Drafter, capped
from specnotes.passes import forward_pass
from specnotes.placement import device_of

DEFAULT_K = 5  # tokens a round when neither the draft model nor the engine says how many


class DraftModel(Drafter):
    """Drafts up to k tokens autoregressively with its own model and KV cache, sampling the way the engine
    samples, and returns q: the processed distribution each token was actually drawn from (under greedy
    no q is needed, and none is built).

    k: its own draft length, capped by the engine's k; None (the default) drafts the engine's k, or
    DEFAULT_K when the engine sets no cap. stop_below: a confidence stop. Drafting ends early,
    after the first token whose probability under the draft's own softmax falls below this threshold
    (transformers' assistant_confidence_threshold works alike).

    The drafted tokens stay on the model's device until the draft is done: one host sync per round, not
    one per token (the confidence stop needs one per token, to decide whether to go on)."""

    def __init__(self, model, stop_below: float | None = None, k: int | None = None):
        if stop_below is not None:
            stop_below = checks.probability(stop_below, "stop_below (a probability threshold)",
                                            high_open=True, scalar=True)
        self.model = model
        self.vocab_size = model.config.vocab_size
        self.stop_below = stop_below
        self.k = None if k is None else checks.whole(k, "k (the draft model's own draft length)", scalar=True)
        self.cache = None
        self.cached = 0  # how many tokens of the sequence the cache holds

    def reset(self, prompt: list[int]) -> None:
        self.cache, self.cached = None, 0

    def _feed(self, ids):
        """Run ids (1, n) on top of the cache; return the last position's logits."""
        logits, self.cache = forward_pass(self.model, ids, self.cache, keep=1)
        self.cached += ids.shape[1]
        return logits[0, -1]

    def propose(self, tokens: list[int], k: int | None, sampler) -> Draft:
        import torch

        k = (DEFAULT_K if k is None else k) if self.k is None else capped(self.k, k)
        if k <= 0:
            return Draft([], None)
        picked, qs = [], []
        with torch.inference_mode():
            logits = self._feed(torch.tensor([tokens[self.cached:]], device=device_of(self.model)))
            for i in range(k):
                q = sampler.probs(logits) if sampler.do_sample else logits  # greedy: argmax of the logits
                x = sampler.pick(q)  # (1,), on the device: the argmax under greedy
                picked.append(x)
                if sampler.do_sample:
                    qs.append(q)
                # confidence is the draft's own softmax (under greedy q is one-hot, so it cannot say)
                if self.stop_below is not None:
                    if float(torch.softmax(logits.float(), -1)[x]) < self.stop_below:
                        break
                if i < k - 1:
                    logits = self._feed(x[None])
        drafted = torch.cat(picked).tolist()  # the draft's one host sync
        return Draft(drafted, torch.stack(qs) if qs else None)
    def update(self, feedback) -> None:
        # the cache may hold drafted tokens that were rejected: keep only a prefix of the sequence
        # that it is certain to share (everything before the first rejected draft)
        keep = min(self.cached, len(feedback.tokens) - 1)
        if self.cache is not None and self.cached > keep:
            self.cache.crop(keep - self.cached)
            self.cached = keep
