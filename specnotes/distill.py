"""Self-distillation on CPU: the data and the training loop behind notebook 06's trained drafters.

The target answers the training prompts itself (tools/make_distill_data.py, committed as token ids), so a
drafter trained to predict the next token of that text is learning the target's own greedy choices. Where
a teacher pass is affordable, the loss also uses the target's top-K next-token probabilities at every
position (sparse knowledge distillation), which carries more than the argmax alone.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import io
import pydoc_data.topics
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from specnotes import checks
from specnotes.env import progress_bar
from specnotes.paths import data_dir, write_atomic
from specnotes.placement import device_of, dtype_of, host, to_model
from specnotes.store import cache_dir, make_folder, sha256_of

DATA = data_dir() / "drafters"  # the committed self-distillation sets


class Windows(NamedTuple):
    inputs: np.ndarray  # (N, L) int64 token ids
    labels: np.ndarray  # (N, L) the next token at each position
    mask: np.ndarray  # (N, L) bool: positions that count in the loss (the target's own text, not padding)


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
    length = checks.whole(length, "length", low=2, scalar=True)
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
    if not rows_in:
        raise ValueError("seqs: no window has a position to learn from (no sequences, or every token is "
                         "in the prompt)")
    return Windows(np.stack(rows_in), np.stack(rows_lab), np.stack(rows_mask))


def teacher_topk(target, inputs: np.ndarray, k: int = 8, batch: int = 8, progress: bool = True):
    """The target's top-k next-token probabilities at every position of every window:
    (ids (N, L, k) int64, probs (N, L, k) float32, renormalized over the k)."""
    import torch

    tqdm = progress_bar()

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
    import torch

    return target if dtype_of(target) == torch.float32 else copy.deepcopy(target).float()


class TrainLog(NamedTuple):
    losses: list[float]
    steps: int
    seconds: float

    def summary(self) -> dict:
        """What a saved drafter records of its training: steps, seconds and the mean of the last 20 losses."""
        return {"steps": self.steps, "seconds": round(self.seconds, 1),
                "final_loss": round(float(np.mean(self.losses[-20:])), 4)}


def fit(params, loss_fn: Callable[[np.ndarray], object], n_windows: int, steps: int,
        seconds: float | None = None, batch: int = 8, lr: float = 1e-3, seed: int = 0,
        desc: str = "training", progress: bool = True) -> TrainLog:
    """AdamW with warm-up and cosine decay over `steps` minibatches of window indices, stopping early
    when `seconds` run out (the schedule is set for `steps`, so a cut run ends at a higher rate)."""
    import torch

    tqdm = progress_bar()

    n_windows = checks.whole(n_windows, "n_windows", scalar=True)
    steps = checks.whole(steps, "steps", scalar=True)
    batch, lr = checks.whole(batch, "batch", scalar=True), checks.positive(lr, "lr", scalar=True)
    if seconds is not None:
        seconds = checks.positive(seconds, "seconds", scalar=True)
    params = [p for p in params if p.requires_grad]
    if not params:
        raise ValueError("params: nothing to train (no parameter requires grad)")
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
    if limit is not None:
        limit = checks.whole(limit, "limit", scalar=True)
    win = windows(*sequences(name), length)
    return win if limit is None else Windows(*(a[:limit] for a in win))


# --------------------------------------------------------------------------- caches and what they are for
# Everything computed from a target (teacher targets, hidden states, quick-trained drafters: weights.py) is
# cached under cache_dir()/drafters, keyed by the target's fingerprint, and checked against a sha256 kept
# beside it.

def fingerprint(model) -> str:
    """sha256 over every parameter's and buffer's name, shape, dtype and bytes: what the caches computed
    from a model's outputs are keyed by, so another model of the same size, or this one after its weights
    changed, is never served them. It is hashed each time, no memo: 0.45 to 0.65 s for SmolLM2-135M's 538 MB
    in fp32 on 2 busy CPU cores, next to minutes of teacher pass, and a memo could miss an in-place edit."""
    import torch

    h = hashlib.sha256()
    for kind, named in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        for name, tensor in named:
            h.update(f"{kind} {name} {tuple(tensor.shape)} {tensor.dtype}\n".encode())
            try:
                data = host(tensor)
            except NotImplementedError as exc:  # a meta tensor has a shape but no data
                raise ValueError(f"{name} lives on the meta device, so the model has no weights to "
                                 "fingerprint: load it with real weights first") from exc
            h.update(data.contiguous().reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()


def cache_file(kind: str, inputs: np.ndarray, key: str, suffix: str) -> Path:
    """cache_dir()/drafters/<kind>-<hash of the inputs and key><suffix>."""
    digest = hashlib.sha256(inputs.astype(np.int64).tobytes() + key.encode()).hexdigest()[:16]
    return cache_dir() / "drafters" / f"{kind}-{digest}{suffix}"


def _checksum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def stamp(path: Path) -> Path:
    """Write the sha256 of a finished cache file beside it, in sha256sum's format (`sha256sum -c` reads
    it too). Written after the file, so a run cut short leaves a file without one, which read_cached
    refuses."""
    write_atomic(_checksum_path(path), f"{sha256_of(path)}  {path.name}\n")
    return path


def write_cached(path: Path, data: bytes) -> Path:
    """Write a cache file atomically, then its checksum (stamp)."""
    make_folder(path.parent)  # a file in the way is named, not a bare NotADirectoryError
    return stamp(write_atomic(path, data))


def read_cached(path: Path, parse: Callable[[Path], object], redo: str = "recomputing it"):
    """parse(path) for a cache file whose checksum matches the one beside it; None when there is no file,
    and also, after one printed line naming it, when it is damaged: no checksum, another checksum (a
    flipped byte) or any error while parsing it (a truncated file). The caller then recomputes it."""
    if not path.exists():
        return None
    try:
        checksum = _checksum_path(path)
        if not checksum.exists():
            raise ValueError("no checksum beside it")
        if checksum.read_text().split()[:1] != [sha256_of(path)]:
            raise ValueError(f"its sha256 differs from the one in {checksum.name}")
        return parse(path)
    except Exception as exc:  # any load error: the file is only a cache, so make it again
        print(f"The cached {path} is damaged ({exc}); {redo}.")
        return None


def cached_arrays(kind: str, target, inputs: np.ndarray, key: str, layout: dict[str, tuple[tuple, type]],
                  compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """compute(): arrays computed from `target` over `inputs`, cached on disk as
    cache_dir()/drafters/<kind>-<hash of the inputs, key and the target's fingerprint>.npz and checksummed.
    layout: {name: (shape, dtype stored on disk)}. A cached file that is damaged, or whose arrays have
    other shapes, is recomputed. Teacher targets (below) and Medusa's hidden states are kept this way."""
    path = cache_file(kind, inputs, f"{key}/{fingerprint(target)}", ".npz")

    def parse(p):
        with np.load(p) as z:
            arrays = {name: z[name] for name in layout}
        for name, (shape, _) in layout.items():
            if arrays[name].shape != shape:
                raise ValueError(f"its {name} has shape {arrays[name].shape}, not {shape}")
        return arrays

    cached = read_cached(path, parse)
    if cached is not None:
        return cached
    arrays = compute()
    buf = io.BytesIO()
    np.savez(buf, **{name: arrays[name].astype(dtype, copy=False) for name, (_, dtype) in layout.items()})
    write_cached(path, buf.getvalue())
    return arrays


def teacher_targets(target, inputs: np.ndarray, k: int = 8, progress: bool = True):
    """teacher_topk, cached on disk by the inputs' hash, k and the target's fingerprint (about a minute
    per 30k tokens on 2 cores, so a rerun of a training script skips it)."""
    shape = (*inputs.shape, k)

    def compute():
        ids, probs = teacher_topk(target, inputs, k, progress=progress)
        return {"ids": ids, "probs": probs}

    got = cached_arrays("teacher", target, inputs, str(k),
                        {"ids": (shape, np.int32), "probs": (shape, np.float16)}, compute)
    return got["ids"].astype(np.int64, copy=False), got["probs"].astype(np.float32, copy=False)


def hidden_states(target, inputs: np.ndarray, batch: int = 8, progress: bool = True,
                  layers: tuple[int, ...] | None = None) -> np.ndarray:
    """(N, L, d) float16: the target's last hidden state (after the final norm) at every position of
    every window, cached on disk as teacher_targets are (cached_arrays). Medusa's heads, EagleLite and
    ParallelLite train on them. layers: these of the model's hidden states instead (indices into
    output_hidden_states, -1 the last after the norm), side by side: (N, L, len(layers) * d), what a
    drafter with those state_layers is handed (Eagle3Lite)."""
    import torch

    tqdm = progress_bar()

    def compute():
        out = []
        with torch.inference_mode():
            quiet = {} if progress else {"disable": True}
            for s in tqdm(range(0, len(inputs), batch), desc="hidden states", **quiet):
                batch_ids = to_model(target, torch.as_tensor(inputs[s:s + batch]))
                if layers is None:
                    out.append(host(target.model(batch_ids).last_hidden_state.half()))
                else:
                    got = target.model(batch_ids, output_hidden_states=True).hidden_states
                    out.append(host(torch.cat([got[i] for i in layers], -1).half()))
        return {"hidden": torch.cat(out).numpy()}

    width = target.config.hidden_size * (1 if layers is None else len(layers))
    layout = {"hidden": ((*inputs.shape, width), np.float16)}
    key = "hidden" if layers is None else "hidden-" + "-".join(map(str, layers))
    return cached_arrays("hidden", target, inputs, key, layout, compute)["hidden"]


def distill(student, target, steps: int, seconds: float | None = None, batch: int = 8,
            data: Windows | None = None, teacher_k: int = 8, lr: float = 1e-3,
            desc: str = "distilling", progress: bool = True) -> TrainLog:
    """Train the student's trainable parameters to predict the target's next-token distribution on
    `data` (default: the self-distillation set). With teacher_k = 0 the loss uses the next token only,
    which needs no teacher pass. `student(input_ids).logits` must be (B, L, V)."""
    import torch

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
