"""Tensor placement, the device rule: every tensor the package makes for a model goes to that model's
device, every module built around a target takes the target's device and dtype, and every device-to-host
copy goes through host(). Used by the engine's passes, the drafters, the trainers and the measurements.
"""

from __future__ import annotations


def device_of(model):
    """The torch.device that a model's (or module's) parameters live on."""
    try:
        return next(model.parameters()).device
    except StopIteration:
        raise ValueError(f"{type(model).__name__} has no parameters, so it has no device") from None


def dtype_of(model):
    """The floating dtype of a model's parameters (the dtype its activations run in)."""
    for p in model.parameters():
        if p.is_floating_point():
            return p.dtype
    raise ValueError(f"{type(model).__name__} has no floating-point parameters")


def to_model(model, tensor):
    """`tensor` on the model's device (ids, masks, positions: whatever the model will read)."""
    return tensor.to(device_of(model))


def follow(target, module):
    """`module` moved to the target's device and cast to its dtype: for heads, adapters and feature
    drafters built around a target."""
    return module.to(device=device_of(target), dtype=dtype_of(target))


def host(tensor):
    """The explicit device-to-host copy: a detached CPU tensor (call .numpy() on it)."""
    return tensor.detach().cpu()
