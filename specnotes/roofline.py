"""The roofline: bytes and FLOPs of a forward pass, lower-bound step times, the ridge point, a GPU catalog,
and measured bandwidth and matmul throughput for the machine you are on. Notebook 01; 05 and 08 reuse it.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from specnotes import checks
from specnotes.env import default_device, default_dtype, quick_mode, torch_dtype
from specnotes.paths import data_dir
from specnotes.timing import time_call, time_forward

DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "int8": 1.0, "int4": 0.5}
_ALIASES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16"}
CATALOG_CSV = data_dir() / "hardware.csv"
THIS_MACHINE = "this machine"


@dataclass(frozen=True)
class Machine:
    name: str
    bandwidth: float  # bytes/s from main memory (HBM, GDDR or DRAM)
    peak_flops: float  # dense matmul FLOP/s at the dtype the row names
    memory_bytes: float  # capacity; nan when unknown
    source: str
    peak_dtype: str = ""  # which dtype the peak is quoted for (a bf16 tensor peak says little about fp32)

    def __post_init__(self):
        for field, what in (("bandwidth", "bytes/s"), ("peak_flops", "FLOP/s")):  # kept as floats
            value = checks.positive(getattr(self, field), f"{self.name}: {field} ({what})", scalar=True)
            object.__setattr__(self, field, value)
        if not (isinstance(self.memory_bytes, float) and math.isnan(self.memory_bytes)):  # nan: unknown
            checks.positive(self.memory_bytes, f"{self.name}: memory_bytes (nan when unknown)", scalar=True)


@dataclass(frozen=True)
class Shape:
    """What the KV cache needs to know about a model: K and V per layer per KV head."""

    layers: int
    kv_heads: int
    head_dim: int

    def __post_init__(self):
        for field in ("layers", "kv_heads", "head_dim"):  # stored as ints, whatever number type came in
            object.__setattr__(self, field, checks.whole(getattr(self, field), f"Shape.{field}", scalar=True))


def dtype_bytes(dtype) -> float:
    """Bytes per parameter for 'fp32', 'bf16', 'fp16', 'int8', 'int4' (torch dtypes accepted too)."""
    name = str(dtype).removeprefix("torch.").lower()
    name = _ALIASES.get(name, name)
    if name not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[name]


def model_bytes(n_params, dtype) -> float:
    """Bytes of weights: every decode step at batch 1 reads all of them once."""
    return np.asarray(checks.positive(n_params, "n_params"), dtype=np.float64) * dtype_bytes(dtype)


def kv_cache_bytes(shape: Shape, context, batch=1, dtype="bf16"):
    """Bytes of cached keys and values: 2 (K and V) x layers x kv_heads x head_dim per token."""
    context, batch = checks.whole(context, "context", low=0), checks.whole(batch, "batch")
    per_token = 2 * shape.layers * shape.kv_heads * shape.head_dim * dtype_bytes(dtype)
    return per_token * np.asarray(context, dtype=np.float64) * batch


def forward_flops(n_params, tokens=1, batch=1):
    """About 2 FLOPs per parameter per token (a multiply and an add); attention's share is left out.
    tokens may be fractional here (the ridge point is a real number); batch is whole sequences."""
    tokens, batch = checks.positive(tokens, "tokens"), checks.whole(batch, "batch")
    return 2.0 * np.asarray(checks.positive(n_params, "n_params")) * np.asarray(tokens) * np.asarray(batch)


# --------------------------------------------------------------------------- the catalog


@cache
def catalog() -> dict[str, Machine]:
    """The accelerators in data/hardware.csv (the measured 'this machine' row is filled on demand)."""
    machines = {}
    with open(CATALOG_CSV, newline="") as f:
        for row in csv.DictReader(f):
            if row["name"] == THIS_MACHINE:
                continue
            machines[row["name"]] = Machine(
                name=row["name"], bandwidth=float(row["bandwidth_GBps"]) * 1e9,
                peak_flops=float(row["peak_TFLOPS"]) * 1e12,
                memory_bytes=float(row["memory_GB"]) * 1e9 if row["memory_GB"] else float("nan"),
                source=row["source"], peak_dtype=row["peak_dtype"],
            )
    return machines


def machine(gpu) -> Machine:
    """A Machine from a catalog name, 'this machine' (measured once per process), or a Machine."""
    if isinstance(gpu, Machine):
        return gpu
    if gpu == THIS_MACHINE:
        return this_machine()
    machines = catalog()
    if gpu not in machines:
        raise ValueError(f"gpu: unknown GPU {gpu!r}; the catalog has: {', '.join(machines)}, "
                         f"and {THIS_MACHINE!r} (measured here)")
    return machines[gpu]


# --------------------------------------------------------------------------- the roofline


def step_time(n_params, dtype, gpu, tokens=1, batch=1, context=0, shape: Shape | None = None):
    """Lower bound, in seconds, of one forward pass over `tokens` new positions for `batch` sequences:
    the larger of (weights + KV cache read) / bandwidth and FLOPs / peak.

    Weights are read once per pass, whatever the batch; each sequence reads its own `context`
    positions of KV cache, which needs the model's `shape` (layers, kv_heads, head_dim)."""
    m = machine(gpu)
    tokens, batch = checks.whole(tokens, "tokens"), checks.whole(batch, "batch")
    context = checks.whole(context, "context", low=0)
    read = model_bytes(n_params, dtype)
    if np.any(np.asarray(context) > 0):
        if shape is None:
            raise ValueError("context > 0 needs shape=Shape(layers, kv_heads, head_dim) to count KV reads; "
                             "roofline.shape_of(model) gives it for a transformers model")
        read = read + kv_cache_bytes(shape, context, batch, dtype)
    memory_s = read / m.bandwidth
    compute_s = forward_flops(n_params, tokens, batch) / m.peak_flops
    return np.maximum(memory_s, compute_s)[()]


def tokens_per_s_ceiling(n_params, dtype, gpu) -> float:
    """The best plain decoding can do at batch 1: one token per weight read."""
    return float(1.0 / step_time(n_params, dtype, gpu))


def arithmetic_intensity(tokens, dtype, batch=1):
    """FLOPs per byte of weights read by a pass: 2 * tokens * batch / bytes-per-parameter (tokens may be
    fractional, as on a plot's axis)."""
    tokens, batch = checks.positive(tokens, "tokens"), checks.whole(batch, "batch")
    return 2.0 * np.asarray(tokens) * batch / dtype_bytes(dtype)


def ridge_tokens(gpu, dtype) -> float:
    """The tokens x batch per pass at which weight reads and compute take equally long; below it a
    pass is memory-bound, so extra positions are nearly free."""
    m = machine(gpu)
    return m.peak_flops * dtype_bytes(dtype) / (2.0 * m.bandwidth)


def shape_of(model) -> Shape:
    """Shape of a transformers decoder from its config."""
    cfg = model.config
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return Shape(cfg.num_hidden_layers, getattr(cfg, "num_key_value_heads", None) or heads, head_dim)


# --------------------------------------------------------------------------- measuring this machine


def _device_default(device):
    return device or default_device()


def measure_bandwidth(device=None, megabytes: int = 256, repeats: int = 5,
                      matrix_megabytes: int = 16) -> float:
    """Weight-streaming bandwidth in bytes/s: one vector times many separate weight matrices, the access
    pattern of a batch-1 decode step. Median of `repeats` after a warm-up. (A plain buffer copy
    understates it on many CPUs; one giant matrix can too.)"""
    import torch

    megabytes, repeats = checks.whole(megabytes, "megabytes", scalar=True), checks.whole(repeats, "repeats",
                                                                                          scalar=True)
    matrix_megabytes = checks.whole(matrix_megabytes, "matrix_megabytes", high=megabytes, scalar=True)
    device = _device_default(device)
    d = 1024
    cols = matrix_megabytes * 2**20 // 4 // d
    count = max(1, megabytes // matrix_megabytes)
    weights = [torch.ones(d, cols, device=device) for _ in range(count)]
    x = torch.ones(1, d, device=device)

    def stream():
        for w in weights:
            x @ w

    timing = time_call(stream, repeats=repeats, warmup=1, device=device)
    return count * d * cols * 4 / timing.median


def measure_matmul_flops(device=None, n: int = 1024, dtype=None, repeats: int = 5) -> float:
    """Dense matmul throughput in FLOP/s (2 n^3 per n x n product); median after a warm-up."""
    import torch

    n, repeats = checks.whole(n, "n", scalar=True), checks.whole(repeats, "repeats", scalar=True)
    device = _device_default(device)

    dtype = torch_dtype(dtype) if dtype is not None else default_dtype(device)
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
    timing = time_call(lambda: a @ b, repeats=repeats, warmup=2, device=device)
    return 2.0 * n**3 / timing.median


@cache
def this_machine(device=None) -> Machine:
    """The 'this machine' row: measured weight-streaming bandwidth and matmul FLOP/s (quick mode
    measures less). Measured once per process; noisy neighbours on the machine lower both."""
    device = device or default_device()
    quick = quick_mode()
    bw = measure_bandwidth(device, megabytes=128 if quick else 512, repeats=3 if quick else 7)
    flops = measure_matmul_flops(device, n=1024 if quick else 2048, repeats=3 if quick else 7)
    dtype = str(default_dtype(device)).removeprefix("torch.")
    source = f"measured on {device} ({dtype}) by specnotes.roofline.this_machine()"
    return Machine(THIS_MACHINE, bw, flops, float("nan"), source, f"{dtype} (measured)")


def tokens_curve(model, tokens=(1, 2, 4, 8, 16, 32, 64), context: int = 256, repeats: int = 5, gpu=None):
    """Measured seconds of one forward pass of `model` over T new tokens on a `context`-token KV cache,
    for each T, and the roofline estimate for the same pass on `gpu` (default: this machine, whose
    rates are measured, so the estimate is not a hard lower bound).
    Returns (tokens, measured (len,), predicted (len,))."""
    tokens = np.atleast_1d(checks.whole(tokens, "tokens"))
    context, repeats = checks.whole(context, "context", low=0), checks.whole(repeats, "repeats")
    m = machine(gpu) if gpu is not None else this_machine()
    n_params = sum(p.numel() for p in model.parameters())
    dtype = next(model.parameters()).dtype
    measured = np.array([time_forward(model, context, int(t), repeats).median for t in tokens])
    predicted = step_time(n_params, dtype, m, tokens=tokens, context=context, shape=shape_of(model))
    return tokens, measured, np.asarray(predicted)
