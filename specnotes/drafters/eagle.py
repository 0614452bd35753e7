"""EagleLite: an EAGLE-style feature drafter. Its one small layer (specnotes.training.eagle.EagleModel)
reads (the target's hidden state at position t, the embedding of token t+1) and predicts the hidden state
at t+1; the target's own LM head turns that into a guess for token t+2, and feeding its own prediction back
drafts a chain. Notebook 06, part 2.

Differences from EAGLE, for a CPU course: the draft is a chain (EAGLE-2 grows a dynamic tree), optionally
cut short when the draft is unsure; the network's other differences, its training and its weights are in
specnotes.training.eagle.
"""

from __future__ import annotations

from specnotes import checks
from specnotes.drafters.base import Draft, Drafter, capped
from specnotes.placement import device_of
from specnotes.training.eagle import VOCAB, load_eagle, scored_tokens


def scored_head(target, model, vocab: int | None):
    """(token ids, their rows of the LM head), both on the network's device, for a feature drafter that
    scores only the `vocab` tokens the target writes most often; None to score every token."""
    ids = scored_tokens(target, vocab)
    if ids is None:
        return None
    import torch

    ids = torch.as_tensor(ids, device=device_of(model))
    return ids, model.body.lm_head.weight[ids].detach()


class EagleLite(Drafter):
    """Chain drafting from the target's hidden states: up to k guesses per round (the engine's k caps
    it; fewer, or none, when min_confidence stops the chain).

    The draft keeps its own one-layer KV cache over (feature, next token) pairs of the committed text;
    each round it is fed the pairs committed since the last round, drafts k tokens, then drops the
    drafted positions from its cache again."""

    needs = frozenset({"states"})  # the engine hands the target's hidden states to update()
    load = staticmethod(load_eagle)  # the committed (or quick-trained) network for model="trained"

    def __init__(self, target, model="trained", k: int = 3, vocab: int | None = VOCAB,
                 min_confidence: float | None = None, sampled: bool = False):
        """vocab: an int n scores only the n tokens the target writes most often (distill.frequent_tokens;
        the committed weights were trained over VOCAB of them), cutting the LM-head read of each draft
        step by V / n; None scores every token (also what a target too small for those ids gets).
        min_confidence: draft a token only while its probability under the draft (over the scored
        tokens) is at least this; a round can then draft nothing and costs one plain target step.
        sampled: when the engine samples, draw each guess from the draft's distribution (processed as the
        target's is) and report it as q, instead of drafting the argmax as a point mass."""

        if not isinstance(sampled, bool):
            raise TypeError(f"sampled must be True or False, got {sampled!r}")
        self.sampled = sampled

        k = checks.whole(k, "k", scalar=True)
        if min_confidence is not None:
            min_confidence = checks.probability(min_confidence, "min_confidence", high_open=True, scalar=True)
        if vocab is not None:
            vocab = checks.whole(vocab, "vocab", scalar=True)
        if isinstance(model, str) and model != "trained":
            raise ValueError(f"model must be 'trained', or a model from new_model/train_eagle, got {model!r}")
        self.model = type(self).load(target) if model == "trained" else model
        self.k = k
        self.min_confidence = min_confidence
        self.cache = None
        self.fed = 0
        self.states = None  # the target's hidden states at the positions committed last round
        self.subset = scored_head(target, self.model, vocab)

    def _pick(self, h, logits, sampler) -> tuple[object, bool, object]:
        """The draft's guess as a (1,) tensor on the device (its top token, or a draw when sampled), whether
        it clears min_confidence, and the distribution it was drawn from (None for the argmax). Only the
        confidence gate reads a value on the host."""
        import torch

        scores = logits[0, -1] if self.subset is None else h[0, -1] @ self.subset[1].T
        q = None
        if self.sampled and sampler.do_sample:
            full = scores.float()
            if self.subset is not None:  # tokens outside the scored ones get no mass
                full = torch.full((self.model.body.lm_head.weight.shape[0],), float("-inf"),
                                  device=scores.device).index_copy(0, self.subset[0], scores.float())
            q = sampler.probs(full)
            token = sampler.pick(q)
            best = token if self.subset is None else (self.subset[0] == token).int().argmax(-1, keepdim=True)
        else:
            best = scores.argmax(-1, keepdim=True)
            token = best if self.subset is None else self.subset[0][best]
        sure = (self.min_confidence is None
                or float(torch.softmax(scores.float(), -1)[best]) >= self.min_confidence)
        return token, sure, q

    def reset(self, prompt: list[int]) -> None:
        self.cache, self.fed, self.states = None, 0, None

    def propose(self, tokens: list[int], k: int | None, sampler) -> Draft:
        import torch

        if self.states is None:  # the first round: the prompt pass has not produced any states yet
            return Draft([])
        states, self.states = self.states, None
        m = states.shape[0]
        device = states.device
        with torch.inference_mode():
            # pair each new committed feature (positions n-m-1 .. n-2) with the token after it
            nxt = torch.tensor([tokens[-m:]], device=device)
            pos = torch.arange(self.fed, self.fed + m, device=device)[None]
            h, logits, self.cache = self.model(self.model.features_of(states[None]), nxt, self.cache, pos,
                                               use_cache=True, with_logits=self.subset is None)
            self.fed += m
            token, sure, q = self._pick(h, logits, sampler)
            drafted = [token] if sure and capped(self.k, k) > 0 else []  # (1,) tensors, kept on the device
            qs = [q] if drafted else []
            feat = h[:, -1:]
            while sure and len(drafted) < capped(self.k, k):
                pos = torch.tensor([[self.fed + len(drafted) - 1]], device=device)
                feat, logits, self.cache = self.model(feat, drafted[-1][None], self.cache, pos,
                                                      use_cache=True, with_logits=self.subset is None)
                token, sure, q = self._pick(feat, logits, sampler)
                if sure:
                    drafted.append(token)
                    qs.append(q)
            extra = self.cache.get_seq_length() - self.fed
            if extra:
                self.cache.crop(-extra)  # the drafted positions are guesses, not committed text
            tokens_out = torch.cat(drafted).tolist() if drafted else []  # the draft's one host sync
        return Draft(tokens_out, torch.stack(qs) if qs and qs[0] is not None else None)

    def update(self, feedback) -> None:
        self.states = feedback.states
