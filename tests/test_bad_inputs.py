# ruff: noqa: E501  (one case per line reads as a list; wrapping them would not)
"""The bad-input zoo: every public function and command, fed the classic bad values a hostile user (or a
tired one) types. Each case must end in a ValueError or a TypeError whose message names the argument:
never a wrong answer, never a raw traceback from deep inside numpy or torch, never a hang.

Read it as a list. Each line is `function: argument = kind of bad value`; the kinds are below.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from typing import NamedTuple

import numpy as np
import pytest
import torch

from specnotes import (
    adaptive,
    bugzoo,
    decode,
    distill,
    drafter_table,
    engine,
    metrics,
    models,
    mtp,
    numerics,
    offline,
    passes,
    readouts,
    roofline,
    rules,
    sampling,
    serving,
    stats,
    surgery,
    theory,
    timing,
    toy,
    tree,
    viz_drafters,
    viz_exactness,
    viz_roofline,
    viz_serving,
    viz_speedup,
)
from specnotes.drafters import (
    DraftModel,
    EagleLite,
    EarlyExit,
    Lookahead,
    Medusa,
    PromptLookup,
    RandomTree,
    Suffix,
)
from specnotes.training.eagle import new_model
from specnotes.training.early_exit import exit_model
from specnotes.training.medusa import new_heads

# --------------------------------------------------------------------------- the kinds of bad value

NAN, INF = float("nan"), float("inf")
# a count of things: tokens, rounds, layers, repeats
WHOLE = {"NaN": NAN, "inf": INF, "negative": -3, "zero": 0, "fractional": 2.5, "bool": True, "text": "4",
         "None": None, "a list": [1, 2]}
# a count that broadcasts: an array of them is fine, one bad entry is not
COUNTS = {k: v for k, v in WHOLE.items() if k != "a list"}
# a count that may be zero (context already in the cache, a round that drafted nothing)
COUNT = {k: v for k, v in WHOLE.items() if k not in ("zero", "a list")}
# a real quantity: a cost, a size, a temperature
POSITIVE = {"NaN": NAN, "inf": INF, "negative": -0.5, "zero": 0.0, "bool": True, "text": "1", "None": None}
POSITIVE_OR_ZERO = {k: v for k, v in POSITIVE.items() if k != "zero"}
# a probability
PROBABILITY = {"NaN": NAN, "inf": INF, "negative": -0.1, "above one": 1.5, "bool": True, "text": "0.5"}
# a table of probabilities, one row per context
DISTRIBUTION = {"a NaN entry": [[NAN, 1.0]], "a negative entry": [[1.5, -0.5]], "logits": [[2.0, 1.0]],
                "counts": [[3, 1]], "empty": [[]], "a scalar": 0.5, "text": "p"}


class Case(NamedTuple):
    label: str  # "function: argument = kind"
    call: object  # () -> anything; must raise
    names: str  # what the message must mention (the argument)


CASES: list[Case] = []


def bad(function: str, argument: str, values: dict, call, names: str | None = None):
    """Register call(value) for every bad value of one argument of one function."""
    for kind, value in values.items():
        CASES.append(Case(f"{function}: {argument} = {kind}", (lambda v=value: call(v)), names or argument))


def one(function: str, argument: str, kind: str, call, names: str | None = None):
    CASES.append(Case(f"{function}: {argument} = {kind}", call, names or argument))


TINY = models.tiny_llama(seed=0, layers=2)
DRAFT = models.tiny_llama(seed=1, layers=1, hidden_size=32)
IDS = torch.tensor([[5, 9, 2, 77, 5, 9]])
P, Q = toy.seed_pair()
SHAPE = roofline.Shape(32, 8, 128)
EAGLE = new_model(TINY)
TRAINABLE = [torch.nn.Parameter(torch.zeros(2))]

# --------------------------------------------------------------------------- the speedup math (05)

bad("theory.expected_tokens", "alpha", PROBABILITY, lambda v: theory.expected_tokens(v, 3))
bad("theory.expected_tokens", "k", COUNTS, lambda v: theory.expected_tokens(0.8, v))
bad("theory.speedup", "c", POSITIVE_OR_ZERO, lambda v: theory.speedup(0.8, 3, v))
bad("theory.speedup", "verify", POSITIVE, lambda v: theory.speedup(0.8, 3, 0.05, v))
bad("theory.position_alphas", "judged", {**COUNT, "more than drafted": 3}, lambda v: theory.position_alphas([2], [v], [0]))
bad("theory.position_alphas", "drafted", {"empty": [], "ragged": [[1, 2], [3]]}, lambda v: theory.position_alphas(v, [0], [0]))
bad("theory.best_k", "k_max", {**WHOLE, "huge": 10**12}, lambda v: theory.best_k(0.8, 0.05, v))
bad("theory.speedup_table", "alphas", PROBABILITY, lambda v: theory.speedup_table([0.5, v], [1, 2], 0.05))
bad("theory.speedup_table", "ks", COUNTS, lambda v: theory.speedup_table([0.5], [1, v], 0.05))
bad("theory.expected_tokens_positional", "alphas", {**PROBABILITY, "empty": []},
    lambda v: theory.expected_tokens_positional(v if isinstance(v, list) else [0.5, v]))
bad("theory.acceptance_rate", "p", DISTRIBUTION, lambda v: theory.acceptance_rate(v, [[0.5, 0.5]]))
bad("theory.predicted_speedup", "position_alpha", PROBABILITY,
    lambda v: theory.predicted_speedup([0.5, v], [2, 2], [0, 1, 1, 1]))
bad("theory.predicted_speedup", "draft_lengths", {**COUNT, "empty": []},
    lambda v: theory.predicted_speedup([0.5, 0.5], v if isinstance(v, list) else [2, v], [0, 1, 1, 1]))
bad("theory.predicted_speedup", "verify_cost", POSITIVE_OR_ZERO,
    lambda v: theory.predicted_speedup([0.5, 0.5], [2, 2], [0, 1, v, 1]))
one("theory.predicted_speedup", "verify_cost", "a free pass at width 1",
    lambda: theory.predicted_speedup([0.5, 0.5], [2, 2], [0, 0, 1, 1]))
one("theory.predicted_speedup", "position_alpha", "a draft length missing", lambda: theory.predicted_speedup({2: [0.5, 0.5]}, [2, 4], [0, 1, 1, 1, 1, 1]))
one("theory.predicted_speedup", "position_alpha", "too short for its length", lambda: theory.predicted_speedup({4: [0.5]}, [4], [0, 1, 1, 1, 1, 1]))
one("theory.predicted_speedup", "position_alpha", "one above one", lambda: theory.predicted_speedup({2: [0.5, 1.5]}, [2], [0, 1, 1, 1]))
bad("theory.predicted_speedup", "plain", {k: v for k, v in POSITIVE.items() if k != "None"}, lambda v: theory.predicted_speedup([0.5, 0.5], [2, 2], [0, 1, 1, 1], prefill=5.0, n_tokens=20, plain=v))
bad("adaptive.Controller", "verify_cost", {"a free pass": [0, 1, 0.0, 1]}, lambda v: adaptive.Controller(0.05, verify_cost=v))
bad("theory.predicted_speedup", "draft_cost", POSITIVE_OR_ZERO,
    lambda v: theory.predicted_speedup([0.5, 0.5], [2, 2], [0, 1, 1, 1], v))
bad("theory.predicted_speedup", "prefill", POSITIVE_OR_ZERO,
    lambda v: theory.predicted_speedup([0.5, 0.5], [2, 2], [0, 1, 1, 1], 0.1, prefill=v, n_tokens=20))
bad("theory.predicted_speedup", "n_tokens", {k: v for k, v in WHOLE.items() if k != "None"},
    lambda v: theory.predicted_speedup([0.5, 0.5], [2, 2], [0, 1, 1, 1], 0.1, prefill=5.0, n_tokens=v))

# --------------------------------------------------------------------------- the roofline (01) and serving (08)

bad("roofline.model_bytes", "n_params", POSITIVE, lambda v: roofline.model_bytes(v, "bf16"))
one("roofline.model_bytes", "dtype", "unknown", lambda: roofline.model_bytes(7e9, "fp7"))
bad("roofline.step_time", "tokens", COUNTS, lambda v: roofline.step_time(7e9, "bf16", "H100 SXM", tokens=v))
bad("roofline.step_time", "batch", COUNTS, lambda v: roofline.step_time(7e9, "bf16", "H100 SXM", batch=v))
bad("roofline.step_time", "context", COUNT,
    lambda v: roofline.step_time(7e9, "bf16", "H100 SXM", context=v, shape=SHAPE))
one("roofline.step_time", "gpu", "unknown", lambda: roofline.step_time(7e9, "bf16", "H200000"))
bad("roofline.kv_cache_bytes", "context", COUNT, lambda v: roofline.kv_cache_bytes(SHAPE, v))
bad("roofline.kv_cache_bytes", "batch", COUNTS, lambda v: roofline.kv_cache_bytes(SHAPE, 128, v))
bad("roofline.forward_flops", "tokens", POSITIVE, lambda v: roofline.forward_flops(7e9, v))
bad("roofline.arithmetic_intensity", "batch", COUNTS, lambda v: roofline.arithmetic_intensity(4, "bf16", v))
bad("roofline.measure_bandwidth", "megabytes", WHOLE, lambda v: roofline.measure_bandwidth("cpu", v))
bad("roofline.measure_bandwidth", "repeats", WHOLE, lambda v: roofline.measure_bandwidth("cpu", 16, v))
bad("roofline.measure_matmul_flops", "n", WHOLE, lambda v: roofline.measure_matmul_flops("cpu", v))
bad("roofline.tokens_curve", "tokens", COUNTS, lambda v: roofline.tokens_curve(TINY, [1, v], gpu="T4"))

bad("serving.pass_time", "batch", COUNTS, lambda v: serving.pass_time(v, 1, 8e9, "bf16", "H100 SXM"))
bad("serving.pass_time", "context", COUNT, lambda v: serving.pass_time(4, 1, 8e9, "bf16", "H100 SXM", v))
bad("serving.verify_cost", "k", COUNTS, lambda v: serving.verify_cost(4, v, 8e9, "bf16", "H100 SXM"))
bad("serving.simulate", "alpha", PROBABILITY,
    lambda v: serving.simulate(4, v, 4, 0.05, 8e9, "bf16", "H100 SXM"))
bad("serving.simulate", "c", POSITIVE_OR_ZERO, lambda v: serving.simulate(4, 0.7, 4, v, 8e9, "bf16", "H100 SXM"))
bad("serving.simulate", "n_params", POSITIVE, lambda v: serving.simulate(4, 0.7, 4, 0.05, v, "bf16", "H100 SXM"))
bad("serving.crossover_batch", "max_batch", WHOLE,
    lambda v: serving.crossover_batch(0.7, 4, 0.05, 8e9, "bf16", "H100 SXM", max_batch=v))
bad("serving.measured_speedup", "times",
    {"empty": {}, "a list": [1.0], "a negative time": {(1, 1): -1.0, (1, 5): 1.0},
     "a NaN time": {(1, 1): NAN, (1, 5): 1.0}, "a fractional batch": {(1.5, 1): 1.0}},
    lambda v: serving.measured_speedup(v, 0.7, 4, 0.05))
bad("serving.measured_speedup", "k", WHOLE, lambda v: serving.measured_speedup({(1, 1): 1.0}, 0.7, v, 0.05))
bad("serving.measure_grid", "batches", COUNTS, lambda v: serving.measure_grid(TINY, batches=(1, v), progress=False))
bad("serving.measure_grid", "repeats", WHOLE, lambda v: serving.measure_grid(TINY, repeats=v, progress=False))

# --------------------------------------------------------------------------- the toy sampler (03, 04) and its checks

bad("toy.make_pair", "vocab", {**WHOLE, "one": 1}, lambda v: toy.make_pair(vocab=v))
bad("toy.make_pair", "blend", PROBABILITY, lambda v: toy.make_pair(blend=v))
bad("toy.sample_target", "n", {**WHOLE, "huge": 10**12}, lambda v: toy.sample_target(P, v, 3, np.random.default_rng(0)))
bad("toy.sample_target", "P", DISTRIBUTION, lambda v: toy.sample_target(v, 10, 3, np.random.default_rng(0)))
bad("toy.sample_speculative", "k", WHOLE, lambda v: toy.sample_speculative(P, Q, 10, 3, v, np.random.default_rng(0)))
bad("toy.sample_speculative", "n", {"huge": 10**11},
    lambda v: toy.sample_speculative(P, Q, v, 3, 2, np.random.default_rng(0)))
bad("toy.sample_speculative", "length", WHOLE,
    lambda v: toy.sample_speculative(P, Q, 10, v, 2, np.random.default_rng(0)))
one("toy.sample_speculative", "rule", "unknown",
    lambda: toy.sample_speculative(P, Q, 10, 3, 2, np.random.default_rng(0), rule="optimistic"))
bad("toy.exact_distribution", "length", {**WHOLE, "huge": 40}, lambda v: toy.exact_distribution(P, v))
bad("toy.speculative_distribution", "k", WHOLE, lambda v: toy.speculative_distribution(P, Q, 2, v))
bad("toy.speculative_distribution", "length", {**WHOLE, "huge": 40},
    lambda v: toy.speculative_distribution(P, Q, v, 2))
EXACT = toy.exact_distribution(P, 2)
bad("stats.chi2_test", "samples", {"no samples": np.zeros((0, 2), dtype=int), "one flat row": np.array([1, 2]),
                               "floats": np.ones((5, 2)), "a token past the vocabulary": np.full((5, 2), 9)},
    lambda v: stats.chi2_test(v, EXACT))
bad("stats.chi2_test", "exact", {"NaN": np.full(16, NAN), "all zero": np.zeros(16), "unnormalized": np.ones(16),
                             "two rows": np.full((2, 8), 1 / 8), "not V**length outcomes": np.full(15, 1 / 15)},
    lambda v: stats.chi2_test(np.ones((5, 2), dtype=int), v))
bad("stats.expected_tv_noise", "n", POSITIVE, lambda v: stats.expected_tv_noise(EXACT, v))
bad("stats.uniform_band", "n", WHOLE, lambda v: stats.uniform_band(v))
bad("stats.uniform_band", "level", {**PROBABILITY, "zero": 0.0, "one": 1.0}, lambda v: stats.uniform_band(30, v))
bad("bugzoo.audit", "n", WHOLE, lambda v: bugzoo.audit(toy.exact_round, P, Q, v, 3, 2, 0))
bad("mtp.toy_language", "vocab", WHOLE, lambda v: mtp.toy_language(vocab=v))
bad("mtp.sample_language", "n", WHOLE, lambda v: mtp.sample_language(mtp.toy_language(), v, 8))
bad("mtp.train", "steps", WHOLE, lambda v: mtp.train(steps=v, progress=False))
bad("mtp.train", "lam", POSITIVE_OR_ZERO, lambda v: mtp.train(lam=v, steps=1, progress=False))

# --------------------------------------------------------------------------- the engine and its drafters (02, 06, 07)

bad("engine.generate", "max_new_tokens", WHOLE, lambda v: engine.generate(TINY, PromptLookup(), IDS, v))
# k=None is no cap (each drafter's own length); every other bad k is refused
bad("engine.generate", "k", {k: v for k, v in WHOLE.items() if k != "None"},
    lambda v: engine.generate(TINY, PromptLookup(), IDS, 5, k=v))
bad("engine.generate", "temperature", POSITIVE,
    lambda v: engine.generate(TINY, PromptLookup(), IDS, 5, do_sample=True, temperature=v))
bad("engine.generate", "top_k", {k: v for k, v in WHOLE.items() if k != "None"}, lambda v: engine.generate(TINY, PromptLookup(), IDS, 5, do_sample=True, top_k=v))
bad("engine.generate", "top_p", {**PROBABILITY, "zero": 0.0},
    lambda v: engine.generate(TINY, PromptLookup(), IDS, 5, do_sample=True, top_p=v))
bad("engine.generate", "seed", {k: v for k, v in COUNT.items() if k != "None"}, lambda v: engine.generate(TINY, PromptLookup(), IDS, 5, do_sample=True, seed=v))
bad("engine.generate", "do_sample", {"text": "yes", "a number": 1}, lambda v: engine.generate(TINY, PromptLookup(),
                                                                                               IDS, 5, do_sample=v))
bad("engine.generate", "input_ids", {"empty": torch.zeros((1, 0), dtype=torch.long), "a list": [[5, 9]],
                                     "floats": torch.ones((1, 3)), "a batch of two": torch.ones((2, 3), dtype=int),
                                     "flat": torch.tensor([5, 9]), "past the vocabulary": torch.tensor([[5, 256]])},
    lambda v: engine.generate(TINY, PromptLookup(), v, 5))
one("engine.generate", "drafter", "another vocabulary",
    lambda: engine.generate(TINY, DraftModel(models.tiny_llama(vocab_size=300)), IDS, 5), names="vocabulary")
bad("stats.exact_first_tokens", "length", {**WHOLE, "huge": 5}, lambda v: stats.exact_first_tokens(TINY, IDS, v))
bad("stats.exact_first_tokens", "temperature", POSITIVE, lambda v: stats.exact_first_tokens(TINY, IDS, 1, v))
bad("sampling.Sampler", "temperature", POSITIVE, lambda v: sampling.Sampler(do_sample=True, temperature=v))
bad("decode.plain_generate", "max_new_tokens", WHOLE, lambda v: decode.plain_generate(TINY, IDS, v))
bad("decode.plain_generate", "temperature", POSITIVE,
    lambda v: decode.plain_generate(TINY, IDS, 4, do_sample=True, temperature=v))
bad("passes.forward_pass", "keep", {k: v for k, v in WHOLE.items() if k != "None"}, lambda v: passes.forward_pass(TINY, IDS, keep=v))
one("engine.generate", "rule", "unknown", lambda: engine.generate(TINY, RandomTree(256), IDS, 4, rule="greedy-ish"))
bad("numerics.verify_vs_steps", "k", WHOLE, lambda v: numerics.verify_vs_steps(TINY, IDS, v))
bad("numerics.first_divergence", "max_new_tokens", WHOLE,
    lambda v: numerics.first_divergence(TINY, IDS, PromptLookup(), max_new_tokens=v))

bad("PromptLookup", "max_ngram", WHOLE, lambda v: PromptLookup(max_ngram=v))
bad("PromptLookup", "num_tokens", WHOLE, lambda v: PromptLookup(num_tokens=v))
bad("Suffix", "max_match", WHOLE, lambda v: Suffix(max_match=v))
bad("Suffix", "factor", POSITIVE, lambda v: Suffix(factor=v))
bad("Suffix", "min_prob", PROBABILITY, lambda v: Suffix(min_prob=v))
bad("Lookahead", "n", {**WHOLE, "one": 1}, lambda v: Lookahead(n=v))
bad("Lookahead", "window", COUNT, lambda v: Lookahead(window=v))
bad("DraftModel", "stop_below", {**PROBABILITY, "one": 1.0}, lambda v: DraftModel(DRAFT, stop_below=v))
bad("EarlyExit", "n_layers", {**WHOLE, "deeper than the target": 3}, lambda v: EarlyExit(TINY, n_layers=v))
bad("surgery.truncated", "n_layers", WHOLE, lambda v: surgery.truncated(TINY, v))
bad("medusa.new_heads", "n_heads", WHOLE, lambda v: new_heads(TINY, v))
bad("adaptive.Fixed", "k", WHOLE, lambda v: adaptive.Fixed(v))
bad("adaptive.Heuristic", "k_max", WHOLE, lambda v: adaptive.Heuristic(start=1, k_min=1, k_max=v))
bad("adaptive.Controller", "c", POSITIVE_OR_ZERO, lambda v: adaptive.Controller(v))
bad("adaptive.Controller", "decay", {**PROBABILITY, "zero": 0.0}, lambda v: adaptive.Controller(0.05, decay=v))
bad("adaptive.Controller", "k_max", WHOLE, lambda v: adaptive.Controller(0.05, k_max=v))
bad("adaptive.Controller", "verify_cost", {"NaN": [0, 1, NAN], "negative": [0, 1, -2], "too short": [1]},
    lambda v: adaptive.Controller(0.05, verify_cost=v))
bad("adaptive.CostAware", "c", POSITIVE_OR_ZERO, lambda v: adaptive.CostAware(v))
bad("adaptive.CostAware", "rows", {k: v for k, v in WHOLE.items() if v is not None}, lambda v: adaptive.CostAware(rows=v))
bad("adaptive.CostAware", "prior", PROBABILITY, lambda v: adaptive.CostAware(prior=v))
bad("adaptive.CostAware", "verify_cost", {"NaN": [0, 1, NAN], "negative": [0, 1, -2], "too short": [1],
                                          "a free pass": [0, 0, 1]},
    lambda v: adaptive.CostAware(verify_cost=v))
bad("adaptive.CostAware.plan", "alphas", PROBABILITY, lambda v: adaptive.CostAware().plan([0.5, v]))

# --------------------------------------------------------------------------- models, timing, plots

bad("models.tiny_llama", "vocab_size", WHOLE, lambda v: models.tiny_llama(vocab_size=v))
bad("models.tiny_llama", "layers", WHOLE, lambda v: models.tiny_llama(layers=v))
bad("models.load", "name", {"empty": "", "a number": 3, "unknown": "gpt-7"}, lambda v: models.load(v), names="name")
bad("offline.fetch", "name", {"unknown": "gpt-7"}, lambda v: offline.fetch(v), names="gpt-7")
bad("timing.time_call", "repeats", WHOLE, lambda v: timing.time_call(lambda: None, repeats=v))
bad("timing.time_call", "warmup", COUNT, lambda v: timing.time_call(lambda: None, warmup=v))
bad("timing.time_forward", "tokens", WHOLE, lambda v: timing.time_forward(TINY, tokens=v))
bad("timing.time_forward", "context", COUNT, lambda v: timing.time_forward(TINY, context=v))
bad("timing.pass_times", "repeats", WHOLE, lambda v: timing.pass_times(TINY, {"x": timing.Pass(torch.zeros(1, 1, dtype=torch.long))}, repeats=v))
bad("timing.pass_times", "passes", {"empty": {}, "a list": [1], "not a Pass": {"x": 1}}, lambda v: timing.pass_times(TINY, v))
bad("viz_speedup.speedup_view", "k", WHOLE, lambda v: viz_speedup.speedup_view(0.8, v, 0.05))
bad("viz_speedup.speedup_view", "alpha", PROBABILITY, lambda v: viz_speedup.speedup_view(v, 4, 0.05))
bad("readouts.roofline_readout", "n_params", POSITIVE, lambda v: readouts.roofline_readout(v, "bf16", "H100 SXM"))
bad("readouts.serving_readout", "context", COUNT,
    lambda v: readouts.serving_readout(0.7, 4, 0.05, 8e9, "bf16", "H100 SXM", v))
bad("rules.emitted_distribution", "p", DISTRIBUTION, lambda v: rules.emitted_distribution(v, [0.5, 0.5]))

# --------------------------------------------------------------------------- found by a second hostile probe

RNG = np.random.default_rng(0)
bad("engine.generate", "drafter", {"None": None, "the class, not an instance": PromptLookup, "text": "prompt lookup"},
    lambda v: engine.generate(TINY, v, IDS, 5))
bad("engine.generate", "eos_token_id", {"text": "x", "fractional": 1.5, "past the vocabulary": 300,
                                        "a list with one bad id": [5, 999]},
    lambda v: engine.generate(TINY, PromptLookup(), IDS, 5, eos_token_id=v))
bad("decode.plain_generate", "eos_token_id", {"text": "x", "past the vocabulary": 300},
    lambda v: decode.plain_generate(TINY, IDS, 5, eos_token_id=v))
one("decode.plain_generate", "on_token", "not a function", lambda: decode.plain_generate(TINY, IDS, 3, on_token=5))
bad("numerics.as_dtype", "dtype", {"an integer dtype": "int8", "unknown": "fp7", "a number": 16},
    lambda v: numerics.as_dtype(TINY, v))
one("numerics.first_divergence", "input_ids", "a list",
    lambda: numerics.first_divergence(TINY, [[5, 9, 2]], PromptLookup(), 4))
one("models.load", "device", "unknown", lambda: models.load(device="tpu"))
one("models.load", "dtype", "unknown", lambda: models.load(dtype="fp7"))
one("offline.fetch", "name", "a hub name", lambda: offline.fetch("HuggingFaceTB/SmolLM2-135M-Instruct"),
    names="catalog names only")
bad("tree.Tree", "parents", {"fractional": [-1, 0.5], "text": [-1, "0"], "below the root": [-1, -2]},
    lambda v: tree.Tree([1, 2], v))
bad("tree.Tree", "tokens", {"None": None, "negative": [-4]}, lambda v: tree.Tree(v, [-1]))
bad("Medusa", "widths", {"empty": (), "bool": (True,), "wider than the vocabulary": (300,), "a number": 3,
                         "fractional": (2.5,), "NaN": (NAN,), "text": ("2",), "deeper than the heads": (1, 1, 1, 1)},
    lambda v: Medusa(TINY, heads=new_heads(TINY), widths=v))
bad("Medusa", "heads", {"None": None, "a typo": "untrained"}, lambda v: Medusa(TINY, heads=v))
bad("EagleLite", "k", {"bool": True, "zero": 0, "fractional": 2.5}, lambda v: EagleLite(TINY, model=EAGLE, k=v))
bad("EagleLite", "vocab", {"zero": 0, "text": "abc", "fractional": 2.5, "bool": True, "negative": -1},
    lambda v: EagleLite(TINY, model=EAGLE, vocab=v))
bad("EagleLite", "min_confidence", {"text": "0.5", "one": 1.0, "negative": -0.1},
    lambda v: EagleLite(TINY, model=EAGLE, min_confidence=v))
one("EagleLite", "model", "a typo", lambda: EagleLite(TINY, model="trainde"))
one("EarlyExit", "adapter", "a typo", lambda: EarlyExit(TINY, 1, adapter="Trained"))
bad("EarlyExit", "rank", {"negative": -1, "fractional": 2.5, "text": "64", "wider than the model": 10**6},
    lambda v: EarlyExit(TINY, 1, adapter="trained", rank=v))
bad("early_exit.exit_model", "rank", {"negative": -1, "fractional": 2.5}, lambda v: exit_model(TINY, 1, rank=v))
bad("Lookahead", "seed", {"negative": -1, "fractional": 0.5, "text": "a"}, lambda v: Lookahead(seed=v))
bad("distill.fit", "steps", {"zero": 0, "negative": -3, "fractional": 2.5},
    lambda v: distill.fit(TRAINABLE, lambda idx: None, 10, v))
bad("distill.fit", "batch", {"zero": 0, "negative": -1}, lambda v: distill.fit(TRAINABLE, lambda idx: None, 10, 5, batch=v))
bad("distill.fit", "lr", {"NaN": NAN, "zero": 0.0}, lambda v: distill.fit(TRAINABLE, lambda idx: None, 10, 5, lr=v))
bad("distill.fit", "n_windows", {"zero": 0}, lambda v: distill.fit(TRAINABLE, lambda idx: None, v, 5))
one("distill.fit", "params", "nothing trainable", lambda: distill.fit([torch.zeros(2)], lambda idx: None, 10, 5))
bad("distill.windows", "length", {"zero": 0, "negative": -4, "one": 1},
    lambda v: distill.windows([np.arange(20)], [5], length=v))
bad("distill.windows", "seqs", {"empty": [], "all prompt": [np.arange(5)]},
    lambda v: distill.windows(v, [5] * len(v), length=8))
bad("distill.self_windows", "limit", {"negative": -1, "zero": 0, "fractional": 2.5},
    lambda v: distill.self_windows(limit=v))
one("stats.chi2_test", "samples", "too few to reject anything", lambda: stats.chi2_test(np.ones((4, 2), dtype=int), EXACT))
bad("toy.sample_target", "rng", {"a seed": 0, "None": None}, lambda v: toy.sample_target(P, 10, 3, v))
bad("toy.sample_target", "P", {"not square": np.full((2, 3), 1 / 3)}, lambda v: toy.sample_target(v, 5, 3, RNG))
bad("toy.exact_distribution", "P", {"one row": [0.5, 0.5], "not square": np.full((1, 4), 0.25)},
    lambda v: toy.exact_distribution(v, 2))
bad("toy.speculative_distribution", "Q", {"another vocabulary": np.full((3, 3), 1 / 3)},
    lambda v: toy.speculative_distribution(P, v, 2, 2))
bad("toy.depth_round", "Qs", {"an array, not a list": Q, "empty": []}, lambda v: toy.depth_round(P, v))
bad("toy.stationary", "P", {"not square": np.full((2, 3), 1 / 3)}, lambda v: toy.stationary(v))
bad("toy.predicted_alpha", "Q", {"NaN": np.full((4, 4), NAN)}, lambda v: toy.predicted_alpha(P, v))
bad("toy.acceptance_per_context", "Q", {"logits": 5 * Q}, lambda v: toy.acceptance_per_context(P, v))
one("toy.sample_speculative", "rule", "a custom rule that emits nothing (used to hang)",
    lambda: toy.sample_speculative(P, Q, 10, 3, 2, RNG, rule=lambda P_, Q_, prev, k, rng: (
        np.zeros((len(prev), k + 1), dtype=int), np.zeros(len(prev), dtype=int), np.zeros(len(prev), dtype=int))))
bad("toy.make_pair", "seed", {"negative": -1, "fractional": 0.5}, lambda v: toy.make_pair(seed=v))
one("bugzoo.audit", "check", "unknown", lambda: bugzoo.audit("target-residual", P, Q, 2000, 2, 2, 0, check="bogus"))
one("bugzoo.audit", "seed", "negative", lambda: bugzoo.audit("target-residual", P, Q, 2000, 2, 2, -1))
one("bugzoo.audit", "samples", "too few (a biased rule passed with p = 1)",
    lambda: bugzoo.audit("target-residual", P, Q, 5, 2, 2, 0))
bad("bugzoo.acceptance_check", "rounds", {k: v for k, v in WHOLE.items() if k != "bool"},
    lambda v: bugzoo.acceptance_check("exact", P, Q, 2, v, 0))
one("bugzoo.acceptance_check", "claims", "unknown", lambda: bugzoo.acceptance_check("exact", P, Q, 2, 100, 0,
                                                                                      claims="fast"))
bad("bugzoo.zero_draw", "k", WHOLE, lambda v: bugzoo.zero_draw("exact", v))
one("adaptive.Controller", "prior_weight", "zero", lambda: adaptive.Controller(0.05, prior_weight=0).next_k())
bad("adaptive.Controller", "c", {"a list": [0.1, 0.2]}, lambda v: adaptive.Controller(v))
bad("adaptive.Controller.observe", "drafted", {"negative": (-1, -3)}, lambda v: adaptive.Controller(0.05).observe(*v))
bad("adaptive.Controller.observe", "accepted", {"more than drafted": (2, 5)},
    lambda v: adaptive.Controller(0.05).observe(*v))
bad("adaptive.Heuristic.observe", "accepted", {"more than drafted": (3, 5)}, lambda v: adaptive.Heuristic().observe(*v))
bad("adaptive.AdaptiveK", "schedule", {"a number": 3, "None": None, "the class, not an instance": adaptive.Fixed},
    lambda v: adaptive.AdaptiveK(DraftModel(DRAFT), v))
bad("roofline.Shape", "Shape.layers", {"negative": -32, "fractional": 1.5, "NaN": NAN, "text": "32"},
    lambda v: roofline.Shape(v, 8, 128))
bad("mtp.toy_language", "vocab", {"huge (vocab**3 floats)": 10**4}, lambda v: mtp.toy_language(vocab=v))
bad("mtp.toy_language", "seed", {"negative": -1}, lambda v: mtp.toy_language(seed=v))
bad("mtp.sample_language", "table", {"2-D": np.full((4, 4), 0.25), "all zero": np.zeros((4, 4, 4))},
    lambda v: mtp.sample_language(v, 5, 8))
one("viz_exactness.plot_zoo", "flagged", "shorter than names", lambda: viz_exactness.plot_zoo(["a", "b", "c"], [.1, .2, .3], .01, [True]))
bad("readouts.roofline_readout", "k", {"negative": -1, "fractional": 2.5}, lambda v: readouts.roofline_readout(7e9, "bf16", "H100 SXM", v))
bad("viz_roofline.plot_roofline", "k", {"negative": -3}, lambda v: viz_roofline.plot_roofline("H100 SXM", "bf16", k=v))
bad("viz_roofline.plot_roofline", "prefill", {"zero": 0}, lambda v: viz_roofline.plot_roofline("H100 SXM", "bf16", prefill=v))

bad("bugzoo.convergence", "ns", {"empty": [], "fractional": [50.7], "negative": [-10]},
    lambda v: bugzoo.convergence(P, Q, v, 2, 2))
one("bugzoo.convergence", "samplers", "one name, not a list", lambda: bugzoo.convergence(P, Q, [100], 2, 2, samplers="exact"))
one("drafter_table.run", "prompts", "one without a kind",
    lambda: drafter_table.run(TINY, None, {"pl": PromptLookup}, [{"text": "hi"}]))
one("drafter_table.run", "drafters", "an instance, not a factory",
    lambda: drafter_table.run(TINY, None, {"pl": PromptLookup()}, [{"kind": "copy", "text": "hi"}]))
one("drafter_table.run", "drafters", "one named plain, the baseline's name",
    lambda: drafter_table.run(TINY, None, {"plain": PromptLookup}, [{"kind": "copy", "text": "hi"}]))
one("drafter_table.run", "prompts", "none", lambda: drafter_table.run(TINY, None, {"pl": PromptLookup}, []))
one("drafter_table.by_temperature", "temperatures", "negative",
    lambda: drafter_table.by_temperature(TINY, None, {"pl": PromptLookup}, [{"kind": "copy", "text": "hi"}], [-1.0]))
ACC = metrics.Acceptance(5, 5, 8, 6, 7, None, (5, 2), (5, 1))  # 5 rounds: 8 drafted, 6 kept of 7 judged
one("drafter_table.table", "runs", "a run that took no time", lambda: drafter_table.table([drafter_table.Run(
    "pl", "copy", 0, 10, 0.0, 1.0, 0.0, 5, ACC, True)]))
one("viz_serving.plot_arrivals", "series", "a one-token result", lambda: viz_serving.plot_arrivals({"plain": [0.1]}))
bad("tree.static_tree", "choices", {"a negative rank": [(-1,)], "an empty choice": [()]},
    lambda v: tree.static_tree([[1, 2, 3]], v))
bad("drafters.RandomTree", "vocab", {"negative": -3, "zero": 0}, lambda v: RandomTree(v))
bad("drafters.RandomTree", "widths", {"wider than the vocabulary": (300,)}, lambda v: RandomTree(256, widths=v))
one("engine.generate", "rule", "typical when greedy", lambda: engine.generate(TINY, RandomTree(256), IDS, 4, rule="typical"))
bad("stats.token_marginals", "vocab", {"zero": 0}, lambda v: stats.token_marginals(EXACT, v, 2))
bad("stats.token_marginals", "dist", {"NaN": np.full(16, NAN), "the wrong size": np.full(8, 1 / 8)},
    lambda v: stats.token_marginals(v, 4, 2))
bad("roofline.Machine", "bandwidth", {"text": "1e9", "bool": True, "negative": -1.0},
    lambda v: roofline.Machine("m", v, 1e12, float("nan"), "test"))
bad("roofline.Machine", "memory_bytes", {"negative": -1.0}, lambda v: roofline.Machine("m", 1e9, 1e12, v, "test"))
one("viz_drafters.plot_drafter_bars", "value", "a typo", lambda: viz_drafters.plot_drafter_bars(drafter_table.table([drafter_table.Run(
    "pl", "copy", 0, 10, 1.0, 1.0, 0.0, 5, ACC, True)]), value="speedpu"))
one("viz_serving.plot_temperature_sweep", "value", "a typo",
    lambda: viz_serving.plot_temperature_sweep([{"temperature": 0.0, "drafter": "pl", "kind": "copy", "alpha": 0.5}],
                                             value="alhpa"))

@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_a_bad_value_is_refused_with_an_error_that_names_it(case):
    start = time.perf_counter()
    with pytest.raises((ValueError, TypeError)) as refused:
        case.call()
    assert re.search(re.escape(case.names), str(refused.value)), (
        f"{case.label}: the message does not name {case.names!r}: {refused.value}")
    assert time.perf_counter() - start < 10, f"{case.label}: refused, but only after a long computation"


def test_the_zoo_covers_every_kind_of_bad_value():
    kinds = {c.label.rsplit(" = ", 1)[1] for c in CASES}
    for kind in ("NaN", "inf", "negative", "zero", "fractional", "bool", "huge", "empty", "text", "None",
                 "a list", "a scalar", "two rows", "a batch of two"):
        assert kind in kinds, kind
    assert len(CASES) > 500  # the count the closing note reports is len(CASES)


# --------------------------------------------------------------------------- good values near the edges still work


def test_whole_floats_and_numpy_scalars_are_still_accepted():
    assert theory.expected_tokens(0.5, 3.0) == theory.expected_tokens(np.float64(0.5), np.int64(3))
    assert serving.pass_time(np.int64(4), 1, 8e9, "bf16", "H100 SXM") > 0
    assert roofline.forward_flops(7e9, tokens=2.5) == pytest.approx(2 * 7e9 * 2.5)  # a point on a plot's axis


def test_a_list_of_stop_tokens_stops_plain_decoding_as_it_stops_the_engine():
    free = decode.plain_generate(TINY, IDS, 6, eos_token_id=-1).tokens
    stop = free[1]
    assert decode.plain_generate(TINY, IDS, 6, eos_token_id=[stop]).tokens == free[:free.index(stop) + 1]
    assert engine.generate(TINY, PromptLookup(), IDS, 6, eos_token_id=[stop]).tokens == free[:free.index(stop) + 1]


def test_the_packages_own_dtype_names_are_understood_everywhere():
    assert numerics.as_dtype(TINY, "bf16").dtype == torch.bfloat16  # the roofline's names, not only torch's
    assert roofline.measure_matmul_flops("cpu", n=32, dtype="bf16", repeats=1) > 0


def test_a_huge_max_batch_is_answered_by_bisection_at_once():
    start = time.perf_counter()
    got = serving.crossover_batch(0.7, 4, 0.05, 8e9, "bf16", "H100 SXM", max_batch=10**8)
    assert time.perf_counter() - start < 1
    batches = np.arange(1, 4097)  # the bisection finds the same first losing batch as a full scan
    ratio = serving.speedup(batches, 0.7, 4, 0.05, 8e9, "bf16", "H100 SXM")
    assert got == int(batches[np.flatnonzero(ratio < 1)[0]])


@pytest.mark.parametrize("context", [0, 4096, 32768])
@pytest.mark.parametrize("alpha, k, c", [(0.6, 2, 0.0), (0.7, 4, 0.05), (0.9, 8, 0.2), (0.3, 1, 0.5)])
def test_bisection_agrees_with_a_full_scan_because_the_ratio_only_falls(alpha, k, c, context):
    batches = np.arange(1, 2049)
    ratio = serving.speedup(batches, alpha, k, c, 8e9, "bf16", "H100 SXM", context)
    assert np.all(np.diff(ratio) <= 1e-12)  # the property the bisection relies on
    below = np.flatnonzero(ratio < 1)
    want = int(batches[below[0]]) if below.size else None
    assert serving.crossover_batch(alpha, k, c, 8e9, "bf16", "H100 SXM", context, max_batch=2048) == want


def test_chi2_test_fails_a_sampler_that_emits_an_impossible_sequence():
    exact = np.zeros(16)
    exact[:4] = 0.25  # only sequences that start with token 0
    samples = np.array([[0, 1]] * 99 + [[3, 3]])
    tv, p_value = stats.chi2_test(samples, exact)
    assert p_value == 0.0 and tv > 0


# --------------------------------------------------------------------------- the command line


def cli(*args):
    return subprocess.run([sys.executable, "-m", "specnotes", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, code, names", [
    ((), 2, "command"),
    (("fly",), 2, "fly"),
    (("fetch", "gpt-7"), 1, "gpt-7"),
    (("fetch", "--verify", "--force", "smollm2-135m", "extra"), 2, "extra"),
    (("info", "--verbose"), 2, "--verbose"),
])
def test_the_command_line_refuses_bad_arguments_and_says_which(args, code, names):
    run = cli(*args)
    assert run.returncode == code
    assert names in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("args, names", [
    (("--tokens", "-4"), "--tokens"),
    (("--tokens", "2.5"), "--tokens"),
    (("--device", "tpuu"), "--device"),
    (("--device", "cuda"), "no CUDA GPU") if not torch.cuda.is_available() else (("--bogus",), "--bogus"),
])
def test_gpu_smoke_refuses_bad_arguments_before_it_builds_anything(args, names):
    run = subprocess.run([sys.executable, "tools/gpu_smoke.py", "--tiny", *args], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 2 and names in run.stderr and "Traceback" not in run.stderr, run.stderr
