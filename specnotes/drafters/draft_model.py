"""A separate, smaller causal LM as the drafter: it keeps its own KV cache and reports its q.

Notebooks 02, 06 and 07 use it; any model with the target's vocabulary works.
"""

from __future__ import annotations

from specnotes.drafters.base import Draft, Drafter


class DraftModel(Drafter):
    """Drafts k tokens autoregressively with its own model and KV cache, sampling the way the engine
    samples, and returns q: the processed distribution each token was actually drawn from.

    stop_below: a confidence stop. Drafting ends early, after the first token whose probability under
    the draft's own softmax falls below this threshold (transformers' assistant_confidence_threshold
    works alike)."""

    def __init__(self, model, stop_below: float | None = None):
        if stop_below is not None:
            from specnotes import checks

            stop_below = checks.probability(stop_below, "stop_below (a probability threshold)",
                                            high_open=True, scalar=True)
        self.model = model
        self.vocab_size = model.config.vocab_size
        self.stop_below = stop_below
        self.cache = None
        self.cached = 0  # how many tokens of the sequence the cache holds

    def reset(self, prompt: list[int]) -> None:
        self.cache, self.cached = None, 0

    def _feed(self, tokens: list[int]):
        """Run the tokens the cache has not seen yet; return the last position's logits."""
        import torch

        from specnotes.placement import device_of
        from specnotes.passes import forward_pass

        device = device_of(self.model)
        new = torch.tensor([tokens[self.cached:]], device=device)
        logits, self.cache = forward_pass(self.model, new, self.cache, keep=1)
        self.cached = len(tokens)
        return logits[0, -1]

    def propose(self, tokens: list[int], k: int, sampler) -> Draft:
        import torch

        if k <= 0:
            return Draft([], None)
        drafted, qs = [], []
        with torch.inference_mode():
            logits = self._feed(tokens)
            seq = list(tokens)
            for i in range(k):
                q = sampler.probs(logits)
                x = sampler.draw(q)
                drafted.append(x)
                qs.append(q)
                # confidence is the draft's own softmax (under greedy q is one-hot, so it cannot say)
                if self.stop_below is not None:
                    if float(torch.softmax(logits.float(), -1)[x]) < self.stop_below:
                        break
                if i < k - 1:
                    seq.append(x)
                    logits = self._feed(seq)
        return Draft(drafted, torch.stack(qs))

    def update(self, feedback) -> None:
        # the cache may hold drafted tokens that were rejected: keep only a prefix of the sequence
        # that it is certain to share (everything before the first rejected draft)
        keep = min(self.cached, len(feedback.tokens) - 1)
        if self.cache is not None and self.cached > keep:
            self.cache.crop(keep - self.cached)
            self.cached = keep
