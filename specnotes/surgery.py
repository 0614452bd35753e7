"""Model surgery: smaller models cut from a target's own layers, for drafting.

`truncated` shares the target's first layers (the cheapest self-draft, where early exit starts); `student`
copies some of its layers into a new model to be trained (the distilled draft, and EagleLite's one layer).
Both keep the target's embeddings and LM head, so its tokenizer too. Notebooks 02, 05 and 06.
"""

from __future__ import annotations

import copy

from specnotes import checks
from specnotes.weights import freeze


def _shell(target, layers: list[int]):
    """A model of the target's class with only `layers` of its layers configured, its weights on the meta
    device except the target's embeddings, rotary embedding and LM head, which it shares."""
    import torch

    config = copy.deepcopy(target.config)
    config.num_hidden_layers = len(layers)
    if getattr(config, "layer_types", None):
        config.layer_types = [config.layer_types[i] for i in layers]
    with torch.device("meta"):
        model = type(target)(config)
    model.model.embed_tokens = target.model.embed_tokens
    model.model.rotary_emb = target.model.rotary_emb
    model.lm_head = target.lm_head
    return model


def truncated(model, n_layers: int):
    """A model that runs only the first n_layers of `model` and then its final norm and LM head,
    sharing every weight (no copy): the cheapest self-draft, and where early exit starts (06)."""
    import torch

    n_layers = checks.whole(n_layers, "n_layers", high=model.config.num_hidden_layers, scalar=True)
    small = _shell(model, list(range(n_layers)))
    small.model.layers = torch.nn.ModuleList(list(model.model.layers)[:n_layers])
    small.model.norm = model.model.norm
    return small.eval()


def student(target, layers: tuple[int, ...] = (0, 1)):
    """A new LlamaForCausalLM made of copies of the target's layers `layers` (renumbered 0..n-1) and its
    final norm, sharing the target's embeddings and LM head, which stay frozen. The copied layers and
    norm are trainable."""
    import torch

    total = target.config.num_hidden_layers
    if not isinstance(layers, (list, tuple)) or not layers:
        raise TypeError(f"layers must be a non-empty tuple of the target's layer indices, got {layers!r}")
    layers = [int(i) for i in checks.whole(list(layers), f"layers (indices into the target's {total})",
                                           low=0, high=total - 1)]
    model = _shell(target, layers)
    copies = []
    for new_idx, i in enumerate(layers):
        layer = copy.deepcopy(target.model.layers[i])
        layer.self_attn.layer_idx = new_idx  # the KV cache is indexed by it
        copies.append(layer)
    model.model.layers = torch.nn.ModuleList(copies)
    model.model.norm = copy.deepcopy(target.model.norm)
    model.generation_config = copy.deepcopy(target.generation_config)
    freeze(model)
    for p in [*model.model.layers.parameters(), *model.model.norm.parameters()]:
        p.requires_grad_(True)
    return model
