"""A small draft LM distilled from the target on CPU: a few of the target's own layers, retrained to
predict the target's next token, with the target's embeddings and LM head (so its tokenizer too).

It is an ordinary transformers LlamaForCausalLM, so it also works as `assistant_model=` in transformers'
generate. Notebook 06 trains and compares it; 07 times it. Weights trained in full mode are committed to
data/drafters/ (tools/train_drafters.py regenerates them); without them a quick one is trained and cached.
"""

from __future__ import annotations

import copy
from pathlib import Path

from specnotes import distill

FILE = "distilled-{layers}.safetensors"


def student(target, layers: tuple[int, ...] = (0, 1)):
    """A new LlamaForCausalLM made of copies of the target's layers `layers` (renumbered 0..n-1) and its
    final norm, sharing the target's embeddings and LM head, which stay frozen."""
    import torch

    from specnotes import checks

    total = target.config.num_hidden_layers
    if not isinstance(layers, (list, tuple)) or not layers:
        raise TypeError(f"layers must be a non-empty tuple of the target's layer indices, got {layers!r}")
    layers = tuple(int(i) for i in checks.whole(list(layers), f"layers (indices into the target's {total})",
                                                 low=0, high=total - 1))
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = len(layers)
    if getattr(config, "layer_types", None):
        config.layer_types = [config.layer_types[i] for i in layers]
    with torch.device("meta"):
        model = type(target)(config)
    model.model.embed_tokens = target.model.embed_tokens
    model.lm_head = target.lm_head
    model.model.rotary_emb = target.model.rotary_emb
    copies = []
    for new_idx, i in enumerate(layers):
        layer = copy.deepcopy(target.model.layers[i])
        layer.self_attn.layer_idx = new_idx  # the KV cache is indexed by it
        copies.append(layer)
    model.model.layers = torch.nn.ModuleList(copies)
    model.model.norm = copy.deepcopy(target.model.norm)
    model.generation_config = copy.deepcopy(target.generation_config)
    for p in model.parameters():
        p.requires_grad_(False)
    for p in [*model.model.layers.parameters(), *model.model.norm.parameters()]:
        p.requires_grad_(True)
    return model.eval()


def _name(layers) -> str:
    return FILE.format(layers="-".join(map(str, layers)))


def committed_path(layers=(0, 1)) -> Path:
    return distill.DATA / _name(layers)


def train_distilled_draft(target, layers=(0, 1), steps: int = 600, seconds: float | None = None,
                          data=None, teacher_k: int = 8, lr: float = 1e-3, save_to: Path | None = None,
                          progress: bool = True):
    """Distil a draft from `target` on `data` (see distill.distill), in fp32; returns (model on the
    target's device and in its dtype, TrainLog)."""
    work = distill.fp32_twin(target)
    model = student(work, tuple(layers))
    log = distill.distill(model, work, steps, seconds, data=data, teacher_k=teacher_k, lr=lr,
                          desc="distilling draft", progress=progress)
    if work is not target:
        model = distill.transfer(model, student(target, tuple(layers)))
    for p in model.parameters():
        p.requires_grad_(False)
    if save_to is not None:
        _save(model, save_to, log, layers, target)
    return model, log


def _save(model, path, log, layers, target):
    for p in [*model.model.layers.parameters(), *model.model.norm.parameters()]:
        p.requires_grad_(True)
    try:
        distill.save_trainable(model, path, {"layers": list(layers), "steps": log.steps,
                                             "seconds": round(log.seconds, 1),
                                             "final_loss": round(float(sum(log.losses[-20:]) /
                                                                       max(len(log.losses[-20:]), 1)), 4)},
                               target=target)
    finally:
        for p in model.parameters():
            p.requires_grad_(False)


def load_distilled_draft(target=None, layers=(0, 1), quick_seconds: float = 20.0, progress: bool = True):
    """The trained draft LM for `target` (the offline default model when None): the committed weights
    when they were trained for a target of its sizes, else ones an earlier quick run cached for this
    target, else a quick one trained now (~20 s) and cached (distill.trained_drafter). A target with
    another vocabulary than SmolLM2's gets a ValueError that says what to do instead."""
    from specnotes import models
    from specnotes.env import follow

    if target is None:
        target, _ = models.load()
    layers = tuple(layers)
    model = distill.trained_drafter(
        student(target, layers), target, "distilled-draft weights", committed_path(layers),
        _name(layers).removesuffix(".safetensors"),
        lambda path: train_distilled_draft(target, layers, steps=200, seconds=quick_seconds,
                                           data=distill.self_windows(limit=64), teacher_k=0, save_to=path,
                                           progress=progress)[0],
        advice=f"train one with train_distilled_draft(target, {layers}, data=...)[0] "
               "(specnotes.drafters.distilled) on distill.windows of this target's own text, or use "
               f"student(target, {layers}) untrained")
    for p in model.parameters():
        p.requires_grad_(False)
    return follow(target, model).eval()
