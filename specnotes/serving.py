"""A roofline serving model: what speculation does to throughput per GPU as the batch fills. Notebook 08.

One decode pass for a batch of B sequences, each verifying T = k + 1 positions at context L, takes at
least the larger of
- memory: (weights, read once for the whole batch, + B x KV cache of L positions) / bandwidth, and
- compute: 2 x params x B x T FLOPs / peak (attention's FLOPs left out, as in `specnotes.roofline`).

At B = 1 the weights dominate and the k extra positions ride along for free, which is why speculation
pays. As B grows the pass turns compute-bound and every drafted position costs real time, so the same
α, k and c that gave 2x at B = 1 give a slowdown at B = 64 (the Monday-morning flip). At long context
each sequence's own KV read dominates instead, and it is shared by all T positions of that sequence:
speculation keeps paying at large B (the MagicDec regime).

The drafter is modelled as the target shrunk by c: a draft step at batch B costs c x a target step at
batch B (c = 0 for a free drafter such as prompt lookup).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from specnotes import roofline, theory


def default_shape(n_params: float) -> roofline.Shape:
    """A Llama-3-style grouped-query geometry for a model of n_params when no shape is given:
    8 KV heads of 128 dimensions, and 32 layers at 8B scaling as n_params^(1/3)."""
    roofline.model_bytes(n_params, "fp32")  # validates n_params
    layers = max(1, int(round(32 * (float(n_params) / 8e9) ** (1 / 3))))
    return roofline.Shape(layers, 8, 128)


def _batch(batch) -> np.ndarray:
    b = np.asarray(batch)
    if b.dtype.kind not in "iu" and not (b.dtype.kind == "f" and np.all(b == np.round(b))):
        raise ValueError(f"batch must be whole sequences (an int >= 1), got {batch!r}")
    if np.any(b < 1):
        raise ValueError(f"batch must be >= 1, got {batch!r}")
    return b.astype(np.int64)


def _context(context) -> np.ndarray:
    L = np.asarray(context, dtype=np.float64)
    if not np.all(np.isfinite(L)) or np.any(L < 0):
        raise ValueError("context (tokens already in each sequence's KV cache) must be >= 0, "
                         f"got {context!r}")
    return L


def pass_time(batch, tokens, n_params, dtype, gpu, context=0, shape: roofline.Shape | None = None):
    """Roofline time of one pass: `batch` sequences, `tokens` new positions each, at `context`."""
    b, L = _batch(batch), _context(context)
    if shape is None:
        shape = default_shape(n_params)
    return roofline.step_time(n_params, dtype, gpu, tokens=tokens, batch=b,
                              context=L, shape=shape)


def verify_cost(batch, k, n_params, dtype, gpu, context=0, shape: roofline.Shape | None = None):
    """A verify pass of k + 1 positions in units of a plain decode step, both at this batch."""
    k = theory._k(k)
    return (pass_time(batch, k + 1, n_params, dtype, gpu, context, shape)
            / pass_time(batch, 1, n_params, dtype, gpu, context, shape))


class Serving(NamedTuple):
    """Plain against speculative serving at each batch size (arrays broadcast over the inputs)."""

    batch: np.ndarray
    plain_tokens_per_s: np.ndarray  # per GPU, all sequences together
    spec_tokens_per_s: np.ndarray
    plain_ms_per_token: np.ndarray  # what one request waits per token
    spec_ms_per_token: np.ndarray
    speedup: np.ndarray  # spec / plain throughput; at a fixed batch also the latency ratio
    verify_cost: np.ndarray  # verify pass / plain step at this batch
    fits: np.ndarray  # weights + every sequence's KV cache fit in the GPU's memory


def simulate(batch, alpha, k, c, n_params, dtype, gpu, context=0,
             shape: roofline.Shape | None = None) -> Serving:
    """Throughput per GPU and per-request time per token, with and without speculation.

    Without: each pass gives every sequence one token. With: each round drafts k tokens (k x c plain
    steps at this batch) and verifies them in one pass of k + 1 positions; a sequence gains
    E = 1 + α + ... + α^k tokens per round on average."""
    a, kk, cc = theory._alpha(alpha), theory._k(k), theory._c(c)
    if np.any(a >= 1):
        raise ValueError(f"alpha must be < 1 (every draft accepted forever is not a workload); got {alpha!r}")
    b = _batch(batch)
    shape = shape if shape is not None else default_shape(n_params)
    step = pass_time(b, 1, n_params, dtype, gpu, context, shape)
    verify = pass_time(b, kk + 1, n_params, dtype, gpu, context, shape)
    round_s = kk * cc * step + verify
    e = theory.expected_tokens(a, kk)
    m = roofline.machine(gpu)
    kv = roofline.kv_cache_bytes(shape, _context(context) + kk, b, dtype)
    need = roofline.model_bytes(n_params, dtype) + kv
    fits = need <= m.memory_bytes if np.isfinite(m.memory_bytes) else np.ones_like(need, dtype=bool)
    plain_tps, spec_tps = b / step, b * e / round_s
    return Serving(b, plain_tps, spec_tps, 1e3 * step, 1e3 * round_s / e, spec_tps / plain_tps,
                   verify / step, np.asarray(fits))


def speedup(batch, alpha, k, c, n_params, dtype, gpu, context=0, shape: roofline.Shape | None = None):
    """Throughput per GPU with speculation over without, at `batch` sequences (broadcasts).

    At B = 1 on a weight-bound pass this is theory.speedup(alpha, k, c): the verify pass costs one step."""
    return simulate(batch, alpha, k, c, n_params, dtype, gpu, context, shape).speedup[()]


def crossover_batch(alpha, k, c, n_params, dtype, gpu, context=0, shape: roofline.Shape | None = None,
                    max_batch: int = 4096):
    """The first batch size (1 .. max_batch) where speculation's throughput ratio drops below 1, or None
    if it never does there (speculation loses from B = 1 gives 1)."""
    for name, value in (("alpha", alpha), ("k", k), ("c", c), ("context", context)):
        if np.ndim(value) != 0:
            raise ValueError(f"crossover_batch takes one value of {name}; got {value!r} "
                             "(loop over it, or use speedup(), which broadcasts)")
    batches = np.arange(1, int(max_batch) + 1)
    ratio = speedup(batches, alpha, k, c, n_params, dtype, gpu, context, shape)
    below = np.flatnonzero(ratio < 1)
    return int(batches[below[0]]) if below.size else None


def measured_speedup(times: dict, alpha: float, k: int, c: float) -> dict:
    """Speedup by batch from measured pass times: times[(batch, tokens)] in seconds, as
    `measure_grid` returns. Same formula as `simulate`, with the roofline swapped for the clock."""
    out = {}
    e = float(theory.expected_tokens(alpha, k))
    for b in sorted({b for b, _ in times}):
        if (b, 1) in times and (b, k + 1) in times:
            step, verify = times[(b, 1)], times[(b, k + 1)]
            out[b] = e * step / (k * c * step + verify)
    return out


def measure_grid(model, batches=(1, 2, 4, 8, 16, 32), tokens=(1, 2, 4, 8), context: int = 128,
                 repeats: int = 3, progress: bool = True) -> dict:
    """Median seconds of one forward pass for each (batch, tokens): `batch` sequences with `context`
    cached positions each, then `tokens` new ones. Cells are timed interleaved, repeat by repeat, so a
    slow moment of a shared machine spreads over all of them instead of bending one."""
    import time

    import torch
    from tqdm.auto import tqdm

    from specnotes.decode import forward_pass, sync

    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    cells = [(b, t) for b in batches for t in tokens]
    samples = {cell: [] for cell in cells}
    with torch.inference_mode():
        caches = {}
        for b in batches:
            ctx = torch.randint(vocab, (b, context), generator=gen).to(device)
            _, caches[b] = forward_pass(model, ctx, keep=1)
        new = {cell: torch.randint(vocab, cell, generator=gen).to(device) for cell in cells}
        for rep in tqdm(range(repeats + 1), desc="batch x tokens grid", disable=not progress):
            for cell in cells:  # round 0 warms up every shape
                b, t = cell
                sync(device)
                start = time.perf_counter()
                forward_pass(model, new[cell], caches[b], keep=t)
                sync(device)
                if rep:
                    samples[cell].append(time.perf_counter() - start)
                caches[b].crop(-t)
    return {cell: float(np.median(v)) for cell, v in samples.items()}
