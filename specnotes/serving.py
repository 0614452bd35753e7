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

from specnotes import checks, roofline, theory
from specnotes.timing import Pass, cache_of, pass_times, random_ids


def default_shape(n_params: float) -> roofline.Shape:
    """A Llama-3-style grouped-query geometry for a model of n_params when no shape is given:
    8 KV heads of 128 dimensions, and 32 layers at 8B scaling as n_params^(1/3)."""
    roofline.model_bytes(n_params, "fp32")  # validates n_params
    layers = max(1, int(round(32 * (float(n_params) / 8e9) ** (1 / 3))))
    return roofline.Shape(layers, 8, 128)


def pass_time(batch, tokens, n_params, dtype, gpu, context=0, shape: roofline.Shape | None = None):
    """Roofline time of one pass: `batch` sequences, `tokens` new positions each, at `context`."""
    b, L = np.asarray(checks.whole(batch, "batch")), checks.whole(context, "context", low=0)
    if shape is None:
        shape = default_shape(n_params)
    return roofline.step_time(n_params, dtype, gpu, tokens=tokens, batch=b,
                              context=L, shape=shape)


def verify_cost(batch, k, n_params, dtype, gpu, context=0, shape: roofline.Shape | None = None):
    """A verify pass of k + 1 positions in units of a plain decode step, both at this batch."""
    k = checks.whole(k, "k")
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
    E = 1 + α + ... + α^k tokens per round on average. The speedup is theory.speedup with the roofline's
    verify cost at this batch. alpha = 1 is allowed: a run where every draft was accepted gains k + 1."""
    a = checks.probability(alpha, "alpha")
    kk, cc = checks.whole(k, "k"), checks.positive(c, "c", zero=True)
    b = np.asarray(checks.whole(batch, "batch"))
    shape = shape if shape is not None else default_shape(n_params)
    step = pass_time(b, 1, n_params, dtype, gpu, context, shape)
    verify = pass_time(b, kk + 1, n_params, dtype, gpu, context, shape) / step  # in plain steps
    gain = np.asarray(theory.speedup(a, kk, cc, verify))
    m = roofline.machine(gpu)
    kv = roofline.kv_cache_bytes(shape, checks.whole(context, "context", low=0) + kk, b, dtype)
    need = roofline.model_bytes(n_params, dtype) + kv
    fits = need <= m.memory_bytes if np.isfinite(m.memory_bytes) else np.ones_like(need, dtype=bool)
    plain_tps = b / step
    return Serving(b, plain_tps, plain_tps * gain, 1e3 * step, 1e3 * step / gain, gain, verify,
                   np.asarray(fits))


def speedup(batch, alpha, k, c, n_params, dtype, gpu, context=0, shape: roofline.Shape | None = None):
    """Throughput per GPU with speculation over without, at `batch` sequences (broadcasts).

    At B = 1 on a weight-bound pass this is theory.speedup(alpha, k, c): the verify pass costs one step."""
    return simulate(batch, alpha, k, c, n_params, dtype, gpu, context, shape).speedup[()]


def crossover_batch(alpha, k, c, n_params, dtype, gpu, context=0, shape: roofline.Shape | None = None,
                    max_batch: int = 4096):
    """The first batch size (1 .. max_batch) where speculation's throughput ratio drops below 1, or None
    if it never does there (speculation loses from B = 1 gives 1).

    The ratio falls as the batch grows (each pass turns from weight-bound towards compute-bound), so a
    bisection finds the crossing in about log2(max_batch) evaluations, whatever max_batch is."""
    for name, value in (("alpha", alpha), ("k", k), ("c", c), ("context", context), ("n_params", n_params)):
        if np.ndim(value) != 0:
            raise ValueError(f"crossover_batch takes one value of {name}; got {value!r} "
                             "(loop over it, or use speedup(), which broadcasts)")
    max_batch = checks.whole(max_batch, "max_batch", scalar=True)

    def loses(b: int) -> bool:
        return bool(speedup(b, alpha, k, c, n_params, dtype, gpu, context, shape) < 1)

    if not loses(max_batch):
        return None
    wins, lost = 0, max_batch  # invariant: speculation still pays at `wins` (0: none tried), loses at `lost`
    while lost - wins > 1:
        mid = (wins + lost) // 2
        if loses(mid):
            lost = mid
        else:
            wins = mid
    return lost


def largest_batch(k, n_params, dtype, gpu, context=0, shape: roofline.Shape | None = None) -> int | None:
    """The most sequences whose weights and KV caches (context + k positions each, as simulate counts) fit
    in the GPU's memory at once: 0 if the weights alone do not fit, None for a machine with no limit."""
    m = roofline.machine(gpu)
    if not np.isfinite(m.memory_bytes):
        return None
    shape = shape if shape is not None else default_shape(n_params)
    positions = checks.whole(context, "context", low=0) + checks.whole(k, "k")  # as simulate counts them
    per_sequence = roofline.kv_cache_bytes(shape, positions, 1, dtype)
    room = m.memory_bytes - roofline.model_bytes(n_params, dtype)
    return max(int(room // per_sequence), 0)


def measured_speedup(times: dict, alpha: float, k: int, c: float) -> dict:
    """Speedup by batch from measured pass times: times[(batch, tokens)] in seconds, as
    `measure_grid` returns. theory.speedup, as in `simulate`, with the roofline swapped for the clock."""
    if not isinstance(times, dict) or not times:
        raise TypeError("times must be a non-empty dict {(batch, tokens): seconds} as measure_grid "
                        f"returns, got {type(times).__name__}")
    for cell, seconds in times.items():
        if not (isinstance(cell, tuple) and len(cell) == 2):
            raise TypeError(f"times: keys must be (batch, tokens) pairs, got {cell!r}")
        checks.whole(cell[0], "times: a batch")
        checks.whole(cell[1], "times: a token count")
        checks.positive(seconds, f"times[{cell}]")
    k, c = checks.whole(k, "k", scalar=True), checks.positive(c, "c", zero=True, scalar=True)
    return {b: float(theory.speedup(alpha, k, c, times[(b, k + 1)] / times[(b, 1)]))
            for b in sorted({b for b, _ in times}) if (b, 1) in times and (b, k + 1) in times}


def measure_grid(model, batches=(1, 2, 4, 8, 16, 32), tokens=(1, 2, 4, 8), context: int = 128,
                 repeats: int = 3, progress: bool = True) -> dict:
    """Median seconds of one forward pass for each (batch, tokens): `batch` sequences with `context`
    cached positions each, then `tokens` new ones. timing.pass_times times the cells interleaved, repeat
    by repeat, so a slow moment of a shared machine spreads over all of them instead of bending one."""
    import torch

    batches = [int(b) for b in np.atleast_1d(checks.whole(batches, "batches"))]
    tokens = [int(t) for t in np.atleast_1d(checks.whole(tokens, "tokens"))]
    context, repeats = checks.whole(context, "context", scalar=True), checks.whole(repeats, "repeats",
                                                                                    scalar=True)
    gen = torch.Generator().manual_seed(0)
    caches = {b: cache_of(model, random_ids(model, (b, context), gen)) for b in batches}
    cells = {(b, t): Pass(random_ids(model, (b, t), gen), caches[b], keep=t) for b in batches for t in tokens}
    times = pass_times(model, cells, repeats, warmup=1, progress=progress, desc="batch x tokens grid")
    return {cell: t.median for cell, t in times.items()}
