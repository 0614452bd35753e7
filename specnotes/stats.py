"""The exactness checks: is a sampler's output distributed as the target's? Samples against an exact
reference, by a chi-square test and the total-variation distance, with the noise a perfect sampler
shows at n samples, and the one threshold below which a sampler is called biased.

The exact reference is the toy language's enumeration (toy.exact_distribution) or, for a tiny real model,
exact_first_tokens. Notebooks 03 (the proof), 04 (the bug zoo) and 06 (every drafter, on a tiny real
model) run these, and so do the tests: `chi2_test(samples, exact).p_value < FLAG_P` is what "flagged"
means everywhere.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import stats as sps

from specnotes import checks
from specnotes.placement import device_of, host
from specnotes.sampling import Sampler

FLAG_P = 1e-6  # chi-square p-value below which a sampler is called biased (false alarms: 1 in a million)
MIN_EXPECTED = 5.0  # chi-square cells expecting fewer hits than this are pooled into one


class ChiSquare(NamedTuple):
    tv: float  # total variation between the samples' histogram and the exact distribution
    p_value: float  # chi-square p-value: Uniform(0, 1) for an exact sampler, tiny for a biased one

    @property
    def flagged(self) -> bool:
        """Biased by the course's standard: p below FLAG_P."""
        return self.p_value < FLAG_P


def sequence_index(samples, vocab: int) -> np.ndarray:
    """(n,) lexicographic index of each row of an (n, length) sample array."""
    samples = np.asarray(samples)
    return samples @ (vocab ** np.arange(samples.shape[1] - 1, -1, -1))


def chi2_test(samples, exact) -> ChiSquare:
    """(tv, p_value) of n sampled sequences against the exact probability of every sequence
    (lexicographic order, as sequence_index numbers them): total variation, and a chi-square test
    (scipy.stats) whose cells expecting fewer than MIN_EXPECTED hits are pooled into one.

    Both inputs are checked first, because a check that cannot fail is worse than none: no samples, or
    a reference with NaN in it, would otherwise read as p = 1 ("exact"). A sample the reference calls
    impossible (probability 0) gives p = 0 outright."""
    exact = checks.distribution(exact, "exact").astype(np.float64)  # exact Fractions too: scipy needs floats
    if exact.ndim != 1:
        raise ValueError(f"exact must be one distribution over sequences (1-D), got shape {exact.shape}")
    samples = np.asarray(samples)
    if samples.ndim != 2 or samples.shape[0] == 0 or samples.shape[1] == 0:
        raise ValueError(f"samples must be an (n, length) array with n >= 1 sequences, got shape "
                         f"{samples.shape}")
    if samples.dtype.kind not in "iu":
        raise TypeError(f"samples must hold integer token ids, got dtype {samples.dtype}")
    n, length = samples.shape
    vocab = int(round(exact.size ** (1.0 / length)))
    if vocab**length != exact.size:
        raise ValueError(f"exact has {exact.size} outcomes, not V**{length} for any V")
    if samples.min() < 0 or samples.max() >= vocab:
        raise ValueError(f"samples hold token ids outside 0..{vocab - 1}, the vocabulary of exact")
    counts = np.bincount(sequence_index(samples, vocab), minlength=exact.size)
    tv = float(0.5 * np.abs(counts / n - exact).sum())
    if counts[exact == 0].any():
        return ChiSquare(tv, 0.0)
    expected = n * exact
    big = expected >= MIN_EXPECTED
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    if obs.size < 2:
        if np.count_nonzero(exact) > 1:  # a test that could reject nothing must not read as "exact"
            need = int(np.ceil(MIN_EXPECTED / exact.max()))
            raise ValueError(f"samples: {n} are too few for the chi-square test (no outcome expects "
                             f"{MIN_EXPECTED:g} hits, so nothing could be rejected); draw at least {need}")
        return ChiSquare(tv, 1.0)  # the reference allows one outcome and every sample is it
    stat = ((obs - exp) ** 2 / exp).sum()
    return ChiSquare(tv, float(sps.chi2.sf(stat, obs.size - 1)))


def _next_probs(model, prompt, prefixes: list, processing):
    """(len(prefixes), V) float64 on the host: the processed next-token distribution after the prompt
    and each prefix, in one batched pass."""
    import torch

    batch = torch.tensor([prompt[0].tolist() + list(p) for p in prefixes], device=device_of(model))
    with torch.no_grad():
        return host(processing.probs(model(batch).logits[:, -1].double())).double()


def exact_first_tokens(model, prompt, length: int, temperature: float = 1.0, top_k: int | None = None):
    """(V**length,) the exact probability of each possible first `length` sampled tokens, in
    lexicographic order, under plain sampling from the processed distribution: the reference that the
    calibrated χ² tests compare a real engine's samples against (chi2_test). Tiny vocabularies only: it
    runs V**(length-1) prefixes."""
    checks.prompt_ids(prompt, model.config.vocab_size, "prompt")
    length = checks.whole(length, "length", scalar=True)
    if model.config.vocab_size ** length > 10_000_000:
        raise ValueError(f"length: V**length = {model.config.vocab_size}**{length} outcomes is too many to "
                         "enumerate; this reference is for tiny vocabularies and a few tokens")
    processing = Sampler(do_sample=True, temperature=temperature, top_k=top_k, seed=0,
                         device=device_of(model))
    dist = np.ones(1)
    prefixes = [[]]
    for _ in range(length):
        probs = _next_probs(model, prompt, prefixes, processing).numpy()
        probs /= probs.sum(axis=1, keepdims=True)
        dist = (dist[:, None] * probs).reshape(-1)
        prefixes = [p + [v] for p in prefixes for v in range(probs.shape[1])]
    return dist


def exact_top_k(model, prompt, length: int, top_k: int, temperature: float = 1.0):
    """(support, probs): every continuation of `length` tokens that sampling with top-k can produce, as an
    (top_k**length, length) array of ids, and the exact probability of each, for any vocabulary (a real
    model: top-k keeps the enumeration small). chi2_on_support tests samples against it."""
    import torch

    checks.prompt_ids(prompt, model.config.vocab_size, "prompt")
    length = checks.whole(length, "length", scalar=True)
    top_k = min(checks.whole(top_k, "top_k", scalar=True), model.config.vocab_size)  # >= V: every token
    if top_k**length > 100_000:
        raise ValueError(f"top_k**length = {top_k}**{length} continuations is too many to enumerate")
    processing = Sampler(do_sample=True, temperature=temperature, top_k=top_k, seed=0,
                         device=device_of(model))
    support, probs = np.zeros((1, 0), dtype=np.int64), np.ones(1)
    for _ in range(length):
        p = _next_probs(model, prompt, support.tolist(), processing)
        top = torch.topk(p, top_k, dim=-1)  # the kept tokens (ties at the cut: the first top_k of them)
        kept = top.values.numpy() / top.values.numpy().sum(axis=1, keepdims=True)
        support = np.concatenate([np.repeat(support, top_k, axis=0), top.indices.numpy().reshape(-1, 1)], 1)
        probs = (probs[:, None] * kept).reshape(-1)
    return support, probs


def chi2_on_support(samples, support, probs) -> ChiSquare:
    """chi2_test of sampled continuations (n, length) against exact_top_k's (support, probs): each
    continuation becomes its row in support, and one more cell of probability 0 holds any that is not
    there (so a single impossible sample gives p = 0)."""
    samples, support = np.asarray(samples), np.asarray(support)
    if samples.ndim != 2 or samples.shape[1] != support.shape[1]:
        raise ValueError(f"samples must be (n, {support.shape[1]}) continuations, got shape {samples.shape}")
    where = {tuple(row): i for i, row in enumerate(support.tolist())}
    rows = np.array([[where.get(tuple(row), len(support))] for row in samples.tolist()], dtype=np.int64)
    return chi2_test(rows, np.append(checks.distribution(probs, "probs"), 0.0))


OTHER = -1  # exact_head's marker: "any token outside the enumerated top ones here"


def exact_head(model, prompt, length: int, top: int, temperature: float = 1.0):
    """(support, probs) of a partition of every continuation of `length` tokens under plain sampling at
    `temperature` (no top-k): each of the `top` likeliest tokens at each step gets its own cell, and the
    rest of that step's mass one cell marked OTHER (the continuation ends there). Every cell's probability
    is exact, so chi2_on_head tests a full-vocabulary sampler, with no top-k to trust, on few cells."""
    checks.prompt_ids(prompt, model.config.vocab_size, "prompt")
    length = checks.whole(length, "length", scalar=True)
    top = checks.whole(top, "top", scalar=True)
    if (top + 1) ** length > 100_000:
        raise ValueError(f"(top + 1)**length = {top + 1}**{length} cells is too many to enumerate")
    processing = Sampler(do_sample=True, temperature=temperature, seed=0, device=device_of(model))
    open_rows, open_probs = [[]], [1.0]
    support, probs = [], []
    for _ in range(length):
        p = _next_probs(model, prompt, open_rows, processing).numpy()
        p /= p.sum(axis=1, keepdims=True)
        best = np.argsort(-p, axis=1, kind="stable")[:, :top]
        rows, masses = [], []
        for row, mass, dist, ids in zip(open_rows, open_probs, p, best, strict=True):
            kept = dist[ids]
            support.append(row + [OTHER] * (length - len(row)))
            probs.append(mass * max(0.0, 1.0 - kept.sum()))
            rows += [row + [int(t)] for t in ids]
            masses += list(mass * kept)
        open_rows, open_probs = rows, masses
    support += open_rows
    probs += open_probs
    return np.array(support, dtype=np.int64), np.array(probs)


def chi2_on_head(samples, support, probs) -> ChiSquare:
    """chi2_on_support against exact_head's partition: each sampled continuation goes to its cell (its
    tokens up to the first one outside the enumerated top ones, then OTHER)."""
    samples = np.asarray(samples)
    support = np.asarray(support)
    named = {tuple(row[:i]) for row in support.tolist() for i in range(row.index(OTHER) if OTHER in row
                                                                         else len(row) + 1)}
    cells = []
    for row in samples.tolist():
        cut = next((i for i in range(1, len(row) + 1) if tuple(row[:i]) not in named), None)
        cells.append(row if cut is None else row[:cut - 1] + [OTHER] * (len(row) - cut + 1))
    return chi2_on_support(np.array(cells, dtype=np.int64).reshape(samples.shape), support, probs)


def samples_for_power(probs, shift: float, power: float = 0.9, level: float = FLAG_P) -> int:
    """The fewest samples with which chi2_test flags, with probability `power` at p < `level`, a sampler
    that moves a fraction `shift` of the mass onto the likeliest cell (mixture (1 - shift) p + shift e):
    the noncentral chi-square with noncentrality n * sum((a - p)^2 / p) over cells of p > 0 (before the
    test pools its sparse cells, so a close guide rather than a promise)."""
    p = checks.distribution(probs, "probs").astype(np.float64)
    shift = checks.probability(shift, "shift", scalar=True)
    if not 0 < shift:
        raise ValueError("shift must be above 0: no sample size detects no change")
    p = p[p > 0]
    alt = (1 - shift) * p
    alt[np.argmax(p)] += shift
    per_sample = float(((alt - p) ** 2 / p).sum())
    if per_sample == 0:  # the shift is lost below float64's resolution (or probs has one cell)
        raise ValueError(f"shift {shift:g} leaves probs unchanged in float64 (or probs has a single "
                         "outcome): no sample size detects it; use a larger shift")
    df = p.size - 1
    critical = sps.chi2.isf(level, df)
    lo, hi = 1, 1
    while sps.ncx2.sf(critical, df, hi * per_sample) < power:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if sps.ncx2.sf(critical, df, mid * per_sample) < power else (lo, mid)
    return hi


def expected_tv_noise(exact, n) -> np.ndarray:
    """Expected TV distance of a *perfect* sampler's n-sample histogram from `exact` (normal
    approximation: E|count/n - p| = sqrt(2 p (1 - p) / (pi n)) per cell). Broadcasts over n."""
    exact = checks.distribution(exact, "exact").astype(np.float64)
    n = np.asarray(checks.positive(n, "n"))[..., None]
    return (0.5 * np.sqrt(2 * exact * (1 - exact) / (np.pi * n)).sum(axis=-1))[()]


def uniform_band(n: int, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Where the sorted p-values of n correct tests fall, pointwise with probability `level`: the i-th
    smallest of n uniform draws is Beta(i, n + 1 - i). Returns (low, high), each (n,), smallest first."""
    n = checks.whole(n, "n", scalar=True)
    level = checks.probability(level, "level", low_open=True, high_open=True, scalar=True)
    i = np.arange(1, n + 1)
    tail = (1 - level) / 2
    return sps.beta.ppf(tail, i, n + 1 - i), sps.beta.ppf(1 - tail, i, n + 1 - i)


def token_marginals(dist, vocab: int, length: int) -> np.ndarray:
    """(vocab,) how often each token appears, averaged over positions, under a sequence distribution."""
    vocab, length = checks.whole(vocab, "vocab", scalar=True), checks.whole(length, "length", scalar=True)
    dist = checks.distribution(dist, "dist")
    if dist.shape != (vocab**length,):
        raise ValueError(f"dist must hold vocab**length = {vocab}**{length} probabilities, got shape "
                         f"{dist.shape}")
    seqs = np.indices((vocab,) * length).reshape(length, -1).T  # lexicographic, like sequence_index
    counts = np.stack([(seqs == v).sum(axis=1) for v in range(vocab)], axis=1) / length
    return np.asarray(dist, dtype=np.float64) @ counts


def power(probs, alternative, n, level: float = FLAG_P) -> float:
    """The probability that chi2_test flags (p < `level`) n samples drawn from `alternative` when `probs` is
    the reference: the noncentral chi-square with noncentrality n * sum((alternative - probs)^2 / probs)
    over the cells of probs > 0, as samples_for_power reckons it (a close guide, before pooling)."""
    p = checks.distribution(probs, "probs").astype(np.float64)
    alt = checks.distribution(alternative, "alternative").astype(np.float64)
    if alt.shape != p.shape or p.ndim != 1:
        raise ValueError(f"alternative must be a distribution over the same cells as probs (1-D, shape "
                         f"{p.shape}), got shape {alt.shape}")
    n = checks.whole(n, "n", scalar=True)
    level = checks.probability(level, "level", low_open=True, high_open=True, scalar=True)
    live = p > 0
    df = int(live.sum()) - 1
    if df < 1:
        raise ValueError("probs must give at least two cells a probability above 0: one cell tests nothing")
    per_sample = ((alt[live] - p[live]) ** 2 / p[live]).sum()
    return float(sps.ncx2.sf(sps.chi2.isf(level, df), df, n * per_sample))


class PositionTV(NamedTuple):
    first_tv: float  # the first token's histogram against its exact distribution
    second: np.ndarray  # (vocab,) histogram of the second token, over the samples that began with `given`
    second_tv: float  # that histogram against the exact distribution after `given`
    n: int  # samples that began with `given`


def position_tv(samples, first_exact, second_exact, given: int) -> PositionTV:
    """Where a sampler of two-token continuations strays, position by position: the TV of its first tokens
    from `first_exact` (vocab,), and of its second tokens, among the samples whose first token is `given`,
    from `second_exact` (vocab,), the exact distribution after `given`. (Notebook 09: the first token comes
    from the prefill, the second is the one a speculating engine's rejection sampler decides.)"""
    first_exact = checks.distribution(first_exact, "first_exact")
    second_exact = checks.distribution(second_exact, "second_exact")
    samples = np.asarray(samples)
    if samples.ndim != 2 or samples.shape[1] < 2 or samples.shape[0] == 0 or samples.dtype.kind not in "iu":
        raise ValueError(f"samples must be an (n, 2 or more) array of token ids with n >= 1, got shape "
                         f"{samples.shape} and dtype {samples.dtype}")
    vocab = min(first_exact.size, second_exact.size)
    if samples[:, :2].min() < 0 or samples[:, :2].max() >= vocab:
        raise ValueError(f"samples must hold token ids in [0, {vocab}), the exact distributions' vocabulary; "
                         f"got ids {samples[:, :2].min()} to {samples[:, :2].max()}")
    first = np.bincount(samples[:, 0], minlength=first_exact.size) / len(samples)
    after = samples[samples[:, 0] == given, 1]
    second = np.bincount(after, minlength=second_exact.size) / max(len(after), 1)
    return PositionTV(float(0.5 * np.abs(first - first_exact).sum()), second,
                      float(0.5 * np.abs(second - second_exact).sum()), len(after))
