"""Lossy by design: the acceptance knobs engines ship beside the exact rule, each one change to it.

Each knob changes the accept probability min(1, p(x)/q(x)) or the residual max(0, p - q), and so buys
acceptance with exactness. The engine runs them (engine.generate(..., rule="threshold"), or rule=a knob
object with its own setting), the toy's bug zoo runs them on the seed pair, and the calibrated chi-square
test flags every one (notebook 04, "lossy by design"). Medusa's typical acceptance, the fourth, is a walk
over a tree and lives in specnotes.tree.
The methods work on numpy arrays and torch tensors alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from specnotes import checks, rules, toy


def _clip1(ratio):
    return ratio.clip(max=1) if not isinstance(ratio, np.ndarray) else np.minimum(ratio, 1)


@dataclass(frozen=True)
class Threshold:
    """Keep a draft outright when p(x)/q(x) >= tau (< 1), else by the usual coin. A cousin of SGLang's
    accept thresholds (--speculative-accept-threshold-single / -acc, 1.0 by default: exact)."""

    tau: float = 0.5
    name: ClassVar[str] = "threshold"

    def __post_init__(self):
        tau = checks.probability(self.tau, "tau (1 is the exact rule)", low_open=True, high_open=True,
                                 scalar=True)
        object.__setattr__(self, "tau", tau)

    def acceptance(self, ratio):
        return (ratio >= self.tau) + (ratio < self.tau) * _clip1(ratio)

    def residual(self, p, q):
        return None  # the exact residual


@dataclass(frozen=True)
class Synthetic:
    """Keep every draft with a set probability, whatever p and q say; the residual as usual. vLLM's
    rejection_sample_method="synthetic" (and llama.cpp's synthetic acceptance) accept at set rates in this
    spirit, to test performance. rate: one probability for every position, or one per draft position
    (a1, a2, ...; positions past the last take the last)."""

    rate: float | tuple = 0.7
    name: ClassVar[str] = "synthetic"

    def __post_init__(self):
        if np.ndim(self.rate) == 0:
            rate = checks.probability(self.rate, "rate", scalar=True)
        else:
            per_position = checks.probability(list(self.rate), "rate (one per draft position)")
            rate = tuple(float(r) for r in np.atleast_1d(per_position))
            if not rate:
                raise ValueError("rate needs at least one acceptance rate (one per draft position)")
        object.__setattr__(self, "rate", rate)

    def rates(self, k: int) -> np.ndarray:
        """(k,) the rate of each of k draft positions."""
        r = np.atleast_1d(np.asarray(self.rate, dtype=np.float64))
        return np.concatenate([r, np.repeat(r[-1], max(0, k - r.size))])[:k]

    def acceptance(self, ratio):
        """The set rates, shaped like ratio; a per-position knob reads ratio's last axis as the positions
        (the engine's (k,) ratios; a (V, V) toy table has no positions: use toy_round)."""
        if np.ndim(self.rate) == 0:
            return _clip1(ratio) * 0 + self.rate
        rates = self.rates(ratio.shape[-1])
        if isinstance(ratio, np.ndarray):
            return ratio * 0 + rates
        import torch

        return ratio * 0 + torch.as_tensor(rates, dtype=ratio.dtype, device=ratio.device)

    def residual(self, p, q):
        return None

    def toy_round(self, P, Q, prev, k, rng):
        """A toy round (toy.rejection_round's signature) that keeps draft position i at rates(k)[i]."""
        u = rng.random((len(prev), 2 * k + 1))
        drafted, ctx = toy.draft(Q, prev, k, u[:, :k])
        n_acc = rules.first_rejection(u[:, k:2 * k] < self.rates(k))
        nxt = toy.finish(rules.residual(P, Q), P, ctx, n_acc, u[:, 2 * k])
        return (*toy.assemble(drafted, n_acc, nxt), n_acc)


@dataclass(frozen=True)
class TopKResidual:
    """The exact accept test, but p and q are cut to their `top` largest entries before max(0, p - q):
    mass of p outside its top entries can never come back after a rejection. A plausible shortcut for a
    fused kernel (we found no engine that ships it)."""

    top: int = 2
    name: ClassVar[str] = "top-k-residual"

    def __post_init__(self):
        object.__setattr__(self, "top", checks.whole(self.top, "top", scalar=True))

    def acceptance(self, ratio):
        return _clip1(ratio)

    def residual(self, p, q):
        """(..., V) max(0, cut(p) - cut(q)) renormalized; p cut, where that leaves nothing."""
        cut_p, cut_q = _top(p, self.top), _top(q, self.top)
        raw = (cut_p - cut_q).clip(min=0) if not isinstance(p, np.ndarray) else np.maximum(cut_p - cut_q, 0)
        mass = raw.sum(-1, keepdims=True)
        fallback = cut_p / cut_p.sum(-1, keepdims=True)
        if isinstance(p, np.ndarray):
            return np.where(mass > 0, raw / np.where(mass > 0, mass, 1), fallback)
        return (raw / mass.clamp_min(1e-30)).where(mass > 0, fallback)


def _top(p, top: int):
    """p with all but its `top` largest entries (along the last axis) set to 0 (ties at the cut kept)."""
    if isinstance(p, np.ndarray):
        kth = np.sort(p, axis=-1)[..., -min(top, p.shape[-1]), None]
        return np.where(p >= kth, p, 0)
    import torch

    kth = torch.topk(p, min(top, p.shape[-1]), dim=-1).values[..., -1:]
    return torch.where(p >= kth, p, torch.zeros_like(p))


KNOBS = {knob.name: knob for knob in (Threshold(), Synthetic(), TopKResidual())}  # name: default setting


def knob(rule):
    """The knob a rule names ("threshold", "synthetic", "top-k-residual"), or the knob itself; None for
    any other rule (the exact ones)."""
    if isinstance(rule, (Threshold, Synthetic, TopKResidual)):
        return rule
    return KNOBS.get(rule) if isinstance(rule, str) else None


def toy_tables(rule, P, Q):
    """(accept, fix) (V, V) tables of a knob for toy.rejection_round: the accept probability of every
    (context, token) and the rows a rejection resamples from."""

    k = knob(rule)
    if isinstance(k, Synthetic) and np.ndim(k.rate):
        raise ValueError("a per-position Synthetic rate has no (V, V) table: the toy runs it as "
                         "rule=knob.toy_round")
    P, Q = np.asarray(P, dtype=np.float64), np.asarray(Q, dtype=np.float64)
    accept = k.acceptance(P / np.where(Q > 0, Q, 1))
    fix = k.residual(P, Q)
    return accept, (rules.residual(P, Q) if fix is None else fix)
