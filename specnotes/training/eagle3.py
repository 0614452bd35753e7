"""Eagle3Lite's network: EagleLite's one layer and input projection, with EAGLE-3's two changes (Li et al.
2025, arXiv 2503.01840): the feature it reads fuses the target's hidden states after a low, a middle and
the last layer (the last after the final norm, EagleLite's feature), and it is trained by "training-time
test": on its own outputs, as it drafts, not only on the target's features. Its training and its weights;
the drafter is specnotes.drafters.eagle3.Eagle3Lite. Notebook 06.

Training-time test, here: the first step reads the target's fused features at every position of a window
and guesses the token after next, as EagleLite does; step 2 reads that step's own output in place of the
target's feature one position on, with the true next token, and guesses one token further; step 3 the
same again. Step j's row for position t attends to the target-fed rows up to t and to its own chain's
rows (steps 2..j at t), which is what the drafting pass sees when it chains its own guesses (ttt_layout).
The loss is KD only: EAGLE-3 drops EagleLite's feature-regression term, so the output is free to be
whatever helps the next guess. The fusion starts as [0 | 0 | I] (EagleLite's feature). The committed
weights start from EagleLite's trained layer and projection (`start`, tools/train_drafters.py), so
Eagle3Lite is EagleLite's successor: whatever it gains on EagleLite is what fusing three layers and
training on its own guesses added. Without `start` the layer starts as a copy of the target's last, as
EagleLite's did (the quick fallback trains that way).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch

from specnotes import checks, weights
from specnotes.placement import follow
from specnotes.training.eagle import VOCAB, EagleModel, train_features
from specnotes.training.parallel import additive

FILE = "eagle3-lite.safetensors"
STEPS = 3  # training-time test: the target-fed step and two steps on the draft's own outputs


def fused_layers(n_layers: int) -> tuple[int, int, int]:
    """The hidden states the feature fuses, as indices into output_hidden_states: after a low layer, a
    middle one, and the last (-1, after the final norm): (3, 15, -1) for SmolLM2-135M's 30 layers."""
    n_layers = checks.whole(n_layers, "n_layers", low=2, scalar=True)
    return (max(1, n_layers // 10), n_layers // 2, -1)


class Eagle3Model(EagleModel):
    """EagleLite's layer and input projection behind a fusion: (states of `layers`, side by side) -> d."""

    def __init__(self, target):
        super().__init__(target)
        self.layers = fused_layers(target.config.num_hidden_layers)
        d = target.config.hidden_size
        self.fuse = torch.nn.Linear(len(self.layers) * d, d, bias=False)
        with torch.no_grad():  # start as EagleLite's feature: the last hidden state
            self.fuse.weight.zero_()
            self.fuse.weight[:, -d:] = torch.eye(d)

    def features_of(self, states):
        """(..., 3d) target states of the fused layers -> (..., d) the feature the layer reads."""
        return self.fuse(states.to(self.fuse.weight.dtype))


def new_model(target, start: EagleModel | None = None) -> Eagle3Model:
    """An untrained Eagle3Lite network around `target`, on its device and in its dtype; with `start` (a
    trained EagleModel of the same sizes) its layer and input projection are copies of start's."""
    model = follow(target, Eagle3Model(target))
    if start is not None:
        if type(start) is not EagleModel:
            raise TypeError(f"start must be an EagleLite network (training.eagle.EagleModel), got "
                            f"{type(start).__name__}")
        own = {n: p for n, p in model.named_parameters() if p.requires_grad and not n.startswith("fuse.")}
        theirs = dict(start.named_parameters())
        misfit = [n for n, p in own.items() if n not in theirs or theirs[n].shape != p.shape]
        if misfit:
            raise ValueError(f"start: an EagleLite network of other sizes (no match for {misfit[:3]})")
        with torch.no_grad():
            for n, p in own.items():
                p.copy_(theirs[n])
    return model


def committed_path() -> Path:
    return weights.DATA / FILE


def ttt_layout(n: int, steps: int = STEPS) -> tuple[np.ndarray, np.ndarray]:
    """The training-time-test pass over n positions and `steps` steps, rows step-major: (positions (steps
    * n,), see (steps * n, steps * n) bool). Step 1 (rows 0..n-1) is causal over the target-fed rows;
    step j's row for position t sits at t + j - 1 and sees the target-fed rows 0..t and its own chain's
    rows at t in steps 2..j, never another position's guesses."""
    n, steps = checks.whole(n, "n", scalar=True), checks.whole(steps, "steps", scalar=True)
    positions = np.concatenate([np.arange(n) + j for j in range(steps)])
    see = np.zeros((steps * n, steps * n), dtype=bool)
    causal, own = np.tril(np.ones((n, n), dtype=bool)), np.eye(n, dtype=bool)
    for j in range(steps):
        see[j * n:(j + 1) * n, :n] = causal
        for i in range(1, j + 1):
            see[j * n:(j + 1) * n, i * n:(i + 1) * n] = own
    return positions, see


def train_eagle3(target, steps: int = 1000, seconds: float | None = None, data=None,
                 vocab: int | None = VOCAB, batch: int = 8, lr: float = 2e-3, ttt: int = STEPS,
                 step_weight: float = 1.0, feature_weight: float = 0.0, start: EagleModel | None = None,
                 save_to: Path | None = None, progress: bool = True):
    """Fit Eagle3Lite on windows of `data` (default EagleLite's train_windows()), in fp32, by training-time
    test over `ttt` steps (ttt=1: the fused feature alone, no test on its own outputs), with step j's
    loss weighted step_weight ** (j - 1) (below 1: the first guess, which every round makes, counts most)
    and, with feature_weight > 0, EagleLite's smooth-L1 pull of each step's output toward the target's
    state added to its KD term (0: KD alone, as EAGLE-3),
    from `start`'s layer and projection (a trained EagleLite network, training.eagle.load_eagle) or, with
    None, from a copy of the target's last layer. Returns (model, TrainLog)."""
    ttt = checks.whole(ttt, "ttt (training-time-test steps)", scalar=True)
    step_weight = checks.positive(step_weight, "step_weight", scalar=True)
    feature_weight = checks.positive(feature_weight, "feature_weight", zero=True, scalar=True)
    d_model = target.config.hidden_size

    def make_loss(model, d):
        device = d.tokens.device
        n = d.tokens.shape[1] - ttt  # positions t with a token t+j and a target at t+j for every step j
        if n < 1:
            raise ValueError(f"data: windows of {d.tokens.shape[1]} tokens are too short for {ttt} steps")
        positions, see = ttt_layout(n, ttt)
        positions, attn = torch.as_tensor(positions, device=device), additive(see, torch.float32, device)

        def loss_fn(idx):
            idx = torch.as_tensor(idx, device=device)
            states, toks, valid_all = d.hidden[idx].float(), d.tokens[idx], d.mask[idx].float()
            feats, cache, total, count = model.features_of(states[:, :n]), None, 0.0, 0.0
            for j in range(1, ttt + 1):
                rows = slice((j - 1) * n, j * n)
                feats, _, cache = model(feats, toks[:, j:j + n], cache, positions[None, rows], use_cache=True,
                                        with_logits=False, attention_mask=attn[..., rows, :j * n])
                # the next step reads this step's own output; the target's distribution of token t+j+1
                # comes from its last state at t+j (the last of the fused layers)
                truth = states[:, j:j + n, -d_model:]
                with torch.no_grad():
                    teacher = torch.softmax(truth @ d.head.T, -1)
                per_row = -(teacher * torch.log_softmax(feats @ d.head.T, -1)).sum(-1)
                if feature_weight:
                    per_row = per_row + feature_weight * torch.nn.functional.smooth_l1_loss(
                        feats, truth, reduction="none").mean(-1)
                valid, w = valid_all[:, j:j + n], step_weight ** (j - 1)
                total, count = total + w * (per_row * valid).sum(), count + w * valid.sum()
            return total / count.clamp_min(1)
        return loss_fn

    build = functools.partial(new_model, start=start)
    recipe = {"ttt": ttt, "step_weight": step_weight, "feature_weight": feature_weight,
              "start": "eagle-lite" if start is not None else "target's last layer"}
    return train_features(target, build, make_loss, steps, seconds, data, vocab, batch, lr,
                          "training Eagle3Lite", save_to, recipe, progress,
                          layers=fused_layers(target.config.num_hidden_layers))


def load_eagle3(target, quick_seconds: float = 30.0, progress: bool = True):
    """The trained Eagle3Lite network for `target`, frozen (weights.load_or_train): the committed one when
    it was trained for a target of its sizes, else one cached for this target, else a quick one."""
    return weights.load_or_train(
        new_model(target), target, what="Eagle3Lite weights", committed=FILE, cached="eagle3-lite",
        train=functools.partial(train_eagle3, target), seconds=quick_seconds, progress=progress,
        advice="pass model=train_eagle3(target, data=...)[0] (specnotes.training.eagle3) with "
               "distill.windows of this target's own text, or model=new_model(target) for an untrained one")
