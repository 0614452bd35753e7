"""Honest timing: warm-up, repeats, median and spread, CUDA synchronized; forward-pass step times.

05 measures the draft cost c with it; 01, 07 and `make bench` build on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from specnotes import checks


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


def time_forward(model, context: int = 64, tokens: int = 1, repeats: int = 7, warmup: int = 2) -> Timing:
    """Time one forward pass over `tokens` new positions on top of a KV cache of `context` positions
    (the cache is cropped back after every pass, so each run sees the same context; context 0 times
    the pass with no cache at all, as a prompt's first pass runs)."""
    import torch

    from specnotes.passes import forward_pass

    context = checks.whole(context, "context", low=0, scalar=True)
    tokens = checks.whole(tokens, "tokens", scalar=True)
    fits(model, context + tokens, "context + tokens")
    device = next(model.parameters()).device
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(vocab, (1, context), generator=gen).to(device)
    new = torch.randint(vocab, (1, tokens), generator=gen).to(device)
    with torch.inference_mode():
        cache = forward_pass(model, prompt)[1] if context else None

        def step():
            forward_pass(model, new, cache)
            if cache is not None:
                cache.crop(-tokens)

        return time_call(step, repeats, warmup, device)


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


def fits(model, positions: int, what: str) -> None:
    """A ValueError when `positions` is more than the model was built for (a huge context or width
    would otherwise allocate until the machine runs out of memory)."""
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if limit is not None and positions > limit:
        raise ValueError(f"{what} is {positions} positions, more than the model's {limit} "
                         "(config.max_position_embeddings): use a smaller setting")


def check_samplings(samplings) -> tuple[str, ...]:
    """samplings as a tuple of 'greedy' and/or 'sample'. A bare string is refused: iterated letter by
    letter it would ask for the sampling 'g', so ('greedy',) was meant."""
    if isinstance(samplings, str) or not isinstance(samplings, (tuple, list)):
        raise TypeError(f"samplings must be a tuple such as ('greedy',) or ('greedy', 'sample'), "
                        f"got {samplings!r}")
    if not samplings:
        raise ValueError("samplings is empty: give ('greedy',), ('sample',) or both")
    for s in samplings:
        if s not in ("greedy", "sample"):
            raise ValueError(f"sampling must be 'greedy' or 'sample', got {s!r}")
    return tuple(samplings)


def prompt_tensor(ids, name: str, model) -> None:
    """A TypeError or ValueError naming `name` unless ids is a (1, T) tensor of the model's token ids,
    T >= 1 (what decode.prompt_ids returns)."""
    if not hasattr(ids, "detach"):
        raise TypeError(f"{name} must be a (1, T) tensor of token ids (decode.prompt_ids makes one), "
                        f"got a {type(ids).__name__}")
    if ids.ndim != 2 or ids.shape[0] != 1:
        raise ValueError(f"{name} must hold one prompt, shape (1, T); got shape {tuple(ids.shape)}")
    checks.token_ids(ids[0], name, model.config.vocab_size)


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
    input ids. The target's forward calls are counted with a hook on `model`. Warm-up runs (one per mode
    and prompt by default) are not recorded. `device` (the one to synchronize) defaults to the model's."""
    from tqdm.auto import tqdm

    from specnotes.env import device_of

    device = device_of(model) if device is None else device
    repeats = checks.whole(repeats, "repeats", scalar=True)
    warmup = checks.whole(warmup, "warmup", low=0, scalar=True)
    seed, samplings = checks.whole(seed, "seed", low=0, scalar=True), check_samplings(samplings)
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
            prompt_tensor(ids, f"prompts[{kind!r}][{i}]", model)
    jobs = [(s, kind, i, ids) for s in samplings
            for kind, lst in prompts.items() for i, ids in enumerate(lst)]
    samples = []
    total = (warmup + repeats) * len(jobs) * len(modes)
    quiet = {} if progress else {"disable": True}
    with tqdm(total=total, desc="timing", **quiet) as bar:
        for rep in range(-warmup, repeats):
            for s, kind, i, ids in jobs:
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
