"""Medusa heads: a few residual blocks on the target's last hidden state that guess the tokens two, three,
four positions ahead, all through the target's own (frozen) LM head. Notebook 06, part 2.

Head h reads the hidden state at position t, the one whose LM-head output is token t+1, and predicts
token t+2+h. Their top candidates form a static tree (specnotes.tree) that the target verifies in one
pass. Drafting costs one small matmul per head plus one LM-head read for all heads together, which is
why Medusa is the best candidate for a wall-clock win on a CPU.

Trained by self-distillation: the frozen target's hidden states and its top-k next-token distributions
over the same windows, cached on disk. Committed weights (tools/train_drafters.py) are used when
present; otherwise a quick set is trained (about 30 s) and cached.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch

from specnotes import distill, weights
from specnotes.drafters.base import Draft, Drafter

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
    from specnotes import checks
    from specnotes.placement import follow

    n_heads = checks.whole(n_heads, "n_heads", high=64, scalar=True)
    return follow(target, MedusaHeads(target, n_heads))


def committed_path(n_heads: int) -> Path:
    return weights.DATA / FILE.format(n=n_heads)


def hidden_states(target, inputs: np.ndarray, batch: int = 8, progress: bool = True) -> np.ndarray:
    """(N, L, d) float16: the target's last hidden state (after the final norm) at every position of
    every window, cached on disk as distill.teacher_targets are (distill.cached_arrays)."""
    from specnotes.env import progress_bar
    from specnotes.placement import host, to_model

    tqdm = progress_bar()

    def compute():
        out = []
        with torch.inference_mode():
            quiet = {} if progress else {"disable": True}
            for s in tqdm(range(0, len(inputs), batch), desc="hidden states", **quiet):
                batch_ids = to_model(target, torch.as_tensor(inputs[s:s + batch]))
                out.append(host(target.model(batch_ids).last_hidden_state.half()))
        return {"hidden": torch.cat(out).numpy()}

    shape = (*inputs.shape, target.config.hidden_size)
    return distill.cached_arrays("hidden", target, inputs, "hidden", {"hidden": (shape, np.float16)},
                                 compute)["hidden"]


def train_medusa(target, n_heads: int = 3, steps: int = 600, seconds: float | None = None, data=None,
                 teacher_k: int = 8, positions: int = 256, lr: float = 1e-3, save_to: Path | None = None,
                 progress: bool = True):
    """Fit the heads to the target's own distribution `2 + h` positions ahead (soft top-k targets), on
    random positions of `data` (default: the self-distillation windows). Returns (heads, TrainLog)."""
    from specnotes.placement import device_of

    work = distill.fp32_twin(target)  # train in fp32, cast to the target's dtype at the end
    device = device_of(work)
    win = distill.self_windows() if data is None else data
    hidden = torch.as_tensor(hidden_states(work, win.inputs, progress=progress), device=device)
    ids, probs = distill.teacher_targets(work, win.inputs, teacher_k, progress=progress)
    ids, probs, mask = (torch.as_tensor(a, device=device) for a in (ids, probs, win.mask))
    n, length = win.inputs.shape
    # position j's head h is scored on the teacher's distribution at j + 1 + h (the token at j + 2 + h),
    # where that token is one the target wrote
    rows, cols = np.nonzero(win.mask[:, 1:])
    heads = new_heads(work, n_heads)

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
    if work is not target:
        heads = weights.transfer(heads, new_heads(target, n_heads))
    if save_to is not None:
        weights.save(heads, save_to, {"n_heads": n_heads, **log.summary()}, target=target)
    return weights.freeze(heads), log


def load_medusa_heads(target, n_heads: int = 3, quick_seconds: float = 30.0, progress: bool = True):
    """Trained heads for `target`, frozen (weights.load_or_train): the committed ones when they were
    trained for a target of its sizes, else ones cached for this target, else a quick set trained now and
    cached. A target with another vocabulary than SmolLM2's gets a ValueError that says what to pass."""
    return weights.load_or_train(
        new_heads(target, n_heads), target, what="Medusa heads", committed=FILE.format(n=n_heads),
        cached=f"medusa-{n_heads}", train=functools.partial(train_medusa, target, n_heads),
        seconds=quick_seconds, progress=progress,
        advice=f"pass heads=train_medusa(target, {n_heads}, data=...)[0] (specnotes.drafters.medusa) with "
               f"distill.windows of this target's own text, or heads=new_heads(target, {n_heads}) for "
               "untrained ones")


class Medusa(Drafter):
    """The tree drafter: the heads' top candidates at each depth arranged as a static tree.

    widths[h] is how many of head h's candidates the tree tries (under the best branch so far; see
    tree.default_choices), so the tree has sum(widths) nodes and depth len(widths) <= n_heads.
    heads: "trained" (committed or cached; a quick set otherwise), or a MedusaHeads module."""

    needs = frozenset({"states"})  # the heads read the target's last hidden state
    drafts_trees = True

    def __init__(self, target, heads="trained", widths=(3, 2, 2), n_heads: int = 3):
        from specnotes import checks, tree

        if isinstance(heads, str) and heads != "trained":
            raise ValueError(f"heads must be 'trained', or heads from new_heads/train_medusa, got {heads!r}")
        self.heads = load_medusa_heads(target, n_heads) if heads == "trained" else heads
        if not isinstance(getattr(self.heads, "n_heads", None), int):
            raise TypeError(f"heads must be 'trained' or a MedusaHeads module (new_heads(target) or "
                            f"train_medusa(target)[0]), got {type(heads).__name__}")
        if not isinstance(widths, (list, tuple)) or not widths:
            raise TypeError(f"widths must be a non-empty tuple, one width per head (e.g. (3, 2, 2)), got "
                            f"{widths!r}")
        widths = [checks.whole(w, "widths", high=target.config.vocab_size, scalar=True) for w in widths]
        if len(widths) > self.heads.n_heads:
            raise ValueError(f"widths {tuple(widths)} need one width per head, at most {self.heads.n_heads}")
        self.widths = tuple(widths)
        self.choices = tree.default_choices(self.widths)
        self.state = None  # the target's last hidden state: the one that chose the newest token

    def reset(self, prompt: list[int]) -> None:
        self.state = None

    def propose(self, tokens: list[int], k: int, sampler) -> Draft:
        import torch

        from specnotes import tree

        if self.state is None:  # the first round: the prompt pass has not produced any states yet
            return Draft([])
        with torch.inference_mode():
            logits = self.heads(self.state)[:len(self.widths)]  # (depth, V)
            top = torch.topk(logits, max(self.widths), dim=-1).indices.tolist()  # one host sync
            candidates = [row[:w] for row, w in zip(top, self.widths, strict=True)]
        t = tree.static_tree(candidates, self.choices).cut(k)  # k caps the depth
        return Draft(t.tokens, None, t.parents)

    def update(self, feedback) -> None:
        self.state = feedback.states[-1]
