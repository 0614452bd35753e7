"""Target passes over a KV cache, and the cache edits after them: the one place that speaks
transformers' model and cache API (the forward signature, the cache argument's name, crop, layers).

- forward_pass: any causal pass (prefill, one decode step, a chain of drafts);
- chain_pass: a round's verify pass for a chain draft, [last token, drafts] on top of the cache;
- tree_pass: a round's verify pass for a tree draft (or any draft whose drafter wants the target's hidden
  states), with the tree attention mask and depth positions from specnotes.tree;
- crop and compact: keep only the accepted tokens' keys and values.
"""

from __future__ import annotations

import inspect
from functools import cache


@cache
def cache_kwarg(model_class) -> str:
    """The name of the KV-cache argument of model_class.forward: transformers 5.x renamed it from
    past_key_values to cache mid-series."""
    params = inspect.signature(model_class.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


@cache
def _accepts_logits_to_keep(model_class) -> bool:
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
        from specnotes import checks

        keep = checks.whole(keep, "keep", scalar=True)
    kwargs = {cache_kwarg(type(model)): cache}
    if keep is not None and _accepts_logits_to_keep(type(model)):
        kwargs["logits_to_keep"] = keep
    out = model(input_ids, use_cache=True, **kwargs)
    if keep is not None:
        out.logits = out.logits[:, -keep:]
    return out.logits, returned_cache(out)


def chain_pass(target, cache, last_token: int, drafted: list[int], uncached: list[int] = ()):
    """The single target pass of a chain round: [last token, drafts] on top of the cache, which holds every
    earlier token. Returns ((len(drafted)+1, V) logits, the cache now holding them all).

    The first round also carries the prompt (`uncached`: every prompt token but the last), so the
    prompt pass verifies the first draft too, as transformers' assisted generation does."""
    import torch

    from specnotes.placement import device_of

    ids = torch.tensor([[*uncached, last_token, *drafted]], device=device_of(target))
    logits, cache = forward_pass(target, ids, cache, keep=len(drafted) + 1)
    return logits[0], cache


def tree_pass(target, cache, root: int, tree, uncached: list[int] = ()):
    """One target pass over [uncached, root, tree nodes] on top of `cache`. Returns (logits (n+1, V) for
    the root and each node, hidden states (u+n+1, d) of every input row after the final norm, the cache).
    Each node sees the cache, the uncached tokens, the root and its own ancestors (specnotes.tree.mask)."""
    import torch

    from specnotes import tree as trees
    from specnotes.placement import device_of, dtype_of

    device, dtype = device_of(target), dtype_of(target)
    ids = torch.tensor([[*uncached, root, *tree.tokens]], device=device)
    positions, mask = trees.mask(cache_length(cache), len(uncached), tree, device, dtype)
    out = target.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                       **{cache_kwarg(type(target.model)): cache})
    hidden = out.last_hidden_state[0]
    logits = target.lm_head(hidden[len(uncached):])
    return logits, hidden, returned_cache(out)


def crop(cache, n: int) -> None:
    """Drop the last n positions' keys and values (transformers 5.x: crop(-n) removes n)."""
    if n > 0:
        cache.crop(-n)


def compact(cache, start: int, keep: list[int]) -> None:
    """Keep the first `start` cached positions and then only the listed positions after them (offsets
    from `start`), in order: the accepted branch of a tree pass, without the other branches. When `keep`
    is a prefix (a chain's accepted drafts) this is an ordinary crop."""
    import torch

    total = cache.get_seq_length()
    if list(keep) == list(range(len(keep))):  # already a prefix: an ordinary crop
        crop(cache, total - start - len(keep))
        return
    index = torch.as_tensor(list(range(start)) + [start + k for k in keep])
    for layer in cache.layers:
        index = index.to(layer.keys.device)
        layer.keys = layer.keys.index_select(-2, index)
        layer.values = layer.values.index_select(-2, index)
