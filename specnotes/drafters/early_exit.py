"""Early exit: draft with the target's own first n layers and its LM head (self-speculation, as in
LayerSkip and Draft & Verify). Nothing extra to store, but a middle layer's hidden state was never trained
to be read by the LM head, so untrained the guesses are poor. A small exit adapter, trained by
self-distillation while every target weight stays frozen (specnotes.training.early_exit), fixes much of
that. Notebook 06.
"""

from __future__ import annotations

from specnotes import checks, weights
from specnotes.drafters.draft_model import DraftModel
from specnotes.training.early_exit import exit_model, load_exit_adapter


class EarlyExit(DraftModel):
    """Self-speculation from the target's first n_layers with its shared LM head.

    adapter: None for the plain (untrained) exit; "trained" for the committed adapter when it was
    trained for a target of this one's sizes and rank, else one cached for this target (a quick one is
    trained and cached when neither exists, and a target with another vocabulary than SmolLM2's gets a
    ValueError that says what to pass); or an exit model from training.early_exit.train_exit_adapter.
    The draft keeps its own KV cache for its n layers (LayerSkip reuses the target's; simpler here).
    k: its own draft length, as DraftModel's (None: the engine's k, or 5 with no cap).
    """

    def __init__(self, target, n_layers: int = 4, adapter=None, rank: int = 64,
                 quick_seconds: float = 20.0, k: int | None = None):
        self.n_layers = n_layers = checks.whole(n_layers, "n_layers", high=target.config.num_hidden_layers,
                                                scalar=True)
        rank = checks.whole(rank, "rank", high=target.config.hidden_size, scalar=True)
        if isinstance(adapter, str) and adapter != "trained":
            raise ValueError(f"adapter must be None (the plain exit), 'trained', or an exit model from "
                             f"train_exit_adapter, got {adapter!r}")
        if adapter is None:
            model = exit_model(target, n_layers, rank=None)
        elif adapter == "trained":
            model = load_exit_adapter(target, n_layers, rank, quick_seconds)
        else:
            model = adapter
        super().__init__(weights.freeze(model), k=k)
