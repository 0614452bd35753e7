"""The early-exit adapter: a small low-rank correction after the target's layer n, so that its hidden state
reads well through the target's final norm and LM head; the exit model around it, its training by
self-distillation (every target weight frozen) and its weights. The drafter is
specnotes.drafters.early_exit.EarlyExit. Notebook 06.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from specnotes import checks, distill, weights
from specnotes.placement import follow
from specnotes.surgery import truncated

FILE = "exit-adapter-{n}.safetensors"


class ExitAdapter(torch.nn.Module):
    """h + W_up silu(W_down h): a low-rank residual correction of the exit layer's hidden state,
    starting as the identity (W_up = 0), then the target's final norm."""

    def __init__(self, hidden: int, rank: int, norm):
        super().__init__()
        self.down = torch.nn.Linear(hidden, rank, bias=False)
        self.up = torch.nn.Linear(rank, hidden, bias=False)
        torch.nn.init.zeros_(self.up.weight)
        self.norm = norm

    def forward(self, h):
        return self.norm(h + self.up(torch.nn.functional.silu(self.down(h))))


def exit_model(target, n_layers: int, rank: int | None = 64):
    """The target's first n_layers, then (with a rank) an exit adapter, then its final norm and LM head.
    Target weights are shared and frozen; only the adapter's are trainable."""
    if rank is not None:
        rank = checks.whole(rank, "rank", high=target.config.hidden_size, scalar=True)
    model = weights.freeze(truncated(target, n_layers))
    if rank:
        adapter = follow(target, ExitAdapter(target.config.hidden_size, rank, target.model.norm))
        model.model.norm = adapter  # only the small model's norm slot; the target keeps its own
        for p in [*adapter.down.parameters(), *adapter.up.parameters()]:
            p.requires_grad_(True)
    return model


def committed_path(n_layers: int) -> Path:
    return weights.DATA / FILE.format(n=n_layers)


def train_exit_adapter(target, n_layers: int = 4, rank: int = 64, steps: int = 400,
                       seconds: float | None = None, data=None, teacher_k: int = 8, lr: float = 3e-3,
                       save_to: Path | None = None, progress: bool = True):
    """Train an exit adapter after layer n_layers, in fp32; returns (exit model, frozen, TrainLog)."""
    return weights.train_in_fp32(
        target, lambda model: exit_model(model, n_layers, rank),
        lambda model, work: distill.distill(model, work, steps, seconds, data=data, teacher_k=teacher_k,
                                            lr=lr, desc=f"exit adapter @ layer {n_layers}",
                                            progress=progress),
        save_to, {"n_layers": n_layers, "rank": rank})


def load_exit_adapter(target, n_layers: int = 4, rank: int = 64, quick_seconds: float = 20.0):
    """The trained exit model for `target`, frozen (weights.load_or_train): the committed adapter when it was
    trained for a target of its sizes and rank, else one cached for this target, else a quick one trained
    now and cached. A target with another vocabulary than SmolLM2's gets a ValueError that says what to
    pass instead."""
    return weights.load_or_train(
        exit_model(target, n_layers, rank), target, what="exit-adapter weights",
        committed=FILE.format(n=n_layers), cached=f"exit-adapter-{n_layers}-rank{rank}",
        train=functools.partial(train_exit_adapter, target, n_layers, rank, teacher_k=0),
        seconds=quick_seconds,
        advice=f"pass adapter=train_exit_adapter(target, {n_layers}, data=...)[0] "
               "(specnotes.training.early_exit) with distill.windows of this target's own text, or "
               "adapter=None for the plain exit")
