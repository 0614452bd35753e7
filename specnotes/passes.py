"""Target passes over a KV cache, and the cache edits after them: the one place that speaks
transformers' model and cache API (the forward signature, the cache argument's name, crop, layers).

- forward_pass: any causal pass (prefill, one decode step, a draft model's steps);
- verify_pass: a round's one target pass, for chains and trees alike (the tree mask only for trees), with
  the target's hidden states when a drafter asks for them;
- crop and compact: keep only the accepted tokens' keys and values.
"""

from __future__ import annotations

import inspect
from functools import cache

from specnotes import checks
from specnotes import tree as trees
from specnotes.placement import device_of, dtype_of


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
        keep = checks.whole(keep, "keep", scalar=True)
    kwargs = {cache_kwarg(type(model)): cache}
    if keep is not None and _accepts_logits_to_keep(type(model)):
        kwargs["logits_to_keep"] = keep
    out = model(input_ids, use_cache=True, **kwargs)
    if keep is not None:
        out.logits = out.logits[:, -keep:]
    return out.logits, returned_cache(out)


def verify_pass(target, cache, tokens: list[int], tree: trees.Tree | None = None, n_uncached: int = 0,
                hidden: bool = False):
    """A round's ONE target pass: `tokens` = [uncached prompt tokens, last committed token, drafts (chain)
    or tree nodes] on top of the cache, which holds every earlier token. Returns (logits (len(tokens) -
    n_uncached, V) after the last token and after each draft/node, hidden states (len(tokens), d) after the
    final norm or None, the cache now holding them all).

    A chain is an ordinary causal pass; only a real tree gets the tree attention mask and depth positions
    (specnotes.tree.mask), so each node sees the cache, the prompt, the root and its own ancestors. The first
    round also carries the prompt (n_uncached: every prompt token but the last), so the prompt pass verifies
    the first draft too, as transformers' assisted generation does."""
    import torch

    ids = torch.tensor([tokens], device=device_of(target))
    kwargs = {cache_kwarg(type(target)): cache, "use_cache": True}
    if tree is not None:
        positions, mask = trees.mask(cache_length(cache), n_uncached, tree, ids.device, dtype_of(target))
        kwargs.update(attention_mask=mask, position_ids=positions)
    if _accepts_logits_to_keep(type(target)):
        kwargs["logits_to_keep"] = len(tokens) - n_uncached
    out = target(ids, output_hidden_states=hidden, **kwargs)
    logits = out.logits[0, n_uncached - len(tokens):]
    return logits, (out.hidden_states[-1][0] if hidden else None), returned_cache(out)


def crop(cache, n: int) -> None:
    """Drop the last n positions' keys and values (transformers 5.x: crop(-n) removes n)."""
    if n > 0:
        cache.crop(-n)


def compact(cache, start: int, keep: list[int]) -> None:
    """Keep the first `start` cached positions and then only the listed positions after them (offsets from
    `start`, increasing): the accepted branch of a tree pass, without the other branches. The kept rows are
    moved down into place and the rest cropped; nothing else in the cache is copied. When `keep` is a prefix
    (a chain's accepted drafts) this is an ordinary crop."""
    moved = [(start + i, start + k) for i, k in enumerate(keep) if k != i]
    if moved:
        import torch

        dst, src = (torch.tensor(side) for side in zip(*moved, strict=True))
        for layer in cache.layers:
            for name in ("keys", "values"):
                rows = getattr(layer, name)
                rows[..., dst.to(rows.device), :] = rows[..., src.to(rows.device), :]
    crop(cache, cache.get_seq_length() - start - len(keep))
