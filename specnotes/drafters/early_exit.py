"""Early exit: draft with the target's own first n layers and its LM head (self-speculation, as in
LayerSkip and Draft & Verify). Nothing extra to store, but a middle layer's hidden state was never trained
to be read by the LM head, so untrained the guesses are poor. A small exit adapter, trained by
self-distillation while every target weight stays frozen, fixes much of that. Notebook 06.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from specnotes import distill, weights
from specnotes.drafters.draft_model import DraftModel
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
        from specnotes import checks

        rank = checks.whole(rank, "rank", high=target.config.hidden_size, scalar=True)
    model = weights.freeze(truncated(target, n_layers))
    if rank:
        from specnotes.placement import follow

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
    work = distill.fp32_twin(target)
    model = exit_model(work, n_layers, rank)
    log = distill.distill(model, work, steps, seconds, data=data, teacher_k=teacher_k, lr=lr,
                          desc=f"exit adapter @ layer {n_layers}", progress=progress)
    if work is not target:
        model = weights.transfer(model, exit_model(target, n_layers, rank))
    if save_to is not None:
        weights.save(model, save_to, {"n_layers": n_layers, "rank": rank, **log.summary()}, target=target)
    return weights.freeze(model), log


class EarlyExit(DraftModel):
    """Self-speculation from the target's first n_layers with its shared LM head.

    adapter: None for the plain (untrained) exit; "trained" for the committed adapter when it was
    trained for a target of this one's sizes and rank, else one cached for this target (a quick one is
    trained and cached when neither exists, and a target with another vocabulary than SmolLM2's gets a
    ValueError that says what to pass); or an exit model from train_exit_adapter.
    The draft keeps its own KV cache for its n layers (LayerSkip reuses the target's; simpler here).
    """

    def __init__(self, target, n_layers: int = 4, adapter=None, rank: int = 64,
                 quick_seconds: float = 20.0):
        from specnotes import checks

        self.n_layers = n_layers = checks.whole(n_layers, "n_layers", high=target.config.num_hidden_layers,
                                                scalar=True)
        rank = checks.whole(rank, "rank", high=target.config.hidden_size, scalar=True)
        if isinstance(adapter, str) and adapter != "trained":
            raise ValueError(f"adapter must be None (the plain exit), 'trained', or an exit model from "
                             f"train_exit_adapter, got {adapter!r}")
        if adapter is None:
            model = exit_model(target, n_layers, rank=None)
        elif adapter == "trained":
            model = weights.load_or_train(
                exit_model(target, n_layers, rank), target, what="exit-adapter weights",
                committed=FILE.format(n=n_layers), cached=f"exit-adapter-{n_layers}-rank{rank}",
                train=functools.partial(train_exit_adapter, target, n_layers, rank, teacher_k=0),
                seconds=quick_seconds,
                advice=f"pass adapter=train_exit_adapter(target, {n_layers}, data=...)[0] "
                       "(specnotes.drafters.early_exit) with distill.windows of this target's own text, or "
                       "adapter=None for the plain exit")
        else:
            model = adapter
        super().__init__(weights.freeze(model))
