"""Medusa's heads: a few residual blocks on the target's last hidden state that guess the tokens two, three,
four positions ahead through the target's own (frozen) LM head; their training and their weights. The
drafter that builds a tree from them is specnotes.drafters.medusa.Medusa. Notebook 06, part 2.

Trained by self-distillation: the frozen target's hidden states and its top-k next-token distributions
over the same windows, cached on disk. Committed weights (tools/train_drafters.py) are used when
present; otherwise a quick set is trained (about 30 s) and cached.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch

from specnotes import checks, distill, weights
from specnotes.placement import device_of, follow

FILE = "medusa-{n}.safetensors"


class ResBlock(torch.nn.Module):
    """h + SiLU(W h), with W zero at the start: a new head begins as the LM head itself."""

    def __init__(self, hidden: int):
        super().__init__()
        self.linear = torch.nn.Linear(hidden, hidden)
        torch.nn.init.zeros_(self.linear.weight)
        torch.nn.init.zeros_(self.linear.bias)

    def forward(self, h):
        return h + torch.nn.functional.silu(self.linear(h))


class MedusaHeads(torch.nn.Module):
    def __init__(self, target, n_heads: int):
        super().__init__()
        hidden = target.config.hidden_size
        self.blocks = torch.nn.ModuleList(ResBlock(hidden) for _ in range(n_heads))
        self._lm_head = [target.lm_head]  # shared and frozen: a list keeps it out of the parameters

    @property
    def n_heads(self) -> int:
        return len(self.blocks)

    def forward(self, hidden):
        """(..., d) hidden states after the final norm -> (n_heads, ..., V) logits."""
        lm_head = self._lm_head[0]
        dtype = lm_head.weight.dtype  # the heads may train in fp32 beside a 16-bit head
        return torch.stack([lm_head(block(hidden).to(dtype)) for block in self.blocks])


def new_heads(target, n_heads: int = 3) -> MedusaHeads:
    """Untrained heads (each starts as a copy of the LM head's own guess, shifted one position)."""
    n_heads = checks.whole(n_heads, "n_heads", high=64, scalar=True)
    return follow(target, MedusaHeads(target, n_heads))


def committed_path(n_heads: int) -> Path:
    return weights.DATA / FILE.format(n=n_heads)


def train_medusa(target, n_heads: int = 3, steps: int = 600, seconds: float | None = None, data=None,
                 teacher_k: int = 8, positions: int = 256, lr: float = 1e-3, save_to: Path | None = None,
                 progress: bool = True):
    """Fit the heads to the target's own distribution `2 + h` positions ahead (soft top-k targets), on
    random positions of `data` (default: the self-distillation windows), in fp32. Returns (heads,
    TrainLog)."""
    win = distill.self_windows() if data is None else data
    # position j's head h is scored on the teacher's distribution at j + 1 + h (the token at j + 2 + h),
    # where that token is one the target wrote
    rows, cols = np.nonzero(win.mask[:, 1:])
    n, length = win.inputs.shape

    def fit(heads, work):
        device = device_of(work)
        hidden = torch.as_tensor(distill.hidden_states(work, win.inputs, progress=progress), device=device)
        ids, probs = distill.teacher_targets(work, win.inputs, teacher_k, progress=progress)
        ids, probs, mask = (torch.as_tensor(a, device=device) for a in (ids, probs, win.mask))

        def loss_fn(idx):
            r, c = torch.as_tensor(rows[idx], device=device), torch.as_tensor(cols[idx], device=device)
            logits = heads(hidden[r, c].float())  # (H, P, V)
            total = 0.0
            for h in range(n_heads):
                at = (c + 1 + h).clamp_max(length - 1)
                valid = mask[r, at] & (c + 1 + h < length)
                total = total + distill.kd_loss(logits[h], None, valid, ids[r, at], probs[r, at].float())
            return total / n_heads

        heads.train()
        log = distill.fit(heads.parameters(), loss_fn, len(rows), steps, seconds, batch=positions, lr=lr,
                          desc="training Medusa heads", progress=progress)
        heads.eval()
        return log

    return weights.train_in_fp32(target, lambda model: new_heads(model, n_heads), fit, save_to,
                                 {"n_heads": n_heads})


def load_medusa_heads(target, n_heads: int = 3, quick_seconds: float = 30.0, progress: bool = True):
    """Trained heads for `target`, frozen (weights.load_or_train): the committed ones when they were
    trained for a target of its sizes, else ones cached for this target, else a quick set trained now and
    cached. A target with another vocabulary than SmolLM2's gets a ValueError that says what to pass."""
    return weights.load_or_train(
        new_heads(target, n_heads), target, what="Medusa heads", committed=FILE.format(n=n_heads),
        cached=f"medusa-{n_heads}", train=functools.partial(train_medusa, target, n_heads),
        seconds=quick_seconds, progress=progress,
        advice=f"pass heads=train_medusa(target, {n_heads}, data=...)[0] (specnotes.training.medusa) with "
               f"distill.windows of this target's own text, or heads=new_heads(target, {n_heads}) for "
               "untrained ones")
