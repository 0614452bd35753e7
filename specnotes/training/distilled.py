"""The distilled draft LM: a few of the target's own layers (surgery.student), retrained on CPU to predict
the target's next token, with the target's embeddings and LM head (so its tokenizer too); its training,
loader and exporter.

It is an ordinary transformers LlamaForCausalLM, so it drafts through specnotes.drafters.DraftModel and
also works as `assistant_model=` in transformers' generate. Notebook 06 trains and compares it; 07 times
it; 09 exports it for vLLM. Weights trained in full mode are committed to data/drafters/
(tools/train_drafters.py regenerates them); without them a quick one is trained and cached.
"""

from __future__ import annotations

import functools
from pathlib import Path

from specnotes import distill, models, store, weights
from specnotes.placement import follow
from specnotes.surgery import student

FILE = "distilled-{layers}.safetensors"


def _name(layers) -> str:
    return FILE.format(layers="-".join(map(str, layers)))


def committed_path(layers=(0, 1)) -> Path:
    return weights.DATA / _name(layers)


def train_distilled_draft(target, layers=(0, 1), steps: int = 600, seconds: float | None = None,
                          data=None, teacher_k: int = 8, lr: float = 1e-3, save_to: Path | None = None,
                          progress: bool = True):
    """Distil a draft (surgery.student: copies of the target's `layers`) from `target` on `data` (see
    distill.distill), in fp32; returns (model on the target's device and in its dtype, frozen, TrainLog)."""
    layers = tuple(layers)
    return weights.train_in_fp32(
        target, lambda model: student(model, layers),
        lambda model, work: distill.distill(model, work, steps, seconds, data=data, teacher_k=teacher_k,
                                            lr=lr, desc="distilling draft", progress=progress),
        save_to, {"layers": list(layers)})


def load_distilled_draft(target=None, layers=(0, 1), quick_seconds: float = 20.0, progress: bool = True):
    """The trained draft LM for `target` (the offline default model when None), frozen
    (weights.load_or_train): the committed weights when they were trained for a target of its sizes, else
    ones an earlier quick run cached for this target, else a quick one trained now (~20 s) and cached. A
    target with another vocabulary than SmolLM2's gets a ValueError that says what to do instead."""
    if target is None:
        target, _ = models.load()
    layers = tuple(layers)
    model = weights.load_or_train(
        student(target, layers), target, what="distilled-draft weights", committed=_name(layers),
        cached=_name(layers).removesuffix(".safetensors"),
        train=functools.partial(train_distilled_draft, target, layers, teacher_k=0),
        seconds=quick_seconds, progress=progress,
        advice=f"train one with train_distilled_draft(target, {layers}, data=...)[0] "
               "(specnotes.training.distilled) on distill.windows of this target's own text, or use "
               f"surgery.student(target, {layers}) untrained")
    return follow(target, model).eval()


def export_distilled_draft(dest=None, layers=(0, 1)) -> Path:
    """The distilled draft as a standalone model folder (safetensors, config and the target's tokenizer),
    for engines that load a draft model by path (vLLM's speculative_config {"method": "draft_model"}).
    Written once into the specnotes cache (store.write_store: atomic, with a manifest); later calls return
    the folder as it is."""
    dest = Path(dest) if dest is not None else store.cache_dir() / "models" / (
        f"smollm2-135m-{_name(layers).removesuffix('.safetensors')}")
    if (dest / "config.json").exists():
        return dest
    target, tokenizer = models.load(device="cpu", dtype="float32")
    draft = load_distilled_draft(target, layers, progress=False)
    # its own copies of the shared embeddings and LM head, so the folder stands alone
    alone = student(target, layers)
    alone.load_state_dict(draft.state_dict())
    return store.write_store(dest, alone, tokenizer, meta={"what": "specnotes distilled draft",
                                                           "layers": list(layers)})
