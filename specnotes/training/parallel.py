"""ParallelLite's network: a DFlash-style block head on the target's hidden states, beside EagleLite. It
reads the committed text as EagleLite does (the target's hidden state at t, the embedding of token t+1),
then k - 1 mask slots at the positions after it, and one pass of its one layer guesses every drafted
token at once: the last committed pair's output guesses token t+2, slot j guesses token t+2+j. Its
training and its weights; the drafter is specnotes.drafters.parallel.ParallelLite. Notebooks 05 and 06.

Why a block head on the target's states, and not PARD's mask-token fine-tuning of the distilled draft:
the distilled draft's pass costs about 0.2 plain steps on this CPU (two full layers and the whole
vocabulary's head), EagleLite's about 0.07, so a parallel drafter built on EagleLite's layer pays the
cheaper pass once per round. It also trains on the same cached hidden states, from the same starting
layer, so the parallel head and EagleLite's chain are compared at one size. The price of drafting in
parallel: slot j never sees the guesses before it, only its position, so its acceptance decays faster
with depth than a chain's.

Training (PARD and DFlash do the same): one pass per window holds the committed pairs, causal, and
after them `anchors` blocks of k - 1 slots; the slots of the block anchored at t sit at positions t+1..
t+k-1 and see the pairs up to t and their own block's earlier slots: exactly what the drafting pass sees
when the text is committed up to t (block_layout). The loss is the KD loss against the target's
distribution at each guessed position, which the target's LM head gives from the cached hidden states.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch

from specnotes import checks, weights
from specnotes.passes import cache_kwarg, returned_cache
from specnotes.placement import follow
from specnotes.training.eagle import VOCAB, EagleModel, train_features

FILE = "parallel-lite.safetensors"
BLOCK = 4  # tokens guessed per pass: the last pair's guess and 3 slots


class ParallelModel(EagleModel):
    """EagleLite's layer and input projection, plus one learned input vector per mask slot."""

    def __init__(self, target, block: int = BLOCK):
        super().__init__(target)
        self.block = checks.whole(block, "block (tokens guessed per pass)", low=2, scalar=True)
        emb = self.body.model.embed_tokens.weight.detach()
        # each slot starts as the mean token embedding: "some token here", its place learned in training
        self.slots = torch.nn.Parameter(emb.float().mean(0).repeat(self.block - 1, 1).to(emb.dtype))

    def block_forward(self, features, tokens, slot_ids=None, cache=None, position_ids=None, use_cache=False,
                      attention_mask=None):
        """features (B, T, d) at t, tokens (B, T) at t+1, then one slot row per entry of slot_ids (which
        slot's input it takes) -> (hidden (B, T + len(slot_ids), d) after the final norm, cache)."""
        emb = self.body.model.embed_tokens(tokens)
        x = self.fc(torch.cat([features.to(emb.dtype), emb], -1))
        if slot_ids is not None and len(slot_ids):
            slots = self.slots[torch.as_tensor(slot_ids, device=x.device)].to(x.dtype)
            x = torch.cat([x, slots.expand(x.shape[0], -1, -1)], 1)
        out = self.body.model(inputs_embeds=x, position_ids=position_ids, use_cache=use_cache,
                              attention_mask=attention_mask, **{cache_kwarg(type(self.body.model)): cache})
        return out.last_hidden_state, returned_cache(out)


def new_model(target, block: int = BLOCK) -> ParallelModel:
    """An untrained ParallelLite network around `target`, on its device and in its dtype."""
    return follow(target, ParallelModel(target, block))


def committed_path() -> Path:
    return weights.DATA / FILE


def block_layout(length: int, anchors, block: int) -> tuple[np.ndarray, np.ndarray]:
    """One training pass: `length` committed pairs, then block - 1 slots for each anchor t (0 <= t <
    length). Returns (positions (Q,), see (Q, Q) bool: row i may attend to column i), Q = length +
    len(anchors) * (block - 1). Pairs are causal; the slots of anchor t sit at t+1 .. t+block-1 and see the
    pairs 0..t and their own block's slots up to themselves, never another block's."""
    anchors = np.asarray(anchors, dtype=np.int64).reshape(-1)
    s = block - 1
    if anchors.size and (anchors.min() < 0 or anchors.max() >= length):
        raise ValueError(f"anchors must lie in 0..{length - 1}, got {anchors.min()}..{anchors.max()}")
    q = length + anchors.size * s
    positions = np.concatenate([np.arange(length), (anchors[:, None] + 1 + np.arange(s)).reshape(-1)])
    see = np.zeros((q, q), dtype=bool)
    see[:length, :length] = np.tril(np.ones((length, length), dtype=bool))
    see[length:, :length] = np.arange(length)[None, :] <= np.repeat(anchors, s)[:, None]
    see[length:, length:] = np.kron(np.eye(anchors.size, dtype=bool), np.tril(np.ones((s, s), dtype=bool)))
    return positions, see


def additive(see: np.ndarray, dtype, device):
    """(1, 1, Q, Q) additive attention mask: 0 where `see`, the dtype's minimum elsewhere."""
    mask = torch.zeros(see.shape, dtype=dtype)
    mask.masked_fill_(torch.from_numpy(~see), torch.finfo(dtype).min)
    return mask[None, None].to(device)


def train_parallel(target, steps: int = 1500, seconds: float | None = None, data=None,
                   vocab: int | None = VOCAB, batch: int = 8, lr: float = 2e-3, anchors: int = 16,
                   block: int = BLOCK, save_to: Path | None = None, progress: bool = True):
    """Fit the parallel head on windows of `data` (a Windows or a list of them; default EagleLite's
    train_windows()), in fp32: every committed pair guesses the token after next (as EagleLite's KD
    loss) and every slot of `anchors` random blocks per window guesses its own position. Returns (model,
    TrainLog)."""
    anchors = checks.whole(anchors, "anchors (blocks per training window)", scalar=True)
    block = checks.whole(block, "block (tokens guessed per pass)", low=2, scalar=True)

    def make_loss(model, d):
        device, rng = d.tokens.device, np.random.default_rng(0)
        length = d.tokens.shape[1] - 1  # pairs (h_t, token t+1) for t = 0 .. L-2
        if length < block + 1:
            raise ValueError(f"data: windows of {length + 1} tokens are too short for blocks of {block}")
        n_anchors = min(anchors, length - block + 1)  # anchors t whose every slot has a target
        slot_ids = np.tile(np.arange(block - 1), n_anchors)

        def loss_fn(idx):
            idx = torch.as_tensor(idx, device=device)
            at = np.sort(rng.choice(length - block + 1, size=n_anchors, replace=False))
            positions, see = block_layout(length, at, block)
            h, _ = model.block_forward(d.hidden[idx, :-1].float(), d.tokens[idx, 1:], slot_ids,
                                       position_ids=torch.as_tensor(positions, device=device)[None],
                                       attention_mask=additive(see, torch.float32, device))
            # pair r guesses token r + 2, slot j of anchor t token t + 2 + j: the target's distribution
            # there comes from its hidden state one position before
            rows = np.concatenate([np.arange(1, length + 1),
                                   (at[:, None] + 1 + np.arange(1, block)).reshape(-1)])
            rows = torch.as_tensor(rows, device=device)
            with torch.no_grad():
                teacher = torch.softmax(d.hidden[idx][:, rows].float() @ d.head.T, -1)
            per_row = -(teacher * torch.log_softmax(h @ d.head.T, -1)).sum(-1)
            valid = d.mask[idx][:, rows].float()
            return (per_row * valid).sum() / valid.sum().clamp_min(1)
        return loss_fn

    return train_features(target, functools.partial(new_model, block=block), make_loss, steps, seconds, data,
                          vocab, batch, lr, "training ParallelLite", save_to, {"block": block}, progress)


def load_parallel(target, quick_seconds: float = 30.0, progress: bool = True):
    """The trained parallel head for `target`, frozen (weights.load_or_train): the committed one when it
    was trained for a target of its sizes, else one cached for this target, else a quick one trained and
    cached."""
    return weights.load_or_train(
        new_model(target), target, what="ParallelLite weights", committed=FILE, cached="parallel-lite",
        train=functools.partial(train_parallel, target), seconds=quick_seconds, progress=progress,
        advice="pass model=train_parallel(target, data=...)[0] (specnotes.training.parallel) with "
               "distill.windows of this target's own text, or model=new_model(target) for an untrained one")
