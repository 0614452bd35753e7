"""Input checks, one per kind of value, shared by every module: whole numbers, finite positives,
probabilities, distributions (numpy, and a drafter's q in torch) and token ids.

Each returns the value in the form the caller computes with, or raises a ValueError (a bad value) or a
TypeError (a value of the wrong kind) whose message starts with the argument's name. A bool is never a
number here: `k=True` is far more often a slip than a 1.
"""

from __future__ import annotations

import numbers

import numpy as np

ATOL = 1e-6  # how far a numpy distribution's row may sum from 1
Q_ATOL = 1e-3  # a drafter's q comes from a softmax in 16 or 32 bits; its rows may sum this far from 1


def _has_bool(value) -> bool:
    """A bool anywhere in a (nested) list or tuple: numpy would quietly read True as 1."""
    if isinstance(value, (bool, np.bool_)):
        return True
    return isinstance(value, (list, tuple)) and any(_has_bool(v) for v in value)


def _numbers(value, name: str, scalar: bool = False) -> np.ndarray:
    """value as a numpy array of real numbers, refusing bools (also inside lists), strings, None and
    complex; with scalar=True, also anything but a single number."""
    if _has_bool(value) or (hasattr(value, "dtype") and str(value.dtype) in ("bool", "torch.bool")):
        raise TypeError(f"{name} must be a number, got the bool {value!r}")
    if scalar and np.ndim(value) != 0:
        raise TypeError(f"{name} must be a single number, got {_shown(value)}")
    if hasattr(value, "detach"):  # a torch tensor: read it on the host
        value = value.detach().cpu().numpy()
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged lists
        raise TypeError(f"{name} must be a number or an array of numbers, got {value!r}") from exc
    if arr.dtype == object and arr.size and all(isinstance(v, numbers.Real) for v in arr.flat):
        arr = _exact_as_floats(arr, value, name)
    if arr.dtype.kind not in "iuf" or (arr.dtype == object):
        raise TypeError(f"{name} must be a number or an array of numbers, got {value!r} "
                        f"({type(value).__name__})")
    return arr


def _exact_as_floats(arr: np.ndarray, value, name: str) -> np.ndarray:
    """An object array of exact reals (fractions.Fraction, ints past int64) as float64: every formula here
    computes in floats, so Fraction(7, 10) answers as 0.7 does. A bool inside is refused as everywhere."""
    if any(isinstance(v, (bool, np.bool_)) for v in arr.flat):
        raise TypeError(f"{name} must be a number, got a bool inside {_shown(value)}")
    try:
        return arr.astype(np.float64)
    except OverflowError:
        raise ValueError(f"{name} is too large for a float, got {_shown(value)}") from None


def _shown(value) -> str:
    arr = np.asarray(value)
    return repr(value) if arr.size <= 8 else f"an array of {arr.size} values"


def whole(value, name: str, low: int = 1, high: int | None = None, scalar: bool = False):
    """An int (or, unless scalar=True, an integer array) in [low, high]. Floats with whole values (3.0)
    pass; 2.5 does not."""
    arr = _numbers(value, name, scalar)
    one = np.ndim(value) == 0
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must be a whole number, got {_shown(value)}")
        if np.any(np.abs(arr) >= 2.0 ** 63):  # would wrap around in int64
            raise ValueError(f"{name} is too large (at most 2**63 - 1), got {_shown(value)}")
        arr = arr.astype(np.int64)
    if arr.size == 0 and not one:
        raise ValueError(f"{name} must not be empty")
    if np.any(arr < low) or (high is not None and np.any(arr > high)):
        bound = f">= {low}" if high is None else f"in {low}..{high}"
        raise ValueError(f"{name} must be {bound}, got {_shown(value)}")
    return int(arr) if one else arr


def _reals(value, name: str, scalar: bool) -> np.ndarray:
    """value as a non-empty float64 array (see _numbers)."""
    arr = _numbers(value, name, scalar).astype(np.float64)
    if arr.size == 0 and np.ndim(value) != 0:
        raise ValueError(f"{name} must not be empty")
    return arr


def positive(value, name: str, zero: bool = False, scalar: bool = False):
    """A finite real number (or, unless scalar=True, an array of them) > 0, or >= 0 with zero=True, as
    float64."""
    arr = _reals(value, name, scalar)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {_shown(value)}")
    if np.any(arr < 0) or (not zero and np.any(arr == 0)):
        raise ValueError(f"{name} must be {'>= 0' if zero else '> 0'}, got {_shown(value)}")
    return float(arr) if np.ndim(value) == 0 else arr


def probability(value, name: str, low_open: bool = False, high_open: bool = False, scalar: bool = False):
    """A probability (or, unless scalar=True, an array of them): finite, in [0, 1]; either end may be
    excluded."""
    arr = _reals(value, name, scalar)
    low_bad = (arr <= 0) if low_open else (arr < 0)
    high_bad = (arr >= 1) if high_open else (arr > 1)
    if not np.all(np.isfinite(arr)) or np.any(low_bad | high_bad):
        span = f"{'(' if low_open else '['}0, 1{')' if high_open else ']'}"
        raise ValueError(f"{name} must lie in {span}, got {_shown(value)}")
    return float(arr) if np.ndim(value) == 0 else arr


def distribution(p, name: str = "p", atol: float = ATOL) -> np.ndarray:
    """p as an array (float64, or object for exact Fractions) if every row along the last axis is a
    probability vector, else a ValueError saying what is wrong."""
    exact = np.asarray(p).dtype == object
    try:
        arr = np.asarray(p, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of probabilities, got {type(p).__name__}") from exc
    if arr.ndim == 0 or arr.shape[-1] == 0:
        raise ValueError(f"{name} must be an array of probabilities over a vocabulary, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    if np.any(arr < 0):
        raise ValueError(f"{name} has negative entries (min {arr.min():.3g}); probabilities must be >= 0")
    sums = arr.sum(axis=-1)
    if not np.allclose(sums, 1.0, atol=atol):
        worst = float(sums.flat[np.argmax(np.abs(sums - 1.0))])
        raise ValueError(f"{name} is not normalized: a row sums to {worst:.6g}, not 1. "
                         "Pass probabilities (softmax of logits), not logits or counts.")
    return np.asarray(p) if exact else arr


def token_ids(ids, name: str, vocab_size: int | None, empty: bool = False) -> list[int]:
    """ids (a list, a numpy array or a torch tensor, 1-D) as a list of ints, each in [0, vocab_size)
    (vocab_size None: any id >= 0)."""
    if hasattr(ids, "detach"):
        if ids.dtype.is_floating_point or ids.dtype.is_complex or str(ids.dtype) == "torch.bool":
            raise TypeError(f"{name} must hold integer token ids, got a {ids.dtype} tensor")
        ids = ids.tolist()
    arr = np.asarray(ids) if not isinstance(ids, (str, bytes)) else np.asarray(None)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(f"{name} must be a flat sequence of integer token ids, got {_shown(ids)}")
    if arr.size == 0 and not empty:
        raise ValueError(f"{name} is empty: give at least one token (a BOS token, say)")
    top = np.inf if vocab_size is None else vocab_size
    if arr.size and (arr.min() < 0 or arr.max() >= top):
        bad = int(arr[(arr < 0) | (arr >= top)][0])
        span = "0 or more" if vocab_size is None else f"the vocabulary 0..{vocab_size - 1}"
        raise ValueError(f"{name} holds token id {bad}, outside {span}")
    return arr.astype(np.int64).tolist()


def draft_q(q, drafted: list[int], vocab_size: int, who: str):
    """A drafter's q, checked before the rejection rule trusts it: shape (len(drafted), V), finite,
    >= 0, rows summing to 1 within Q_ATOL, and q[i, drafted[i]] > 0 (a token drawn from q had mass).

    The rule accepts draft x with probability min(1, p(x)/q(x)); a q that is too small accepts too
    often, and a q of zeros accepts everything, so a misreported q silently biases the output.
    One host sync for all the checks."""
    import torch

    if not isinstance(q, torch.Tensor):
        raise TypeError(f"{who} returned a q of type {type(q).__name__}; Draft.q must be a torch tensor "
                        "of shape (len(tokens), V), or None for a deterministic draft")
    want = (len(drafted), vocab_size)
    if tuple(q.shape) != want:
        raise ValueError(f"{who} returned q of shape {tuple(q.shape)} for {len(drafted)} drafted tokens; "
                         f"q must be (len(tokens), V) = {want}, one distribution per drafted token")
    if not want[0]:
        return
    qf = q.float()
    rows = torch.arange(want[0], device=q.device)
    at = qf[rows, torch.tensor(drafted, device=q.device)]
    finite, low, worst_sum, low_at = torch.stack([
        torch.isfinite(qf).all().float(), qf.min(), (qf.sum(-1) - 1).abs().max(), at.min()]).tolist()
    if not finite:
        raise ValueError(f"{who} returned a q with NaN or inf entries")
    if low < 0:
        raise ValueError(f"{who} returned a q with negative entries (min {low:.3g})")
    if worst_sum > Q_ATOL:
        raise ValueError(f"{who} returned a q whose rows do not sum to 1 (off by up to {worst_sum:.3g}); "
                         "q must be the distribution each token was drawn from, after the sampler's "
                         "temperature/top-k/top-p, not logits or scaled probabilities")
    if low_at <= 0:
        raise ValueError(f"{who} drafted a token its own q gives probability 0: q must be the distribution "
                         "the token was drawn from")


def stop_tokens(eos_token_id, vocab_size: int) -> set[int]:
    """The set of stop tokens from an id, a list of them (as Hugging Face configs hold) or None (none);
    -1 or [] means never stop. Any other id must be in the vocabulary."""
    if eos_token_id is None:
        return set()
    ids = list(eos_token_id) if isinstance(eos_token_id, (list, tuple, set)) else [eos_token_id]
    if ids == [-1]:
        return set()
    return set(token_ids(ids, "eos_token_id", vocab_size, empty=True))


def prompt_ids(input_ids, vocab_size: int, name: str = "input_ids") -> list[int]:
    """A (1, T) torch tensor of token ids, T >= 1, every id in the vocabulary, as a list of ints.
    Checked before any pass: an id past the vocabulary is an index error deep inside the embedding
    (or, on a GPU, a device-side assert that poisons the whole session)."""
    import torch

    if not isinstance(input_ids, torch.Tensor):
        raise TypeError(f"{name} must be a (1, T) torch tensor of token ids (specnotes.decode.prompt_ids "
                        f"makes one from text), got {type(input_ids).__name__}")
    if input_ids.ndim != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"{name} must have shape (1, T); got {tuple(input_ids.shape)}. Batch > 1 takes "
                         "engine.generate_batch (a list of prompts; each row keeps its own accepted length).")
    return token_ids(input_ids[0], name, vocab_size)


def sampling(do_sample, temperature, top_k, top_p, seed) -> tuple:
    """The sampling settings every generator takes: a bool, a finite temperature in TEMPERATURES when
    sampling, top_k a whole number >= 1, top_p in (0, 1], seed a whole number >= 0 (or None).

    Returns them as (bool, float, int or None, float or None, int or None), so a Fraction, a numpy scalar
    or a 0-d array reaches torch as the Python number it stands for (the temperature unchanged when
    greedy, which never reads it)."""
    if not isinstance(do_sample, (bool, np.bool_)):
        raise TypeError(f"do_sample must be True or False, got {do_sample!r}")
    if do_sample:
        temperature = _temperature(temperature)
    if top_k is not None:
        top_k = whole(top_k, "top_k", scalar=True)
    if top_p is not None:
        top_p = probability(top_p, "top_p", low_open=True, scalar=True)
    if seed is not None:
        seed = whole(seed, "seed", low=0, high=2**64 - 1, scalar=True)
    return bool(do_sample), temperature, top_k, top_p, seed


TEMPERATURES = (1e-30, 1e30)  # logits (float32) divided by a temperature stay finite and distinct inside


def _temperature(value) -> float:
    """A sampling temperature as a float in TEMPERATURES. Outside it, float32 logits / temperature
    overflow to inf (a NaN distribution) or collapse to ties (top-k keeps everything)."""
    try:
        t = positive(value, "temperature", scalar=True)
    except ValueError as exc:
        raise ValueError(f"{exc}; sampling needs a finite temperature > 0 "
                         "(use do_sample=False for greedy, the temperature -> 0 limit)") from None
    low, high = TEMPERATURES
    if t < low:
        raise ValueError(f"temperature {t:g} is below {low:g}: float32 logits divided by it overflow. "
                         "Use do_sample=False for greedy, the temperature -> 0 limit")
    if t > high:
        raise ValueError(f"temperature {t:g} is above {high:g}: float32 logits divided by it all round to "
                         "0. Sample from a uniform distribution directly, or use a smaller temperature")
    return t


# --------------------------------------------------------------------------- timed runs' settings


def fits(model, positions: int, what: str) -> None:
    """A ValueError when `positions` is more than the model was built for (a huge context or width
    would otherwise allocate until the machine runs out of memory)."""
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if limit is not None and positions > limit:
        raise ValueError(f"{what} is {positions} positions, more than the model's {limit} "
                         "(config.max_position_embeddings): use a smaller setting")


def samplings(samplings) -> tuple[str, ...]:
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
    token_ids(ids[0], name, model.config.vocab_size)
