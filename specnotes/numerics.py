"""Equal in distribution, not bitwise: why speculative greedy can drift from plain greedy. Notebook 08.

A verify pass computes k + 1 positions in one matmul; plain decoding computes them one at a time. The
maths is the same, the order of floating-point additions is not, so the logits differ in the last
bits (fp32) or the last few bits that bf16 keeps. Where the top two logits are almost tied, that is
enough to flip the argmax, and from there the two greedy outputs go their own ways. Both are correct
outputs of the model; they are just not the same string. The lesson: re-run the evals with
speculation on, and pin the configuration (dtype, kernels, k, batch) you evaluated.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from specnotes import checks, engine
from specnotes.decode import plain_generate
from specnotes.env import torch_dtype
from specnotes.passes import forward_pass
from specnotes.placement import device_of, dtype_of
from specnotes.timing import first_difference


def as_dtype(model, dtype):
    """A copy of the model in another dtype (the original is left alone)."""
    dtype = torch_dtype(dtype)
    return model if dtype_of(model) == dtype else copy.deepcopy(model).to(dtype)


@dataclass
class PassComparison:
    dtype: str
    k: int
    max_abs_diff: list[float]  # per position: |one (k+1)-wide pass - k+1 one-wide passes|, max over vocab
    logit_scale: float  # the spread of the logits, for scale
    same_argmax: list[bool]
    margin: list[float]  # top-1 minus top-2 logit of the one-wide passes


def verify_vs_steps(model, input_ids, k: int = 4, dtype=None) -> PassComparison:
    """Feed the next k + 1 greedy tokens once as one verify pass and once one token per pass, both on
    top of the same prompt cache, and compare the logits position by position."""
    import torch

    k = checks.whole(k, "k", scalar=True)
    checks.prompt_ids(input_ids, model.config.vocab_size)
    m = as_dtype(model, dtype) if dtype is not None else model
    ids = input_ids.to(device_of(m))
    with torch.inference_mode():
        logits, cache = forward_pass(m, ids, keep=1)
        tokens, singles = [int(logits[0, -1].argmax())], []
        step_cache = copy.deepcopy(cache)
        for i in range(k + 1):  # the one-token-per-pass path, which also picks the tokens
            out, step_cache = forward_pass(m, torch.tensor([[tokens[i]]], device=ids.device), step_cache)
            singles.append(out[0, -1].float())
            if i < k:
                tokens.append(int(out[0, -1].argmax()))
        wide, _ = forward_pass(m, torch.tensor([tokens], device=ids.device), cache)
    wide = wide[0].float()
    single = torch.stack(singles)
    top2 = torch.topk(single, 2, dim=-1).values
    return PassComparison(
        str(next(m.parameters()).dtype).removeprefix("torch."), k,
        (wide - single).abs().max(-1).values.tolist(), float(single.std()),
        (wide.argmax(-1) == single.argmax(-1)).tolist(), (top2[:, 0] - top2[:, 1]).tolist())


@dataclass
class Divergence:
    dtype: str
    drafter: str
    position: int | None  # first generated position where speculative greedy differs; None if never
    margin_there: float | None  # plain's top-1 minus top-2 logit at that position
    smallest_margin: float  # over all positions compared: how close to a tie the run came
    plain: list[int]
    speculative: list[int]
    margins: list[float]


def first_divergence(model, input_ids, drafter, max_new_tokens: int = 64, k: int = 4, dtype=None,
                     name: str = "") -> Divergence:
    """Plain greedy against speculative greedy with `drafter` (a fresh drafter object) in one dtype
    (margins: see `divergence`)."""
    max_new_tokens = checks.whole(max_new_tokens, "max_new_tokens", scalar=True)
    checks.prompt_ids(input_ids, model.config.vocab_size)
    m = as_dtype(model, dtype) if dtype is not None else model
    ids = input_ids.to(device_of(m))
    plain = plain_generate(m, ids, max_new_tokens, eos_token_id=-1).tokens
    spec = engine.generate(m, drafter, ids, max_new_tokens, k=k, eos_token_id=-1).tokens
    return divergence(m, ids, plain, spec, name or type(drafter).__name__)


def divergence(model, input_ids, plain: list[int], other: list[int], name: str = "") -> Divergence:
    """Where `other` (a speculative run, another engine) first leaves `plain` (greedy from this model), and
    plain's top-1 minus top-2 logit there and at every position up to it: a near-tie (margin at the
    rounding noise) explains a divergence, a wide margin does not.

    The margins come from one forward pass over prompt + plain output (teacher forcing): the same
    logits up to the rounding this module is about, which is fine for telling a near-tie from a gap."""
    import torch

    ids = input_ids.to(device_of(model))
    plain, other = [int(t) for t in plain], [int(t) for t in other]
    with torch.inference_mode():
        full = torch.tensor([[*ids[0].tolist(), *plain]], device=ids.device)
        logits, _ = forward_pass(model, full, keep=len(plain) + 1)
    top2 = torch.topk(logits[0, :-1].float(), 2, dim=-1).values
    margins = (top2[:, 0] - top2[:, 1]).tolist()
    where = first_difference(other, plain)
    upto = len(margins) if where is None else min(where + 1, len(margins))
    return Divergence(str(next(model.parameters()).dtype).removeprefix("torch."), name, where,
                      None if where is None or where >= len(margins) else margins[where],
                      float(np.min(margins[:upto])), plain, other, margins)
