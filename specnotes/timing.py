"""Honest timing: warm-up, repeats, median and spread, CUDA synchronized. Two harnesses, each the only
one of its kind: pass_times times forward passes over a KV cache (time_forward, live.measure_costs,
serving.measure_grid), and round_robin times whole generations, mode after mode (notebook 07's suite
and notebook 06's drafter table).

05 measures the draft cost c with it; 01, 06, 07, 08 and `make bench` build on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from specnotes import checks
from specnotes import passes as pass_fns  # by module, so a test can stand in for forward_pass
from specnotes.env import progress_bar
from specnotes.placement import device_of


def sync(device) -> None:
    """Wait for queued CUDA work, so a timer reads the time the work took (a no-op on CPU)."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class Timing:
    seconds: np.ndarray  # (repeats,) each run's wall time

    @property
    def median(self) -> float:
        return float(np.median(self.seconds))

    @property
    def spread(self) -> tuple[float, float]:
        """(min, max) of the runs: how noisy the machine was."""
        return float(self.seconds.min()), float(self.seconds.max())

    def __str__(self) -> str:
        lo, hi = self.spread
        return f"{self.median * 1e3:.1f} ms (runs {lo * 1e3:.1f}–{hi * 1e3:.1f})"


def time_call(fn: Callable[[], object], repeats: int = 7, warmup: int = 2, device="cpu") -> Timing:
    """Run fn `warmup` times untimed, then `repeats` times timed (synchronizing CUDA around each)."""
    if not callable(fn):
        raise TypeError(f"fn must be a function of no arguments (the work to time), got {type(fn).__name__}")
    repeats = checks.whole(repeats, "repeats", scalar=True)
    warmup = checks.whole(warmup, "warmup", low=0, scalar=True)
    for _ in range(warmup):
        fn()
    sync(device)
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync(device)
        runs.append(time.perf_counter() - start)
    return Timing(np.asarray(runs))


@dataclass(frozen=True)
class Pass:
    """One forward pass to time: `ids`, (B, T) new positions on top of `cache` (None: no cache, as a
    prompt's first pass runs), keeping the logits of the last `keep` rows (None: all T)."""

    ids: object
    cache: object = None
    keep: int | None = None


def pass_times(model, passes: Mapping, repeats: int = 5, warmup: int = 1, progress: bool = False,
               desc: str = "passes") -> dict:
    """name -> Timing of each forward pass in `passes` (name -> Pass): every pass over a KV cache in the
    package (time_forward, live.measure_costs, serving.measure_grid) is timed here.

    The passes are timed interleaved: `warmup` untimed rounds of all of them, then `repeats` timed
    rounds, so a slow moment of a shared machine spreads over every pass instead of bending one. Each
    pass's cache is cropped back after it, so every run sees the same context, and passes may share a
    cache. CUDA is synchronized around each pass."""
    import torch

    tqdm = progress_bar()

    repeats = checks.whole(repeats, "repeats", scalar=True)
    warmup = checks.whole(warmup, "warmup", low=0, scalar=True)
    if not isinstance(passes, Mapping) or not passes:
        raise ValueError(f"passes must be a non-empty dict of name -> timing.Pass, got {passes!r}")
    for name, p in passes.items():
        if not isinstance(p, Pass):
            raise TypeError(f"passes[{name!r}] must be a timing.Pass, got a {type(p).__name__}")
    device = device_of(model)
    runs = {name: [] for name in passes}
    with torch.inference_mode():
        for rep in tqdm(range(-warmup, repeats), desc=desc, disable=not progress):
            for name, p in passes.items():
                sync(device)
                start = time.perf_counter()
                pass_fns.forward_pass(model, p.ids, p.cache, keep=p.keep)
                sync(device)
                if rep >= 0:
                    runs[name].append(time.perf_counter() - start)
                if p.cache is not None:
                    pass_fns.crop(p.cache, p.ids.shape[1])
    return {name: Timing(np.asarray(seconds)) for name, seconds in runs.items()}


def random_ids(model, shape, generator):
    """Random token ids of `shape` on the model's device: what a pass is timed on (the ids do not change
    the time of a pass, only their number does)."""
    import torch

    return torch.randint(model.config.vocab_size, tuple(shape), generator=generator).to(device_of(model))


def cache_of(model, ids):
    """The KV cache of one pass over `ids` (B, T): the context a timed pass then runs on."""
    import torch

    with torch.inference_mode():
        return pass_fns.forward_pass(model, ids, keep=1)[1]


def time_forward(model, context: int = 64, tokens: int = 1, repeats: int = 7, warmup: int = 2) -> Timing:
    """Time one forward pass over `tokens` new positions on top of a KV cache of `context` positions
    (pass_times crops the cache back after every pass, so each run sees the same context; context 0
    times the pass with no cache at all, as a prompt's first pass runs)."""
    import torch

    context = checks.whole(context, "context", low=0, scalar=True)
    tokens = checks.whole(tokens, "tokens", scalar=True)
    checks.fits(model, context + tokens, "context + tokens")
    gen = torch.Generator().manual_seed(0)
    prompt, new = random_ids(model, (1, context), gen), random_ids(model, (1, tokens), gen)
    cache = cache_of(model, prompt) if context else None
    return pass_times(model, {"pass": Pass(new, cache)}, repeats, warmup)["pass"]


# --------------------------------------------------------------------------- the round-robin harness


class CountCalls:
    """Counts a model's forward calls with a forward hook (a context manager; `n` after the block)."""

    def __init__(self, model):
        self.model, self.n, self._handle = model, 0, None

    def _hook(self, *args):
        self.n += 1

    def __enter__(self):
        self.n = 0
        self._handle = self.model.register_forward_hook(self._hook)
        return self

    def __exit__(self, *exc):
        self._handle.remove()


@dataclass
class Output:
    """What one generation returns to the harness: its new tokens, and (engine modes) the engine Result
    and the seconds its drafter spent drafting."""

    tokens: list
    result: object = None
    draft_seconds: float = 0.0


@dataclass
class Sample:
    mode: str
    prompt_kind: str
    prompt: int
    sampling: str  # "greedy" or "sample"
    seconds: float
    target_calls: int
    output: Output


def first_difference(a: list, b: list) -> int | None:
    """The first position where two token lists differ (a length difference counts), or None."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def round_robin(model, modes: dict, prompts: dict, samplings=("greedy", "sample"), repeats: int = 3,
                warmup: int = 1, seed: int = 0, device=None, progress: bool = True) -> list[Sample]:
    """Time every mode on every prompt, interleaved: for each repeat, each prompt and each mode in turn,
    so a slow moment of a shared machine hits all modes alike.

    modes: name -> fn(input_ids, do_sample: bool, seed: int) -> Output. prompts: kind -> list of (1, T)
    input ids. The target's forward calls are counted with a hook on `model`. Before the timed repeats,
    `warmup` untimed runs of every mode on the first prompt, in each sampling, pay the first-call costs
    (lazy set-up, the allocator, transformers' generation config): a mode's first run is not a sample of
    its speed, and a whole warm-up round over every prompt would only add minutes. `device` (the one to
    synchronize) defaults to the model's."""
    tqdm = progress_bar()

    device = device_of(model) if device is None else device
    repeats = checks.whole(repeats, "repeats", scalar=True)
    warmup = checks.whole(warmup, "warmup", low=0, scalar=True)
    seed, samplings = checks.whole(seed, "seed", low=0, scalar=True), checks.samplings(samplings)
    for what, value, shape in (("modes", modes, "name -> fn(input_ids, do_sample, seed)"),
                               ("prompts", prompts, "kind -> list of (1, T) input ids")):
        if not isinstance(value, Mapping):
            raise TypeError(f"{what} must be a dict ({shape}), got a {type(value).__name__}")
        if not value:
            raise ValueError(f"{what} is empty: there would be nothing to time")
    for name, fn in modes.items():
        if not callable(fn):
            raise TypeError(f"modes[{name!r}] must be a function (input_ids, do_sample, seed) -> Output, "
                            f"got a {type(fn).__name__}")
    for kind, lst in prompts.items():
        if not isinstance(lst, (list, tuple)) or not lst:
            raise ValueError(f"prompts[{kind!r}] must be a non-empty list of (1, T) input ids, got {lst!r}")
        for i, ids in enumerate(lst):
            checks.prompt_tensor(ids, f"prompts[{kind!r}][{i}]", model)
    jobs = [(s, kind, i, ids) for s in samplings
            for kind, lst in prompts.items() for i, ids in enumerate(lst)]
    first = next(iter(prompts))
    warm = [(s, first, 0, prompts[first][0]) for s in samplings] * warmup
    runs = [(-1, job) for job in warm] + [(rep, job) for rep in range(repeats) for job in jobs]
    samples = []
    quiet = {} if progress else {"disable": True}
    with tqdm(total=len(runs) * len(modes), desc="timing", **quiet) as bar:
        for rep, (s, kind, i, ids) in runs:
            for name, fn in modes.items():
                with CountCalls(model) as calls:
                    sync(device)
                    start = time.perf_counter()
                    out = fn(ids, s == "sample", seed)  # same seed each repeat: same work
                    sync(device)
                    seconds = time.perf_counter() - start
                if not isinstance(out, Output):
                    raise TypeError(f"mode {name!r} returned a {type(out).__name__}; a mode must return "
                                    "timing.Output(tokens), with the engine's Result and the drafting "
                                    "seconds for an engine mode")
                if rep >= 0:
                    samples.append(Sample(name, kind, i, s, seconds, calls.n, out))
                bar.update()
    return samples
