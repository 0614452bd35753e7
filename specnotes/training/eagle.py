"""EagleLite's network: one small decoder layer that reads (the target's hidden state at position t, the
embedding of token t+1) and predicts the hidden state at t+1, which the target's own LM head turns into a
guess for token t+2; its training and its weights. The drafter that chains its guesses is
specnotes.drafters.eagle.EagleLite. Notebook 06, part 2.

Differences from EAGLE, for a CPU course: the features are the target's last hidden states after the
final norm (EAGLE takes them before it) and the layer starts as a copy of the target's last layer. Trained
on the target's own greedy answers (both self-distillation sets) with the target frozen and its hidden
states cached: a feature-regression loss plus a KD loss against the target's distribution, which the LM
head gives from the cached next hidden state.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from specnotes import distill, weights
from specnotes.passes import cache_kwarg, returned_cache
from specnotes.placement import device_of, follow
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

    def features_of(self, states):
        """The feature this layer reads from the target's states (as the engine hands them): here the
        states themselves; Eagle3Model fuses several layers' states into one."""
        return states

    def forward(self, features, tokens, cache=None, position_ids=None, use_cache=False, with_logits=True,
                attention_mask=None):
        """features (B, T, d) at positions t, tokens (B, T) at t+1 -> (predicted features at t+1
        (B, T, d), logits (B, T, V) for token t+2, cache). attention_mask: a 4D additive mask for a
        training pass that is not plainly causal (Eagle3Model's training-time test)."""
        emb = self.body.model.embed_tokens(tokens)
        x = self.fc(torch.cat([features.to(emb.dtype), emb], -1))
        out = self.body.model(inputs_embeds=x, position_ids=position_ids, use_cache=use_cache,
                              attention_mask=attention_mask, **{cache_kwarg(type(self.body.model)): cache})
        h = out.last_hidden_state
        logits = self.body.lm_head(h[:, -1:] if use_cache else h) if with_logits else None
        return h, logits, returned_cache(out)


def new_model(target) -> EagleModel:
    """An untrained EagleLite around `target`, on its device and in its dtype."""
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


class FeatureData(NamedTuple):
    """What a feature drafter trains on, on the training device: the target's cached states, the windows'
    tokens and loss mask, and the rows of the target's LM head it scores (fp32)."""

    hidden: torch.Tensor  # (N, L, width) float16: the states the drafter is handed, at every position
    tokens: torch.Tensor  # (N, L)
    mask: torch.Tensor  # (N, L) bool: the target's own text
    head: torch.Tensor  # (V', d): the scored tokens' rows of the LM head


def train_features(target, build, make_loss, steps: int, seconds: float | None, data, vocab: int | None,
                   batch: int, lr: float, desc: str, save_to: Path | None, meta: dict, progress: bool,
                   layers: tuple[int, ...] | None = None):
    """The training the feature drafters share (EagleLite, ParallelLite, Eagle3Lite): the target's states
    over `data` (a Windows, a list of them, or None for train_windows()), cached (distill.hidden_states;
    `layers` as there), then make_loss(model, FeatureData) -> loss_fn(window indices) fitted by
    distill.fit in fp32 around the target (weights.train_in_fp32, which saves to `save_to` with `meta`).
    Both the teacher and the draft score the `vocab` tokens the drafter will score (None: all of them),
    which makes a step several times cheaper than a full-vocabulary head. Returns (model, TrainLog)."""
    parts = train_windows() if data is None else ([data] if isinstance(data, distill.Windows) else list(data))
    ids = scored_tokens(target, vocab)

    def fit(model, work):
        device = device_of(work)
        hidden = torch.cat([torch.as_tensor(distill.hidden_states(work, w.inputs, progress=progress,
                                                                 layers=layers))
                            for w in parts]).to(device)
        tokens = torch.as_tensor(np.concatenate([w.inputs for w in parts]), device=device)
        mask = torch.as_tensor(np.concatenate([w.mask for w in parts]), device=device)
        head = model.body.lm_head.weight.detach().float()
        head = head if ids is None else head[torch.as_tensor(ids, device=device)]
        loss_fn = make_loss(model, FeatureData(hidden, tokens, mask, head))
        model.train()
        log = distill.fit([p for p in model.parameters() if p.requires_grad], loss_fn, len(tokens), steps,
                          seconds, batch=batch, lr=lr, desc=desc, progress=progress)
        model.eval()
        return log

    meta = {"vocab": None if ids is None else len(ids), **meta, "windows": sum(len(w.inputs) for w in parts)}
    return weights.train_in_fp32(target, build, fit, save_to, meta)


def train_eagle(target, steps: int = 600, seconds: float | None = None, data=None, vocab: int | None = VOCAB,
                batch: int = 8, lr: float = 2e-3, feature_weight: float = 0.1, save_to: Path | None = None,
                progress: bool = True):
    """Fit EagleLite on windows of `data` (a Windows or a list of them; default train_windows()), in fp32:
    from (h_t, token_{t+1}) predict h_{t+1} (smooth L1) and the target's distribution of token t+2 (KD).

    The teacher distribution needs no extra pass: it is the target's LM head applied to the cached hidden
    state h_{t+1}. Both sides score the `vocab` tokens the drafter will score (None: all of them), which
    also makes a step several times cheaper than a full-vocabulary head. Returns (model, TrainLog)."""

    def make_loss(model, d: FeatureData):
        def loss_fn(idx):
            idx = torch.as_tensor(idx, device=d.tokens.device)
            pred, _, _ = model(d.hidden[idx, :-1].float(), d.tokens[idx, 1:], with_logits=False)
            truth = d.hidden[idx, 1:].float()
            # position t predicts feature t+1 and, through the head, token t+2
            with torch.no_grad():
                teacher = torch.softmax(truth @ d.head.T, -1)
            per_pos = -(teacher * torch.log_softmax(pred @ d.head.T, -1)).sum(-1)
            reg = torch.nn.functional.smooth_l1_loss(pred, truth, reduction="none").mean(-1)
            valid = d.mask[idx, 1:].float()
            return ((per_pos + feature_weight * reg) * valid).sum() / valid.sum().clamp_min(1)
        return loss_fn

    return train_features(target, new_model, make_loss, steps, seconds, data, vocab, batch, lr,
                          "training EagleLite", save_to, {}, progress)


def load_eagle(target, quick_seconds: float = 30.0, progress: bool = True):
    """The trained EagleLite for `target`, frozen (weights.load_or_train): the committed one when it was
    trained for a target of its sizes, else one cached for this target, else a quick one (30 s on the
    first 64 windows of the small self-distillation set) trained and cached. A target with another
    vocabulary than SmolLM2's gets a ValueError that says what to pass instead."""
    return weights.load_or_train(
        new_model(target), target, what="EagleLite weights", committed=FILE, cached="eagle-lite",
        train=functools.partial(train_eagle, target), seconds=quick_seconds, progress=progress,
        advice="pass model=train_eagle(target, data=...)[0] (specnotes.training.eagle) with "
               "distill.windows of this target's own text, or model=new_model(target) for an untrained one")
