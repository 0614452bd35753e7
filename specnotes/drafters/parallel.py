"""ParallelLite: parallel drafting, DFlash-style. One pass of a small layer on the target's hidden states
(specnotes.training.parallel.ParallelModel) guesses k tokens at once, so a round's drafting costs one
cheap pass whatever k is, where a chain drafter pays k. Notebooks 05 and 06.

The guesses are drawn independently, each from its own position's distribution: slot j does not see the
guesses before it, so q_j is exactly the distribution token j was drawn from (the rule needs nothing else)
and sampled drafts stay exact.
"""

from __future__ import annotations

from specnotes import checks
from specnotes.drafters.base import Draft, Drafter, capped
from specnotes.drafters.eagle import scored_head
from specnotes.training.eagle import VOCAB
from specnotes.training.parallel import load_parallel


class ParallelLite(Drafter):
    """Up to k guesses per round from one pass (k at most the network's block; the engine's k caps it).

    Like EagleLite it keeps its own one-layer KV cache over (feature, next token) pairs of the committed
    text: each round it feeds the pairs committed since the last one and k - 1 mask slots in the same
    pass, then drops the slots from its cache again."""

    needs = frozenset({"states"})

    def __init__(self, target, model="trained", k: int | None = None, vocab: int | None = VOCAB,
                 sampled: bool = False):
        """k: guesses per round (default: the network's block). vocab: score only the `vocab` tokens the
        target writes most often (as EagleLite), None every token. sampled: when the engine samples, draw
        each guess from its position's distribution and report it as q, instead of drafting the argmax."""
        if not isinstance(sampled, bool):
            raise TypeError(f"sampled must be True or False, got {sampled!r}")
        if isinstance(model, str) and model != "trained":
            raise ValueError(f"model must be 'trained', or a model from training.parallel.new_model or "
                             f"train_parallel, got {model!r}")
        self.model = load_parallel(target) if model == "trained" else model
        block = self.model.block
        self.k = block if k is None else checks.whole(k, f"k (at most the network's block, {block})",
                                                      high=block, scalar=True)
        if vocab is not None:
            vocab = checks.whole(vocab, "vocab", scalar=True)
        self.sampled = sampled
        self.cache, self.fed, self.states = None, 0, None
        self.subset = scored_head(target, self.model, vocab)

    def reset(self, prompt: list[int]) -> None:
        self.cache, self.fed, self.states = None, 0, None

    def _pick(self, rows, sampler):
        """(tokens (n,) on the device, q (n, V) or None) for n hidden rows: each row's top token, or a draw
        from its own processed distribution when sampled."""
        import torch

        if self.subset is None:
            scores = self.model.body.lm_head(rows).float()
        else:
            scores = (rows @ self.subset[1].T).float()
        if not (self.sampled and sampler.do_sample):
            best = scores.argmax(-1)
            return (best if self.subset is None else self.subset[0][best]), None
        full = scores
        if self.subset is not None:  # tokens outside the scored ones get no mass
            vocab = self.model.body.lm_head.weight.shape[0]
            full = torch.full((rows.shape[0], vocab), float("-inf"), device=rows.device).index_copy(
                1, self.subset[0], full)
        q = sampler.probs(full)
        return sampler.pick(q)[:, 0], q

    def propose(self, tokens: list[int], k: int | None, sampler) -> Draft:
        import torch

        if self.states is None:  # the first round: the prompt pass has not produced any states yet
            return Draft([])
        states, self.states = self.states, None
        m, n = states.shape[0], capped(self.k, k)
        device = states.device
        with torch.inference_mode():
            nxt = torch.tensor([tokens[-m:]], device=device)
            slots = list(range(max(n - 1, 0)))
            pos = torch.arange(self.fed, self.fed + m + len(slots), device=device)[None]
            h, self.cache = self.model.block_forward(states[None], nxt, slots, self.cache, pos,
                                                     use_cache=True)
            self.fed += m
            extra = self.cache.get_seq_length() - self.fed
            if extra:
                self.cache.crop(-extra)  # the slots are guesses, not committed text
            if n <= 0:
                return Draft([])
            drafted, q = self._pick(h[0, m - 1:], sampler)  # the last pair's guess, then each slot's
            return Draft(drafted.tolist(), q)  # the draft's one host sync

    def update(self, feedback) -> None:
        self.states = feedback.states
