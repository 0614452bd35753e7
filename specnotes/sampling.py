"""How tokens are chosen, in torch: the Sampler (greedy, or temperature/top-k/top-p) that the engine, the
verification rules (specnotes.verify) and the model drafters share, and the residual a rejection draws from.

The numpy twin, vectorised over many rounds for the toy, is specnotes.rules.
"""

from __future__ import annotations

from specnotes import checks


class Sampler:
    """How tokens are chosen: greedy, or sampling from the temperature/top-k/top-p processed
    distribution. Drafters use it too, so q is the distribution a draft was really drawn from."""

    def __init__(self, do_sample: bool = False, temperature: float = 1.0, top_k: int | None = None,
                 top_p: float | None = None, seed: int | None = None, device="cpu"):
        import torch

        # the checked settings, as plain Python numbers (a Fraction or numpy scalar would reach torch raw)
        do_sample, temperature, top_k, top_p, seed = checks.sampling(do_sample, temperature, top_k, top_p,
                                                                     seed)
        self.do_sample, self.temperature, self.top_k, self.top_p = do_sample, temperature, top_k, top_p
        self.generator = torch.Generator(device=device)
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(seed)

    def probs(self, logits):
        """(..., V) processed distribution; one-hot at the argmax when greedy."""
        import torch

        logits = logits.float()
        if not self.do_sample:
            return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
        logits = logits / self.temperature
        if self.top_k is not None and self.top_k < logits.shape[-1]:
            kth = torch.topk(logits, self.top_k, dim=-1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p is not None and self.top_p < 1:
            sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
            cum = torch.softmax(sorted_logits, -1).cumsum(-1)
            drop_sorted = cum - torch.softmax(sorted_logits, -1) >= self.top_p  # keep the token that crosses
            drop = drop_sorted.scatter(-1, order, drop_sorted)
            logits = logits.masked_fill(drop, float("-inf"))
        return torch.softmax(logits, -1)

    def draw(self, probs) -> int:
        """A token drawn from probs (V,): its argmax when greedy. One host sync (the int)."""
        return int(self.pick(probs))

    def pick(self, probs):
        """The same draw as draw(), left on the device as a (1,) tensor: no host sync, so a drafter can
        feed it straight back into its model."""
        import torch

        if not self.do_sample:
            return probs.argmax(-1, keepdim=True)
        return torch.multinomial(probs, 1, generator=self.generator)

    def uniform(self, n: int):
        import torch

        return torch.rand(n, generator=self.generator, device=self.generator.device)


def residual(p, q):
    """max(0, p - q) renormalized (rows); where it is empty, p (never sampled then: acceptance was certain).
    The torch twin of specnotes.rules.residual."""
    import torch

    r = torch.clamp(p - q, min=0)
    mass = r.sum(-1, keepdim=True)
    return torch.where(mass > 0, r / torch.where(mass > 0, mass, torch.ones_like(mass)), p)
