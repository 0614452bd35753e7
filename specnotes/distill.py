"""Self-distillation on CPU: the data and the training loop behind notebook 06's trained drafters.

The target answers the training prompts itself (tools/make_distill_data.py, committed as token ids), so a
drafter trained to predict the next token of that text is learning the target's own greedy choices. Where
a teacher pass is affordable, the loss also uses the target's top-K next-token probabilities at every
position (sparse knowledge distillation), which carries more than the argmax alone.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from specnotes.paths import data_dir

DATA = data_dir() / "drafters"


class Windows(NamedTuple):
    inputs: np.ndarray  # (N, L) int64 token ids
    labels: np.ndarray  # (N, L) the next token at each position
    mask: np.ndarray  # (N, L) bool: positions that count in the loss (the target's own text, not padding)


def prompts(split: str = "heldout") -> list[dict]:
    """A committed prompt set: [{"kind": "copy"|"code"|"story"|"qa"|"other", "text": ...}, ...]. Splits:
    "train", "heldout" (subjects no training set uses), "more" (the larger free-form training set) and
    "validation" (six free-form prompts for choosing settings, in none of the others)."""
    data = json.loads((DATA / "prompts.json").read_text())
    if split not in ("train", "heldout", "more", "validation"):
        raise ValueError(f"split must be 'train', 'heldout', 'more' or 'validation', got {split!r}")
    return data[split]


SETS = {"train": "selfdistill.npz", "more": "selfdistill-more.npz"}


def sequences(name: str = "train") -> tuple[list[np.ndarray], np.ndarray]:
    """A self-distillation set: one token-id array per prompt (chat-formatted prompt, then the target's
    greedy answer), and each prompt's length. "train": the training prompts of all four kinds; "more":
    the larger free-form set (prompts.json's "more", ~870 stories, questions and requests)."""
    if name not in SETS:
        raise ValueError(f"name must be one of {sorted(SETS)}, got {name!r}")
    with np.load(DATA / SETS[name]) as z:
        tokens, lengths, prompt_lengths = z["tokens"], z["lengths"], z["prompt_lengths"]
    return np.split(tokens.astype(np.int64), np.cumsum(lengths)[:-1]), prompt_lengths


@functools.lru_cache(maxsize=8)  # every EagleLite built asks; the answer only changes with the files
def frequent_tokens(n: int) -> np.ndarray:
    """The n token ids the target writes most often in its answers to both self-distillation sets
    (sorted by id; fewer when it wrote fewer distinct tokens: 6,426 of them in all). A drafter that
    scores only these pays for that many rows of the LM head instead of the whole vocabulary."""
    written = np.concatenate([seq[p:] for name in SETS for seq, p in zip(*sequences(name), strict=True)])
    counts = np.bincount(written)
    top = np.argsort(-counts, kind="stable")[:n]
    return np.sort(top[counts[top] > 0])


def windows(seqs: list[np.ndarray], prompt_lengths, length: int = 128, answers_only: bool = True,
            pad_id: int = 0) -> Windows:
    """Cut sequences into fixed-length training windows. With answers_only, only positions whose next
    token the target generated count (the prompt was written by a person, not by the target)."""
    rows_in, rows_lab, rows_mask = [], [], []
    for seq, n_prompt in zip(seqs, prompt_lengths, strict=True):
        counts = np.arange(1, len(seq)) >= (n_prompt if answers_only else 1)  # label index >= prompt
        for start in range(0, len(seq) - 1, length):
            inp = seq[start:start + length]
            lab = seq[start + 1:start + 1 + length]
            m = counts[start:start + length][: len(lab)]
            if not m.any():
                continue
            n = len(lab)
            pad = length - n
            rows_in.append(np.pad(inp[:n], (0, pad), constant_values=pad_id))
            rows_lab.append(np.pad(lab, (0, pad), constant_values=pad_id))
            rows_mask.append(np.pad(m, (0, pad), constant_values=False))
    return Windows(np.stack(rows_in), np.stack(rows_lab), np.stack(rows_mask))


def teacher_topk(target, inputs: np.ndarray, k: int = 8, batch: int = 8, progress: bool = True):
    """The target's top-k next-token probabilities at every position of every window:
    (ids (N, L, k) int64, probs (N, L, k) float32, renormalized over the k)."""
    import torch
    from tqdm.auto import tqdm

    from specnotes.env import host, to_model

    ids, probs = [], []
    with torch.inference_mode():
        quiet = {} if progress else {"disable": True}  # otherwise TQDM_DISABLE decides
        for s in tqdm(range(0, len(inputs), batch), desc="teacher pass", **quiet):
            logits = target(to_model(target, torch.as_tensor(inputs[s:s + batch]))).logits.float()
            top = torch.topk(torch.log_softmax(logits, -1), k, dim=-1)
            ids.append(host(top.indices))
            probs.append(host(torch.softmax(top.values, -1)))
    return torch.cat(ids).numpy(), torch.cat(probs).numpy()


def kd_loss(logits, labels, mask, top_ids=None, top_probs=None):
    """Mean over counted positions of the cross-entropy against the teacher's top-k distribution,
    or against the next token when no teacher targets are given."""
    import torch

    logp = torch.log_softmax(logits.float(), -1)
    if top_ids is None:
        per_pos = -logp.gather(-1, labels[..., None])[..., 0]
    else:
        per_pos = -(top_probs * logp.gather(-1, top_ids)).sum(-1)
    mask = mask.float()
    return (per_pos * mask).sum() / mask.sum().clamp_min(1)


def fp32_twin(target):
    """The target itself when it runs in fp32, else an fp32 copy on its device: drafters train in fp32
    (AdamW steps vanish in 16 bits) and are cast to the target's dtype afterwards, as committed weights
    are when loaded."""
    import copy

    import torch

    from specnotes.env import dtype_of

    return target if dtype_of(target) == torch.float32 else copy.deepcopy(target).float()


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


class TrainLog(NamedTuple):
    losses: list[float]
    steps: int
    seconds: float


def fit(params, loss_fn: Callable[[np.ndarray], object], n_windows: int, steps: int,
        seconds: float | None = None, batch: int = 8, lr: float = 1e-3, seed: int = 0,
        desc: str = "training", progress: bool = True) -> TrainLog:
    """AdamW with warm-up and cosine decay over `steps` minibatches of window indices, stopping early
    when `seconds` run out (the schedule is set for `steps`, so a cut run ends at a higher rate)."""
    import torch
    from tqdm.auto import tqdm

    params = [p for p in params if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + np.cos(np.pi * min(s, steps) / steps)))
    rng = np.random.default_rng(seed)
    order = np.array([], dtype=int)
    losses = []
    start = time.perf_counter()
    bar = tqdm(range(steps), desc=desc, **({} if progress else {"disable": True}))
    done = 0
    for _ in bar:
        if len(order) < batch:
            order = np.concatenate([order, rng.permutation(n_windows)])
        idx, order = order[:batch], order[batch:]
        loss = loss_fn(idx)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        done += 1
        bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}")
        if seconds is not None and time.perf_counter() - start > seconds:
            break
    bar.close()
    return TrainLog(losses, done, time.perf_counter() - start)


def pydoc_windows(tokenizer, n_windows: int, length: int = 128) -> Windows:
    """Extra training text that every Python install carries (the pydoc topics), cut into windows. The
    target did not write it, so every position counts only through the teacher's top-k targets."""
    import pydoc_data.topics

    text = "\n\n".join(pydoc_data.topics.topics[name] for name in sorted(pydoc_data.topics.topics))
    ids = np.asarray(tokenizer(text)["input_ids"], dtype=np.int64)
    n = min(n_windows, (len(ids) - 1) // length)
    starts = np.arange(n) * length
    inputs = np.stack([ids[s:s + length] for s in starts])
    labels = np.stack([ids[s + 1:s + 1 + length] for s in starts])
    return Windows(inputs, labels, np.ones_like(inputs, dtype=bool))


def concat(*parts: Windows) -> Windows:
    return Windows(*(np.concatenate(arrays) for arrays in zip(*parts, strict=True)))


def self_windows(length: int = 128, limit: int | None = None, name: str = "train") -> Windows:
    """A self-distillation set as windows (the first `limit` of them for a quick run)."""
    win = windows(*sequences(name), length)
    return win if limit is None else Windows(*(a[:limit] for a in win))


def teacher_targets(target, inputs: np.ndarray, k: int = 8, progress: bool = True):
    """teacher_topk, cached on disk by the inputs' hash, k and the target's size (about a minute per
    30k tokens on 2 cores, so a rerun of a training script skips it)."""
    import hashlib

    from specnotes.models import cache_dir

    n_params = sum(p.numel() for p in target.parameters())
    digest = hashlib.sha256(inputs.astype(np.int64).tobytes() + f"{k}/{n_params}".encode()).hexdigest()[:16]
    path = cache_dir() / "drafters" / f"teacher-{digest}.npz"
    if path.exists():
        with np.load(path) as z:
            return z["ids"].astype(np.int64), z["probs"].astype(np.float32)
    ids, probs = teacher_topk(target, inputs, k, progress=progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, ids=ids.astype(np.int32), probs=probs.astype(np.float16))
    tmp.replace(path)
    return ids, probs


def distill(student, target, steps: int, seconds: float | None = None, batch: int = 8,
            data: Windows | None = None, teacher_k: int = 8, lr: float = 1e-3,
            desc: str = "distilling", progress: bool = True) -> TrainLog:
    """Train the student's trainable parameters to predict the target's next-token distribution on
    `data` (default: the self-distillation set). With teacher_k = 0 the loss uses the next token only,
    which needs no teacher pass. `student(input_ids).logits` must be (B, L, V)."""
    import torch

    from specnotes.env import device_of

    device = device_of(student)
    win = self_windows() if data is None else data
    inputs, labels, mask = (torch.as_tensor(a, device=device) for a in win)
    if teacher_k:
        ids, probs = teacher_targets(target, win.inputs, teacher_k, progress)
        top_ids, top_probs = torch.as_tensor(ids, device=device), torch.as_tensor(probs, device=device)

    def loss_fn(idx):
        idx = torch.as_tensor(idx, device=device)
        logits = student(inputs[idx]).logits
        if not teacher_k:
            return kd_loss(logits, labels[idx], mask[idx])
        return kd_loss(logits, labels[idx], mask[idx], top_ids[idx], top_probs[idx])

    student.train()
    try:
        return fit(student.parameters(), loss_fn, len(inputs), steps, seconds, batch, lr, desc=desc,
                   progress=progress)
    finally:
        student.eval()


def save_trainable(module, path: Path, meta: dict | None = None) -> Path:
    """Write the parameters that require grad (fp16, safetensors), atomically."""
    from safetensors.torch import save_file

    from specnotes.env import host

    tensors = {n: host(p).half().contiguous() for n, p in module.named_parameters() if p.requires_grad}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file(tensors, str(tmp), metadata={k: str(v) for k, v in (meta or {}).items()})
    tmp.replace(path)
    return path


def load_trainable(module, path: Path) -> dict:
    """Load tensors written by save_trainable into `module` (in its dtype); returns the metadata."""
    import torch
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        state = {n: f.get_tensor(n) for n in f.keys()}
    own = dict(module.named_parameters())
    missing = sorted(set(state) - set(own))
    if missing:
        raise ValueError(f"{path} holds parameters this module does not have: {missing[:3]}")
    with torch.no_grad():
        for name, value in state.items():
            own[name].copy_(value.to(device=own[name].device, dtype=own[name].dtype))
    return meta
