"""EagleLite: an EAGLE-style feature drafter. One small decoder layer reads (the target's hidden state at
position t, the embedding of token t+1), predicts the hidden state at t+1, and the target's own LM head
turns that into a guess for token t+2; feeding its own prediction back drafts a chain. Notebook 06,
part 2.

Differences from EAGLE, for a CPU course: the features are the target's last hidden states after the
final norm (EAGLE takes them before it), the layer starts as a copy of the target's last layer, and the
draft is a chain (EAGLE-2 grows a dynamic tree), optionally cut short when the draft is unsure. Trained
on the target's own greedy answers (both self-distillation sets) with the target frozen and its hidden
states cached: a feature-regression loss plus a KD loss against the target's distribution, which the LM
head gives from the cached next hidden state.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch

from specnotes import distill, weights
from specnotes.drafters.base import Draft, Drafter
from specnotes.drafters.medusa import hidden_states
from specnotes.surgery import student

FILE = "eagle-lite.safetensors"
VOCAB = 4096  # trained and drafted over the 4,096 tokens the target writes most often (98% of them)


class EagleModel(torch.nn.Module):
    """One decoder layer (a copy of the target's last) that reads [hidden state at t | embedding of token
    t+1], projected back to the hidden size, and predicts the hidden state at t+1."""

    def __init__(self, target):
        super().__init__()
        last = target.config.num_hidden_layers - 1
        self.body = student(target, (last,))  # one decoder layer + a norm, embeddings and head shared
        d = target.config.hidden_size
        self.fc = torch.nn.Linear(2 * d, d, bias=False)
        with torch.no_grad():  # start as "the feature itself": [I | 0]
            self.fc.weight.zero_()
            self.fc.weight[:, :d] = torch.eye(d)

    def forward(self, features, tokens, cache=None, position_ids=None, use_cache=False, with_logits=True):
        """features (B, T, d) at positions t, tokens (B, T) at t+1 -> (predicted features at t+1
        (B, T, d), logits (B, T, V) for token t+2, cache)."""
        from specnotes.passes import cache_kwarg, returned_cache

        emb = self.body.model.embed_tokens(tokens)
        x = self.fc(torch.cat([features.to(emb.dtype), emb], -1))
        out = self.body.model(inputs_embeds=x, position_ids=position_ids, use_cache=use_cache,
                              **{cache_kwarg(type(self.body.model)): cache})
        h = out.last_hidden_state
        logits = self.body.lm_head(h[:, -1:] if use_cache else h) if with_logits else None
        return h, logits, returned_cache(out)


def new_model(target) -> EagleModel:
    """An untrained EagleLite around `target`, on its device and in its dtype."""
    from specnotes.placement import follow

    return follow(target, EagleModel(target))


def committed_path() -> Path:
    return weights.DATA / FILE


def scored_tokens(target, vocab: int | None):
    """The token ids EagleLite scores: the `vocab` the target writes most often, or None for all of them
    (also when the target's vocabulary is too small to hold those ids, as in the tests' tiny models)."""
    if vocab is None:
        return None
    ids = distill.frequent_tokens(int(vocab))
    return None if ids.max() >= target.config.vocab_size or len(ids) >= target.config.vocab_size else ids


def train_windows() -> list:
    """EagleLite's training text: the self-distillation set and the larger free-form one, both the
    target's own greedy answers."""
    return [distill.self_windows(), distill.self_windows(name="more")]


def train_eagle(target, steps: int = 600, seconds: float | None = None, data=None, vocab: int | None = VOCAB,
                batch: int = 8, lr: float = 2e-3, feature_weight: float = 0.1, save_to: Path | None = None,
                progress: bool = True):
    """Fit EagleLite on windows of `data` (a Windows or a list of them; default train_windows()): from
    (h_t, token_{t+1}) predict h_{t+1} (smooth L1) and the target's distribution of token t+2 (KD).

    The teacher distribution needs no extra pass: it is the target's LM head applied to the cached hidden
    state h_{t+1}. Both sides score the `vocab` tokens the drafter will score (None: all of them), which
    also makes a step several times cheaper than a full-vocabulary head. Returns (model, TrainLog)."""
    from specnotes.placement import device_of

    # train in fp32 around an fp32 twin (a 16-bit target's shared embeddings and head stay untouched)
    work = distill.fp32_twin(target)
    device = device_of(work)
    parts = train_windows() if data is None else ([data] if isinstance(data, distill.Windows) else list(data))
    hidden = torch.cat([torch.as_tensor(hidden_states(work, w.inputs, progress=progress)) for w in parts])
    hidden = hidden.to(device)
    tokens = torch.as_tensor(np.concatenate([w.inputs for w in parts]), device=device)
    mask = torch.as_tensor(np.concatenate([w.mask for w in parts]), device=device)
    model = new_model(work)
    trainable = [p for p in model.parameters() if p.requires_grad]
    ids = scored_tokens(target, vocab)
    head = model.body.lm_head.weight.detach().float()
    head = head if ids is None else head[torch.as_tensor(ids, device=device)]

    def loss_fn(idx):
        idx = torch.as_tensor(idx, device=device)
        pred, _, _ = model(hidden[idx, :-1].float(), tokens[idx, 1:], with_logits=False)
        truth = hidden[idx, 1:].float()
        # position t predicts feature t+1 and, through the head, token t+2
        with torch.no_grad():
            teacher = torch.softmax(truth @ head.T, -1)
        per_pos = -(teacher * torch.log_softmax(pred @ head.T, -1)).sum(-1)
        reg = torch.nn.functional.smooth_l1_loss(pred, truth, reduction="none").mean(-1)
        valid = mask[idx, 1:].float()
        return ((per_pos + feature_weight * reg) * valid).sum() / valid.sum().clamp_min(1)

    model.train()
    log = distill.fit(trainable, loss_fn, len(tokens), steps, seconds, batch=batch, lr=lr,
                      desc="training EagleLite", progress=progress)
    model.eval()
    if work is not target:
        model = weights.transfer(model, new_model(target))
    if save_to is not None:
        weights.save(model, save_to, {**log.summary(), "vocab": None if ids is None else len(ids),
                                      "windows": len(tokens)}, target=target)
    return weights.freeze(model), log


def load_eagle(target, quick_seconds: float = 30.0, progress: bool = True):
    """The trained EagleLite for `target`, frozen (weights.load_or_train): the committed one when it was
    trained for a target of its sizes, else one cached for this target, else a quick one (30 s on the
    first 64 windows of the small self-distillation set) trained and cached. A target with another
    vocabulary than SmolLM2's gets a ValueError that says what to pass instead."""
    return weights.load_or_train(
        new_model(target), target, what="EagleLite weights", committed=FILE, cached="eagle-lite",
        train=functools.partial(train_eagle, target), seconds=quick_seconds, progress=progress,
        advice="pass model=train_eagle(target, data=...)[0] (specnotes.drafters.eagle) with "
               "distill.windows of this target's own text, or model=new_model(target) for an untrained one")


class EagleLite(Drafter):
    """Chain drafting from the target's hidden states: up to k guesses per round (the engine's k caps
    it; fewer, or none, when min_confidence stops the chain).

    The draft keeps its own one-layer KV cache over (feature, next token) pairs of the committed text;
    each round it is fed the pairs committed since the last round, drafts k tokens, then drops the
    drafted positions from its cache again."""

    needs = frozenset({"states"})  # the engine hands the target's hidden states to update()

    def __init__(self, target, model="trained", k: int = 3, vocab: int | None = VOCAB,
                 min_confidence: float | None = None, sampled: bool = False):
        """vocab: an int n scores only the n tokens the target writes most often (distill.frequent_tokens;
        the committed weights were trained over VOCAB of them), cutting the LM-head read of each draft
        step by V / n; None scores every token (also what a target too small for those ids gets).
        min_confidence: draft a token only while its probability under the draft (over the scored
        tokens) is at least this; a round can then draft nothing and costs one plain target step.
        sampled: when the engine samples, draw each guess from the draft's distribution (processed as the
        target's is) and report it as q, instead of drafting the argmax as a point mass."""
        from specnotes import checks

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
        self.model = load_eagle(target) if model == "trained" else model
        self.k = k
        self.min_confidence = min_confidence
        self.cache = None
        self.fed = 0
        self.states = None  # the target's hidden states at the positions committed last round
        self.subset = None
        ids = scored_tokens(target, vocab)
        if ids is not None:
            import torch

            from specnotes.placement import device_of

            ids = torch.as_tensor(ids, device=device_of(self.model))
            self.subset = (ids, self.model.body.lm_head.weight[ids].detach())

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

    def propose(self, tokens: list[int], k: int, sampler) -> Draft:
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
            h, logits, self.cache = self.model(states[None], nxt, self.cache, pos, use_cache=True,
                                               with_logits=self.subset is None)
            self.fed += m
            token, sure, q = self._pick(h, logits, sampler)
            drafted = [token] if sure and k > 0 else []  # (1,) tensors, kept on the device
            qs = [q] if drafted else []
            feat = h[:, -1:]
            while sure and len(drafted) < min(self.k, k):
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
