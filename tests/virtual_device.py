"""A second device on a CPU-only machine, so the tests can catch device bugs without a GPU.

Inside `virtual_device()`, `model.to(VIRTUAL)` moves a model to a device that reports itself as
`meta` but keeps real data (on the CPU, out of sight), so whole generation loops run on it. It behaves
the way a CUDA device does where device bugs live:
- an op that mixes a virtual tensor with a CPU tensor (other than a 0-dim scalar) raises torch's
  "Expected all tensors to be on the same device";
- `.numpy()` (and `np.asarray`) on a virtual tensor raises, as on CUDA: the host copy must be explicit
  (`.cpu()`);
- `.tolist()`, `.item()`, `int()` work, as on CUDA (they synchronize);
- a tensor made with `device=` the virtual device, or moved there with `.to()`, is virtual; a
  `torch.Generator(device=...)` made for it is too, and using a CPU generator with virtual tensors
  (or the reverse) raises, as on CUDA.
The `meta` device is the only non-CPU device a CPU build of torch has; real meta tensors carry no data,
so a kernel that makes one internally from a virtual tensor's options is emulated here on the CPU
(scaled-dot-product attention, one_hot). Any other such op fails loudly with a message naming it.
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves, tree_map

VIRTUAL = torch.device("meta")
_GENERATOR = torch.Generator  # the real class: virtual_device() swaps torch.Generator while it runs

# ops that may legally take tensors from two devices (copies, and CPU index tensors into a device tensor)
_CROSS_DEVICE_OK = {"copy_", "_to_copy", "index", "index_put", "index_put_", "_index_put_impl_",
                    "_local_scalar_dense"}


_SET_DATA = torch.Tensor.data.__set__  # a method-wrapper: compared with ==, a new one each lookup


def _is_virtual(device) -> bool:
    if device is None or isinstance(device, int):
        return False
    return torch.device(device).type == VIRTUAL.type


class Elsewhere(torch.Tensor):
    """A CPU tensor that reports living on VIRTUAL."""

    @staticmethod
    def __new__(cls, elem):
        if type(elem) is not torch.Tensor:  # a Parameter: keep its data, not its class
            with torch._C.DisableTorchFunctionSubclass():
                elem = torch.Tensor._make_subclass(torch.Tensor, elem.detach(), False)
        if elem.device.type != "cpu":
            raise RuntimeError(f"virtual_device: a {elem.device} tensor cannot be made virtual")
        # an inference-mode wrapper exactly when the data is one (a view of a normal tensor is normal)
        with torch.inference_mode(elem.is_inference()):
            r = torch.Tensor._make_wrapper_subclass(cls, elem.shape, strides=elem.stride(), dtype=elem.dtype,
                                                    device=VIRTUAL, requires_grad=elem.requires_grad,
                                                    storage_offset=elem.storage_offset())
        r.elem = elem.detach() if elem.requires_grad else elem
        return r

    def __repr__(self):
        return f"Elsewhere({self.elem!r})"

    # host reads that a CUDA tensor allows (they synchronize) and the one it refuses
    def tolist(self):
        return self.elem.tolist()

    def numpy(self, *args, **kwargs):
        raise TypeError("can't convert meta device type tensor to numpy. Use Tensor.cpu() to copy the "
                        "tensor to host memory first. (virtual_device: this is the CUDA error)")

    def __array__(self, *args, **kwargs):
        return self.numpy()

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        seen = {"virtual": False, "cpu": False, "meta": False}
        wrappers = {}

        def unwrap(x):
            if isinstance(x, Elsewhere):
                seen["virtual"] = True
                wrappers[id(x.elem)] = x
                return x.elem
            if isinstance(x, torch.Tensor):
                if x.device.type == "meta":
                    seen["meta"] = True
                elif x.dim() > 0:
                    seen["cpu"] = True
            return x

        a, kw = tree_map(unwrap, args), tree_map(unwrap, kwargs)
        name = func.overloadpacket.__name__
        if seen["meta"]:
            raise RuntimeError(f"virtual_device: {func} received a real meta tensor (data-free), which a "
                               "kernel made internally from a virtual tensor's options; emulate that "
                               "function in tests/virtual_device.py")
        if name == "_to_copy":
            target = kw.get("device")
            if target is not None:
                kw = {**kw, "device": torch.device("cpu")}
            out = func(*a, **kw)
            stays = _is_virtual(target) or (target is None and seen["virtual"])
            return Elsewhere(out) if stays else out
        if seen["virtual"] and seen["cpu"] and name not in _CROSS_DEVICE_OK:
            shapes = [(type(x).__name__, tuple(x.shape)) for x in args if isinstance(x, torch.Tensor)]
            raise RuntimeError("Expected all tensors to be on the same device, but found at least two "
                               f"devices, meta and cpu! ({func} on {shapes})")
        make_virtual = seen["virtual"] or _is_virtual(kw.get("device"))
        if _is_virtual(kw.get("device")):
            kw = {**kw, "device": torch.device("cpu")}
        out = func(*a, **kw)
        if not make_virtual:
            return out

        def wrap(x):
            if type(x) is torch.Tensor:
                mine = wrappers.get(id(x))  # an in-place op returns its own input
                return mine if mine is not None else Elsewhere(x)
            return x

        return tree_map(wrap, out)


def _unwrap(x):
    return x.elem if isinstance(x, Elsewhere) else x


def _attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
               enable_gqa=False):
    """The math of scaled-dot-product attention in plain ops (so autograd and the device checks see
    every step); torch's own kernel builds its causal mask from the inputs' options."""
    if dropout_p:
        raise RuntimeError("virtual_device: attention dropout is not emulated")
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key, value = key.repeat_interleave(rep, -3), value.repeat_interleave(rep, -3)
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    w = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        keep = torch.ones(query.shape[-2], key.shape[-2], dtype=torch.bool).tril()
        w = w.masked_fill(~(Elsewhere(keep) if isinstance(w, Elsewhere) else keep), float("-inf"))
    if attn_mask is not None:
        w = w.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else w + attn_mask
    return torch.softmax(w, -1) @ value


class _Mode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func is torch._C._nn._parse_to:  # nn.Module.to() parsing its arguments: not a factory
            return func(*args, **kwargs)
        if func is torch.nn.functional.scaled_dot_product_attention:
            return _attention(*args, **kwargs)
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and isinstance(args[0], Elsewhere):
            # torch turns a list index into an index tensor with the indexed tensor's options (a data-free
            # meta tensor here); a CPU index tensor is what CUDA indexing accepts too
            def listed(i):
                return torch.tensor(i) if isinstance(i, list) else i
            index = args[1]
            index = tuple(map(listed, index)) if isinstance(index, tuple) else listed(index)
            rest = args[2:]
            if rest and isinstance(rest[0], (int, float, bool)):  # x[i] = 0.0: a CPU scalar, as CUDA takes
                rest = (torch.tensor(rest[0], dtype=args[0].dtype), *rest[1:])
            return func(args[0], index, *rest, **kwargs)
        if func is torch.nn.functional.one_hot:
            x = args[0]
            out = func(_unwrap(x), *args[1:], **kwargs)
            return Elsewhere(out) if isinstance(x, Elsewhere) else out
        if func == _SET_DATA and isinstance(args[0], Elsewhere):
            # nn.Module.to() on a virtual module: `param.data = moved` must carry the data across too
            with torch._C.DisableTorchFunctionSubclass():
                func(*args)
            if isinstance(args[1], Elsewhere):
                args[0].elem = args[1].elem
            return None
        if func in (torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda):
            src = args[0]
            copy = kwargs.pop("copy", False)
            if func is torch.Tensor.to:
                device, dtype, non_blocking, _ = torch._C._nn._parse_to(*args[1:], **kwargs)
                if device is None and dtype is None and isinstance(args[1] if len(args) > 1 else None,
                                                                    torch.Tensor):
                    device, dtype = args[1].device, args[1].dtype
            else:
                device, dtype = (torch.device("cpu") if func is torch.Tensor.cpu else VIRTUAL), None
            base = _unwrap(src)
            with torch._C.DisableTorchFunctionSubclass():
                moved = base.to(dtype=dtype) if dtype is not None else base
                if _is_virtual(device) or (device is None and isinstance(src, Elsewhere)):
                    if moved is base and isinstance(src, Elsewhere):
                        return Elsewhere(base.clone()) if copy else src  # already there: a no-op
                    return Elsewhere(moved.clone() if moved is base else moved)
                if isinstance(src, Elsewhere):  # a real device-to-host copy
                    return moved.clone() if moved is base else moved
                return base.to(device=device, dtype=dtype) if device is not None else moved
        gen = kwargs.get("generator", next((a for a in args if isinstance(a, _GENERATOR)), None))
        if isinstance(gen, _GENERATOR):
            # a generator must live where the tensors are, as CUDA insists (checked here, where the
            # generator is still the Python object that knows it is virtual)
            tensors = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
            wants = _is_virtual(kwargs.get("device")) or any(isinstance(a, Elsewhere) for a in tensors)
            if wants != getattr(gen, "virtual", False):
                where = getattr(func, "__name__", func)
                raise RuntimeError(f"Expected a '{'meta' if wants else 'cpu'}' device type for generator "
                                   f"but found '{'cpu' if wants else 'meta'}' ({where})")
        if _is_virtual(kwargs.get("device")):  # a factory asked for the virtual device
            kwargs["device"] = torch.device("cpu")
            out = func(*args, **kwargs)
            return tree_map(lambda x: Elsewhere(x) if type(x) is torch.Tensor else x, out)
        return func(*args, **kwargs)


class _Generator(_GENERATOR):
    """torch.Generator as seen inside virtual_device(): one made for VIRTUAL draws on the CPU and says
    it lives on VIRTUAL."""

    def __new__(cls, device="cpu"):
        virtual = _is_virtual(device)
        g = super().__new__(cls, "cpu" if virtual else device)
        g.virtual = virtual
        return g

    def __init__(self, device="cpu"):
        pass

    @property
    def device(self):
        return VIRTUAL if self.virtual else super().device


@contextlib.contextmanager
def virtual_device():
    """Within it, VIRTUAL behaves as a second device (see the module docstring). Yields VIRTUAL."""
    real = torch.Generator
    torch.Generator = _Generator
    try:
        with _Mode():
            yield VIRTUAL
    finally:
        torch.Generator = real


def is_virtual(tensor) -> bool:
    return isinstance(tensor, Elsewhere)
