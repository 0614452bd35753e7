"""Trained-drafter weights: where the four trained drafters (Medusa, EagleLite, the exit adapter, the
distilled draft) get theirs, and how they are written and read.

`load_or_train` is the one way a drafter is given trained weights: the committed ones (data/drafters/,
made by tools/train_drafters.py) when they were trained for a target of these sizes, else ones an earlier
quick run trained for this very target (cached, checksummed), else a quick set trained now and cached.
Only a module's trainable parameters are written (fp16 safetensors, with what they were trained for).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from safetensors import safe_open

from specnotes import distill
from specnotes.paths import data_dir, write_atomic
from specnotes.placement import host
from specnotes.store import cache_dir

DATA = data_dir() / "drafters"  # the committed weights
COMMITTED_MODEL = "SmolLM2-135M"
COMMITTED_FOR = {"hidden_size": 576, "vocab_size": 49152, "num_hidden_layers": 30}
"""The target_facts of the model that the committed drafters and self-distillation sets were made with:
the drafters written before `save` recorded them in their metadata do not say so themselves."""
QUICK_STEPS, QUICK_WINDOWS = 200, 64  # a quick run: at most this many steps on this many windows


def target_facts(target) -> dict:
    """The sizes a trained drafter depends on: hidden size, vocabulary and layer count."""
    return {k: getattr(target.config, k) for k in COMMITTED_FOR}


def describe(facts: dict) -> str:
    return f"hidden {facts['hidden_size']}, vocab {facts['vocab_size']}, {facts['num_hidden_layers']} layers"


def freeze(module):
    """`module` with every parameter frozen (requires_grad off) and in eval mode."""
    for p in module.parameters():
        p.requires_grad_(False)
    return module.eval()


def transfer(trained, fresh):
    """Copy every trainable parameter of `trained` into the same-named one of `fresh` (a drafter built
    around the real target), in fresh's dtype and on its device; returns fresh."""
    import torch

    own = dict(fresh.named_parameters())
    with torch.no_grad():
        for name, p in trained.named_parameters():
            if p.requires_grad:
                own[name].copy_(p.detach().to(device=own[name].device, dtype=own[name].dtype))
    return fresh


def train_in_fp32(target, build: Callable, train: Callable, save_to: Path | None = None,
                  meta: dict | None = None) -> tuple:
    """(module, TrainLog): a module built around `target`, trained in fp32 and handed back in the target's
    dtype, on its device, frozen. build(model) makes the module around a model; train(module, work) fits
    the one built around `work` (an fp32 twin of the target, or the target itself when it is fp32) and
    returns its TrainLog. The trained parameters are then copied into build(target), and with save_to
    written there with `meta` and the log's summary."""
    work = distill.fp32_twin(target)
    module = build(work)
    log = train(module, work)
    if work is not target:
        module = transfer(module, build(target))
    if save_to is not None:
        save(module, save_to, {**(meta or {}), **log.summary()}, target=target)
    return freeze(module), log


def save(module, path: Path, meta: dict | None = None, target=None) -> Path:
    """Write the parameters of `module` that require grad (fp16, safetensors), atomically. With `target`,
    the metadata also records what the weights were trained for (target_facts and its fingerprint), which
    the loaders compare before using them."""
    from safetensors.torch import save as serialize

    tensors = {n: host(p).half().contiguous() for n, p in module.named_parameters() if p.requires_grad}
    if target is not None:
        meta = {**target_facts(target), "fingerprint": distill.fingerprint(target), **(meta or {})}
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, serialize(tensors, metadata={k: str(v) for k, v in (meta or {}).items()}))


def misfit(module, path: Path, shapes: dict[str, tuple]) -> str | None:
    """Why tensors of these names and shapes (a file's) cannot load into `module`, or None when they fit:
    each must be a parameter of it with the same shape, and every trainable parameter must be there (a
    drafter half-loaded would draft from untrained weights without saying so)."""
    own = dict(module.named_parameters())
    extra = sorted(set(shapes) - set(own))
    if extra:
        return f"{path.name} holds parameters this module does not have: {extra[:3]}"
    for name, shape in sorted(shapes.items()):
        if tuple(own[name].shape) != tuple(shape):
            return (f"{path.name} holds {name} of shape {tuple(shape)}, but this module's {name} is "
                    f"{tuple(own[name].shape)}")
    missing = sorted(n for n, p in own.items() if p.requires_grad and n not in shapes)
    if missing:
        return f"{path.name} lacks trainable parameters of this module: {missing[:3]}"
    return None


def load(module, path: Path) -> dict:
    """Load tensors written by `save` into `module` (in its dtype); returns the metadata. Raises
    ValueError, naming the parameter, when the file does not fit the module (see misfit)."""
    import torch

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        state = {n: f.get_tensor(n) for n in f.keys()}
    problem = misfit(module, path, {n: tuple(t.shape) for n, t in state.items()})
    if problem:
        raise ValueError(f"{problem}; build the module with the shapes it was trained with")
    own = dict(module.named_parameters())
    with torch.no_grad():
        for name, value in state.items():
            own[name].copy_(value.to(device=own[name].device, dtype=own[name].dtype))
    return meta


def _unreadable(path: Path, exc: Exception) -> RuntimeError:
    return RuntimeError(f"the committed {path} cannot be read ({type(exc).__name__}: {exc}). It is part of "
                        f"the repository: restore it with `git checkout -- data/drafters/{path.name}` in a "
                        "clone, or reinstall specnotes")


def _load_committed(module, target, what: str, path: Path) -> str | None:
    """Load a committed drafter into `module` when it was trained for a target of this one's sizes and
    its shapes fit; otherwise say why not (and load nothing). Unreadable: RuntimeError."""
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            shapes = {n: tuple(f.get_slice(n).get_shape()) for n in f.keys()}
        made_for = {k: int(meta.get(k, v)) for k, v in COMMITTED_FOR.items()}
    except Exception as exc:
        raise _unreadable(path, exc) from exc
    facts = target_facts(target)
    if facts != made_for:
        model = COMMITTED_MODEL if made_for == COMMITTED_FOR else "another target"
        return (f"the committed {what} ({path.name}) were trained for {model} ({describe(made_for)}), "
                f"not for this target ({describe(facts)})")
    problem = misfit(module, path, shapes)
    if problem:
        return f"the committed {what} do not fit this drafter: {problem}"
    try:
        load(module, path)
    except Exception as exc:
        raise _unreadable(path, exc) from exc
    return None


def load_or_train(module, target, *, what: str, committed: str, cached: str, train: Callable[..., tuple],
                  advice: str, seconds: float, progress: bool = True):
    """`module` (a fresh drafter around `target`) with trained weights, frozen and in eval mode.

    1. Committed: DATA/`committed`, when it was trained for a target of these sizes and fits the shapes.
    2. Cached: else the weights an earlier quick run trained for this very target, in
       cache_dir()/drafters/<cached>-<the target's fingerprint>.safetensors, checked against its sha256.
    3. Quick-trained: else train(steps=QUICK_STEPS, seconds=seconds, data=<the first QUICK_WINDOWS
       self-distillation windows>, save_to=<that cache file>, progress=progress), whose first item is
       the new drafter; the file is stamped for next time.

    `what` names the weights in messages ("Medusa heads"). The self-distillation set is SmolLM2's token
    ids, meaningless to another tokenizer, so for a target with another vocabulary nothing is trained:
    ValueError, ending with `advice` (what to pass instead)."""
    path = DATA / committed
    if path.exists():
        note = _load_committed(module, target, what, path)
        if note is None:
            return freeze(module)
    else:
        note = f"no {what} are committed as {committed}"
    facts = target_facts(target)
    if facts["vocab_size"] != COMMITTED_FOR["vocab_size"]:
        raise ValueError(
            f"{note}. Quick training would read the committed self-distillation set, which is "
            f"{COMMITTED_MODEL}'s token ids (vocab {COMMITTED_FOR['vocab_size']}) and means nothing "
            f"to this target's tokenizer (vocab {facts['vocab_size']}): {advice}")
    fp = distill.fingerprint(target)
    mine = cache_dir() / "drafters" / f"{cached}-{fp[:16]}.safetensors"

    def parse(p):
        if load(module, p).get("fingerprint") != fp:
            raise ValueError("it was trained for another target")
        return module

    if distill.read_cached(mine, parse, redo="retraining it") is not None:
        return freeze(module)
    if path.exists():
        print(f"{note}: training a quick set for this target now, cached as {mine}")
    trained, _ = train(steps=QUICK_STEPS, seconds=seconds, data=distill.self_windows(limit=QUICK_WINDOWS),
                       save_to=mine, progress=progress)
    distill.stamp(mine)
    return freeze(trained)
