"""Plain passes over a KV cache and the shims over transformers' model and cache API (the forward
signature, the cache argument's name, crop), which specnotes.verify's round pass and compaction use too.

- forward_pass: any causal pass (prefill, one decode step, a draft model's steps);
- crop: drop the last positions' keys and values.
A round's verify pass and its KV compaction are verification's own steps: specnotes.verify.
"""

from __future__ import annotations

import inspect
from functools import cache

from specnotes import checks


@cache
def cache_kwarg(model_class) -> str:
    """The name of the KV-cache argument of model_class.forward: transformers 5.x renamed it from
    past_key_values to cache mid-series."""
    params = inspect.signature(model_class.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


@cache
def accepts_logits_to_keep(model_class) -> bool:
    return "logits_to_keep" in inspect.signature(model_class.forward).parameters


def returned_cache(out):
    """The updated cache from a model output, under either name."""
    new_cache = out.get("cache")
    return new_cache if new_cache is not None else out.get("past_key_values")


def cache_length(cache) -> int:
    """Tokens the cache holds (0 for no cache yet)."""
    return 0 if cache is None else cache.get_seq_length()


def forward_pass(model, input_ids, cache=None, keep: int | None = None):
    """One forward pass with a KV cache: returns ((1, T, V) logits, the updated cache).
    keep=n returns only the last n rows (the LM head then skips the rest: a long prompt's logits
    would otherwise cost T × V floats)."""
    if keep is not None:
        keep = checks.whole(keep, "keep", scalar=True)
    kwargs = {cache_kwarg(type(model)): cache}
    if keep is not None and accepts_logits_to_keep(type(model)):
        kwargs["logits_to_keep"] = keep
    out = model(input_ids, use_cache=True, **kwargs)
    if keep is not None:
        out.logits = out.logits[:, -keep:]
    return out.logits, returned_cache(out)


def crop(cache, n: int) -> None:
    """Drop the last n positions' keys and values (transformers 5.x: crop(-n) removes n)."""
    if n > 0:
        cache.crop(-n)
