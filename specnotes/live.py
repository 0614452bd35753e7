"""Live assisted-generation timings (notebook 07, `make bench`): transformers' assisted generation and
the engine side by side, every mode timed round-robin by specnotes.timing, and each engine mode's speedup
predicted from its measured acceptance and costs before it is compared with the measured one.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from specnotes import checks
from specnotes.paths import data_dir, write_atomic

REFERENCES = data_dir() / "reference_runs"

_PASSAGE = ("The lighthouse keeper climbed the spiral stairs every evening at dusk. He trimmed the wick, "
            "polished the great lens, and wound the clockwork that turned the light. Ships far out at sea "
            "counted the flashes, five seconds apart, and knew exactly where the rocks lay.")
_CODE = '''def mean(values):
    total = 0
    for v in values:
        total += v
    return total / len(values)


def spread(values):
    low = min(values)
    high = max(values)
    return high - low
'''
PROMPTS = {
    "copy": [
        f"Rename the variable `values` to `xs` everywhere in this code and return the full code:\n\n{_CODE}",
        f"Quote the second and third sentences of this paragraph exactly:\n\n{_PASSAGE}",
        "Fix the typos and return the corrected text: The lighthuose keeper climbed the spiral stiars "
        "every evening at dusk. He trimmed the wick, polsihed the great lens, and wound the clockwork "
        "that turned the light.",
    ],
    "free": [
        "Write a short story about a robot who learns to paint.",
        "Write a short story about two friends who get lost in a forest.",
    ],
}
HUB_PAIR = ("HuggingFaceTB/SmolLM2-360M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct")


@dataclass(frozen=True)
class Plan:
    device: str
    dtype: str
    target: str  # a model name for specnotes.models.load
    draft: str  # a model name, or "distilled" for the draft LM trained in notebook 06
    note: str


def plan(device: str | None = None, online: bool | None = None) -> Plan:
    """What to time here, in the dtype the device runs natively (env.default_dtype: fp16 on a T4, bf16 on
    Ampere and newer, fp32 on the CPU). On CUDA with the hub reachable (Colab): the seed article's pair,
    SmolLM2-360M verified by SmolLM2-135M. Otherwise: the offline 135M model and its distilled draft."""
    import torch

    from specnotes import models
    from specnotes.env import default_device, default_dtype, dtype_name

    if device is not None:
        if not isinstance(device, (str, torch.device)):
            raise TypeError(f"device must be a device name such as 'cuda' or 'cpu', got {device!r}")
        try:
            torch.device(device)
        except RuntimeError:
            raise ValueError(f"device {device!r} is not a torch device: use 'cuda', 'cuda:1' or "
                             "'cpu'") from None
    if online is not None and not isinstance(online, bool):
        raise TypeError(f"online must be True, False or None (None asks the hub), got {online!r}")
    device = str(device or default_device())
    dtype = dtype_name(default_dtype(device))
    if torch.device(device).type == "cuda":
        if online is None:
            online = models._hub_reachable()
        if online:
            return Plan(device, dtype, HUB_PAIR[0], HUB_PAIR[1],
                        "GPU and hub: the seed article's pair, 360M target with the 135M draft")
    return Plan(device, dtype, models.DEFAULT, "distilled",
                "offline: SmolLM2-135M-Instruct with the 2-layer draft distilled in notebook 06")


def load(p: Plan):
    """(target, tokenizer, draft model) for a plan, both on its device in its dtype."""
    import torch

    from specnotes import models
    from specnotes.drafters import load_distilled_draft

    dtype = getattr(torch, p.dtype)
    target, tokenizer = models.load(p.target, device=p.device, dtype=dtype)
    if p.draft == "distilled":
        draft = load_distilled_draft(target)
    else:
        draft, _ = models.load(p.draft, device=p.device, dtype=dtype)
    return target, tokenizer, draft


def modes(target, draft, k: int = 3, max_new_tokens: int = 64, extra: bool = True,
          draft_model: bool = True) -> dict:
    """name -> fn(input_ids, do_sample, seed) -> timing.Output, for timing.round_robin. extra: the
    engine's suffix and early-exit modes; draft_model: the two modes that run `draft` (hf-assistant,
    engine-draft-model), the slowest on a CPU.

    Sampling is at temperature 1.0 with top-k and top-p off in every mode, so all sample the same
    distribution. Engine drafters are built fresh for each call (no memory carried between runs). Each
    engine mode runs next to its transformers counterpart, so their ratio is of two adjacent runs."""
    import torch

    from specnotes.drafter_table import engine_mode
    from specnotes.drafters import Drafter, DraftModel, EarlyExit, PromptLookup, Suffix
    from specnotes.env import to_model
    from specnotes.models import _quiet_transformers
    from specnotes.timing import Output

    # checked now, not at the first timed call, when transformers' generate would already have run
    k = checks.whole(k, "k", scalar=True)
    max_new_tokens = checks.whole(max_new_tokens, "max_new_tokens", scalar=True)

    def hf(**extra_kwargs):
        def run(ids, do_sample, seed):
            ids = to_model(target, ids)
            torch.manual_seed(seed)
            kwargs = dict(attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                          do_sample=do_sample, pad_token_id=target.generation_config.eos_token_id)
            if do_sample:
                kwargs.update(temperature=1.0, top_k=0, top_p=1.0)
            # assisted generation warns about its own internal generation config on every first call
            with _quiet_transformers():
                out = target.generate(ids, **kwargs, **extra_kwargs)
            return Output(out[0, ids.shape[1]:].tolist())
        return run

    def own(make):
        return engine_mode(target, make, max_new_tokens, k)

    out = {
        "plain": hf(),
        "engine-no-draft": own(Drafter),  # the base drafter drafts nothing: the engine's own overhead
        "hf-prompt-lookup": hf(prompt_lookup_num_tokens=10),
        "engine-prompt-lookup": own(PromptLookup),
    }
    if draft_model:
        out["hf-assistant"] = hf(assistant_model=draft)
        out["engine-draft-model"] = own(lambda: DraftModel(draft))
    if extra:
        out["engine-suffix"] = own(Suffix)
        from specnotes.drafters.early_exit import committed_path
        if committed_path(4).exists() and target.config.num_hidden_layers == 30:  # trained for the 135M
            out["engine-early-exit"] = own(lambda: EarlyExit(target, adapter="trained"))
    return out


@dataclass
class Costs:
    """Measured on this machine at one prompt's context: seconds of the prompt pass and of one decode
    step, and the cost of a pass over w positions in decode steps (verify[w], verify[1] = 1)."""

    prefill_s: float
    step_s: float
    verify: list[float]


def measure_costs(target, ids, max_width: int, context_extra: int = 32, repeats: int = 5) -> Costs:
    """Prefill time, decode step time and the verify-width cost curve at this prompt's context, for
    widths 1, 2, 3, 4, 6, 8, 12, 16, 24, 33 (up to max_width; interpolated between them). timing.pass_times
    times the prompt pass and the widths interleaved, after a warm-up round, `repeats` rounds of all of
    them, and each takes its median, so a slow moment of the machine cannot bend the curve."""
    import torch

    from specnotes.env import device_of
    from specnotes.timing import Pass, cache_of, fits, pass_times, prompt_tensor, random_ids

    max_width = checks.whole(max_width, "max_width", scalar=True)
    context_extra = checks.whole(context_extra, "context_extra", low=0, scalar=True)
    repeats = checks.whole(repeats, "repeats", scalar=True)
    prompt_tensor(ids, "ids", target)
    fits(target, ids.shape[1] + context_extra + max_width, "the prompt + context_extra + max_width")
    ids = ids.to(device_of(target))
    grid = sorted({w for w in (1, 2, 3, 4, 6, 8, 12, 16, 24, 33) if w <= max_width} | {max_width})
    extra = random_ids(target, (1, context_extra + max(grid)), torch.Generator().manual_seed(0))
    cache = cache_of(target, torch.cat([ids, extra[:, :context_extra]], dim=1))
    passes = {"prefill": Pass(ids, keep=1),
              **{w: Pass(extra[:, context_extra:context_extra + w], cache) for w in grid}}
    times = pass_times(target, passes, repeats, warmup=1)
    med = [times[w].median for w in grid]
    curve = np.interp(np.arange(max_width + 1), grid, med) / med[0]
    curve[0] = 0.0
    return Costs(times["prefill"].median, med[0], curve.tolist())


def _group(samples, mode, kind, sampling):
    return [s for s in samples if s.mode == mode and s.prompt_kind == kind and s.sampling == sampling]


def _checked(samples, costs) -> list:
    """samples as a list, once they hold what summarize relies on, else an error saying what is off:
    timing.Samples with a finite positive time and at least one token, the same number of repeats of
    every prompt (numbered 0, 1, ... within its kind), one Costs per prompt, and a 'plain' run of every
    prompt kind and sampling (every speedup is measured against it)."""
    from collections import Counter

    from specnotes.timing import Output, Sample

    samples = list(samples)
    if not samples:
        raise ValueError("samples is empty: pass what timing.round_robin returned")
    for i, s in enumerate(samples):
        if not isinstance(s, Sample):
            raise TypeError(f"samples[{i}] is a {type(s).__name__}, not a timing.Sample")
        checks.positive(s.seconds, f"samples[{i}].seconds", scalar=True)
        if not isinstance(s.output, Output) or not s.output.tokens:
            raise ValueError(f"samples[{i}] ({s.mode}, {s.prompt_kind} prompt {s.prompt}) has no tokens: "
                             "every mode must generate at least one")
    if not isinstance(costs, dict):
        raise TypeError(f"costs must be a dict: prompt kind -> list of Costs, got a {type(costs).__name__}")
    for mode, kind, sampling in dict.fromkeys((s.mode, s.prompt_kind, s.sampling) for s in samples):
        runs = Counter(s.prompt for s in _group(samples, mode, kind, sampling))
        where = f"the {mode} samples of the {kind} prompts ({sampling})"
        if sorted(runs) != list(range(len(runs))):
            raise ValueError(f"{where} are of prompts {sorted(runs)}; a kind's prompts are numbered 0, 1, "
                             "...")
        if len(set(runs.values())) > 1:
            raise ValueError(f"{where} have {dict(runs)} repeats per prompt; every prompt needs the same "
                             "number (as timing.round_robin times them)")
        have = costs.get(kind)
        if not isinstance(have, (list, tuple)) or len(have) < len(runs):
            raise ValueError(f"costs[{kind!r}] must hold one Costs per prompt ({len(runs)}), got {have!r}")
        if not all(isinstance(c, Costs) for c in have):
            raise TypeError(f"costs[{kind!r}] must hold live.Costs (measure_costs makes them), "
                            f"got {have!r}")
        plain = sorted({s.prompt for s in _group(samples, "plain", kind, sampling)})
        if plain != sorted(runs):
            raise ValueError(f"{where}: the 'plain' samples cover prompts {plain}, not {sorted(runs)}; "
                             "summarize measures every mode against plain decoding of the same prompts")
    return samples


@dataclass
class Prediction:
    """An engine mode's speedup predicted from its own trace and the measured costs (see _prediction),
    with notebook 05's formula at the pooled α and c beside it, and the engine's overhead per round."""

    predicted_speedup: float
    predicted_tokens_per_s: float
    formula_speedup: float
    alpha: float  # accepted / judged drafts, pooled
    alpha_by_position: list[float]
    mean_draft: float  # tokens per round that drafted
    c_per_token: float  # drafting time per drafted token, in decode steps
    verify_cost_at_mean: float  # a pass of mean_draft + 1 positions, in decode steps
    round_overhead_ms: float


@dataclass
class Record:
    """One (mode, prompt kind, sampling) of the round-robin: medians over repeats, summed over the kind's
    prompts, measured against plain decoding of the same prompts in the same round-robin."""

    mode: str
    prompt_kind: str
    sampling: str  # "greedy" or "sample"
    prompts: int
    new_tokens: int
    seconds: float  # the sum over the prompts of each one's median time
    seconds_by_repeat: list[float]  # repeat r: the sum over the prompts of their r-th run
    tokens_per_s: float
    tokens_per_s_spread: tuple[float, float]  # (slowest, fastest) repeat
    decode_tokens_per_s: float  # leaving out the prompt passes
    target_calls: int
    tokens_per_call: float
    speedup: float  # tokens/s over plain's
    identical_to_plain: bool | None  # greedy: the same tokens as plain greedy; None when sampling
    first_difference: int | None  # greedy: the first position where they differ, if they do
    prediction: Prediction | None  # engine modes that draft; None for the others


RESOLVED = 0.10  # a ratio is resolved when its repeats agree within 10% and sit on one side of 1


@dataclass(frozen=True)
class Ratio:
    """a's tokens/s over b's, from the same round-robin, repeat by repeat (repeat r of both was timed at
    the same moment, so a slow minute of the machine cancels): the median and the range of the
    per-repeat ratios."""

    median: float
    low: float
    high: float
    repeats: int

    @property
    def resolved(self) -> bool:
        """True when this size supports the ratio: two or more repeats, all on the same side of 1, and
        spread by at most RESOLVED of the median. A run that is not resolved says nothing about
        which one is faster."""
        return (self.repeats >= 2 and (self.low > 1 or self.high < 1)
                and self.high - self.low <= RESOLVED * self.median)

    def __str__(self) -> str:
        """The ratio and its range; a ratio that is not resolved is not printed, only its range."""
        spread = f"repeats {self.low:.2f}–{self.high:.2f}×"
        if self.resolved:
            return f"{self.median:.2f}× ({spread})"
        why = "one repeat" if self.repeats < 2 else spread
        return f"not resolved at this size ({why})"


def ratio(a: Record, b: Record) -> Ratio:
    """a's throughput over b's (records of the same prompt kind and sampling from one summarize)."""
    if (a.prompt_kind, a.sampling) != (b.prompt_kind, b.sampling):
        raise ValueError(f"ratio compares records of the same prompts: {a.mode} is {a.prompt_kind}, "
                         f"{a.sampling} and {b.mode} is {b.prompt_kind}, {b.sampling}")
    each = [(a.new_tokens / sa) / (b.new_tokens / sb)
            for sa, sb in zip(a.seconds_by_repeat, b.seconds_by_repeat, strict=True)]
    return Ratio(float(np.median(each)), min(each), max(each), len(each))


class _Timed(NamedTuple):
    """One (mode, kind, sampling)'s samples reduced: prompts, tokens, medians summed, per repeat."""

    prompts: list[int]
    first: dict  # prompt -> its first Sample
    tokens: int
    seconds: float
    by_repeat: np.ndarray
    calls: int


def _timed(group) -> _Timed:
    prompts = sorted({s.prompt for s in group})
    runs = {i: [s.seconds for s in group if s.prompt == i] for i in prompts}
    first = {i: next(s for s in group if s.prompt == i) for i in prompts}
    # repeat r of the kind: the r-th sample of each of its prompts (in any order of the samples)
    return _Timed(prompts, first, sum(len(first[i].output.tokens) for i in prompts),
                  sum(float(np.median(runs[i])) for i in prompts), np.sum([runs[i] for i in prompts], axis=0),
                  sum(first[i].target_calls for i in prompts))


def _predicted(key, timed: dict, costs: dict) -> Prediction | None:
    """An engine mode's Prediction, with the engine's own overhead per round measured by engine-no-draft
    (one round per token: what a round costs beyond the forward pass). None for modes that do not draft
    through the engine."""
    mode, kind, sampling = key
    t = timed[key]
    outputs = [t.first[i].output for i in t.prompts if t.first[i].output.result is not None]
    if not outputs or mode == "engine-no-draft":
        return None
    kind_costs = [costs[kind][i] for i in t.prompts]
    calib = timed.get(("engine-no-draft", kind, sampling))
    overhead = 0.0
    if calib is not None:  # the first round is the prompt pass; each later one a decode step
        step = float(np.mean([c.step_s for c in kind_costs]))
        prefill = sum(c.prefill_s for c in kind_costs)
        steps = calib.tokens - len(calib.prompts)
        overhead = max((calib.seconds - prefill - steps * step) / calib.tokens, 0.0)
    plain = timed["plain", kind, sampling]
    return Prediction(**_prediction(outputs, kind_costs, overhead, plain.tokens / plain.seconds),
                      round_overhead_ms=1e3 * overhead)


def summarize(samples, costs: dict, k: int = 3) -> list[Record]:
    """One Record per (mode, prompt kind, sampling): medians over repeats, summed over the kind's prompts.
    costs: prompt kind -> list of Costs, one per prompt."""
    from specnotes.timing import first_difference

    samples = _checked(samples, costs)
    keys = list(dict.fromkeys((s.mode, s.prompt_kind, s.sampling) for s in samples))
    timed = {key: _timed(_group(samples, *key)) for key in keys}
    records = []
    for mode, kind, sampling in keys:
        t, plain = timed[mode, kind, sampling], timed["plain", kind, sampling]
        prefill = sum(costs[kind][i].prefill_s for i in t.prompts)
        diffs = [first_difference(t.first[i].output.tokens, plain.first[i].output.tokens) for i in t.prompts]
        greedy = sampling == "greedy"
        records.append(Record(
            mode, kind, sampling, len(t.prompts), t.tokens, t.seconds, t.by_repeat.tolist(),
            tokens_per_s=t.tokens / t.seconds,
            tokens_per_s_spread=(float(t.tokens / t.by_repeat.max()), float(t.tokens / t.by_repeat.min())),
            decode_tokens_per_s=(t.tokens - len(t.prompts)) / max(t.seconds - prefill, 1e-9),
            target_calls=t.calls, tokens_per_call=t.tokens / max(t.calls, 1),
            speedup=(t.tokens / t.seconds) / (plain.tokens / plain.seconds),
            identical_to_plain=all(d is None for d in diffs) if greedy else None,
            first_difference=next((d for d in diffs if d is not None), None) if greedy else None,
            prediction=_predicted((mode, kind, sampling), timed, costs)))
    return records


def _prediction(outputs, costs, overhead: float, plain_tokens_per_s: float) -> dict:
    """What the engine's traces and the measured costs say about a mode, and its speedup predicted by
    theory.predicted_speedup: α by position for each draft length, each round's length, the verify cost
    at its width, its drafting and the engine's per-round overhead, the prompt pass (the first round's
    verify pass), all in decode steps, against plain decoding's measured time for the same tokens.
    Notebook 05's formula, theory.speedup at the pooled α and c, rides along."""
    from specnotes import theory

    rounds = [r for o in outputs for r in o.result.trace]
    lengths = np.array([len(r.drafted) for r in rounds], dtype=int)
    judged = np.array([r.judged for r in rounds], dtype=int)
    accepted = np.array([r.accepted for r in rounds], dtype=int)
    step = float(np.mean([c.step_s for c in costs]))
    verify = np.mean([np.asarray(c.verify)[: lengths.max(initial=0) + 2] for c in costs], axis=0)
    tokens = sum(len(o.tokens) for o in outputs)
    draft_s = sum(o.draft_seconds for o in outputs)
    predicted = theory.predicted_speedup(
        theory.position_alphas(lengths, judged, accepted, by_length=True), lengths, verify,
        draft_cost=(draft_s / max(len(lengths), 1) + overhead) / step,
        prefill=sum(c.prefill_s for c in costs) / step, n_tokens=tokens, prompts=len(outputs),
        plain=tokens / plain_tokens_per_s / step)
    alpha = float(accepted.sum() / judged.sum()) if judged.sum() else 0.0
    drafted = lengths[lengths > 0]
    mean_draft = float(drafted.mean()) if drafted.size else 0.0
    c_tok = draft_s / max(int(lengths.sum()), 1) / step
    formula = float(theory.speedup(alpha, max(1, round(mean_draft)), c_tok)) if drafted.size else 1.0
    return {"predicted_speedup": predicted, "predicted_tokens_per_s": predicted * plain_tokens_per_s,
            "formula_speedup": formula, "alpha": alpha,
            "alpha_by_position": theory.position_alphas(lengths, judged, accepted).round(3).tolist()[:8],
            "mean_draft": mean_draft, "c_per_token": c_tok,
            "verify_cost_at_mean": float(np.interp(mean_draft + 1, np.arange(len(verify)), verify))}


def run(p: Plan | None = None, max_new_tokens: int = 64, repeats: int = 3, k: int = 3,
        samplings=("greedy", "sample"), prompts_per_kind: int | None = None, extra_modes: bool = True,
        warmup: int = 1, cost_repeats: int = 5, progress: bool = True, loaded=None,
        draft_modes: bool = True) -> Report:
    """The whole suite: load, time every mode round-robin, measure costs, predict, summarize.
    loaded: (target, tokenizer, draft) already in memory, instead of loading the plan's models.
    extra_modes, draft_modes: modes(extra=..., draft_model=...)."""
    from specnotes import timing
    from specnotes.decode import prompt_ids
    from specnotes.env import device_of, environment, model_facts

    # every setting is checked before the models load and the minutes of timing start
    if p is not None and not isinstance(p, Plan):
        raise TypeError(f"p must be a live.Plan (live.plan() makes one), got {p!r}")
    max_new_tokens = checks.whole(max_new_tokens, "max_new_tokens", scalar=True)
    repeats, k = checks.whole(repeats, "repeats", scalar=True), checks.whole(k, "k", scalar=True)
    warmup = checks.whole(warmup, "warmup", low=0, scalar=True)
    cost_repeats = checks.whole(cost_repeats, "cost_repeats", scalar=True)
    if prompts_per_kind is not None:
        prompts_per_kind = checks.whole(prompts_per_kind, "prompts_per_kind", scalar=True)
    samplings = timing.check_samplings(samplings)
    p = p or plan()
    target, tokenizer, draft = load(p) if loaded is None else loaded
    texts = {kind: lst[:prompts_per_kind] for kind, lst in PROMPTS.items()}
    ids = {kind: [prompt_ids(tokenizer, t, device=device_of(target)) for t in lst]
           for kind, lst in texts.items()}
    all_modes = modes(target, draft, k, max_new_tokens, extra=extra_modes, draft_model=draft_modes)
    samples = timing.round_robin(target, all_modes, ids, samplings, repeats, warmup=warmup,
                                progress=progress)
    widest = max(1 + max((int(s.output.result.drafted_counts.max(initial=0)) for s in samples
                          if s.output.result is not None), default=0), 2)
    costs = {kind: [measure_costs(target, x, widest, repeats=cost_repeats) for x in lst]
             for kind, lst in ids.items()}
    machine = {**environment().as_dict(), **model_facts(target)}  # what ran, not the default device
    settings = {"max_new_tokens": max_new_tokens, "repeats": repeats, "warmup": warmup, "k": k,
                "prompts": texts, "samplings": list(samplings), "modes": list(all_modes)}
    return Report(machine, fingerprint(machine), p, settings, costs, summarize(samples, costs, k))


@dataclass
class Report:
    """What run() measured. as_dict() is its JSON form: bench/report.json and the reference runs."""

    machine: dict
    fingerprint: str
    plan: Plan
    settings: dict
    costs: dict  # prompt kind -> list of Costs, one per prompt
    runs: list[Record]

    def find(self, mode: str, prompt_kind: str, sampling: str) -> Record | None:
        """The record of one mode on one prompt kind and sampling, or None when it was not timed."""
        return next((r for r in self.runs if (r.mode, r.prompt_kind, r.sampling) == (mode, prompt_kind,
                                                                                        sampling)), None)

    def as_dict(self) -> dict:
        return asdict(self)


def _slug(value) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(value).lower()).strip("-") or "unknown"


def fingerprint(machine: dict) -> str:
    """A file-name-safe machine id: device, device name, threads, dtype. Every part is reduced to
    lower-case letters, digits and dashes, since the id names a file in data/reference_runs/."""
    if not isinstance(machine, dict):
        raise TypeError(f"machine must be a report's 'machine' dict, got {type(machine).__name__}")
    missing = [key for key in ("device", "threads", "dtype") if key not in machine]
    if missing:
        raise ValueError(f"machine has no {', '.join(missing)}: build it as run() does, from "
                         "env.environment().as_dict() and env.model_facts(model)")
    threads = checks.whole(machine["threads"], "machine['threads']", scalar=True)
    return (f"{_slug(machine['device'])}-{_slug(machine.get('device_name', ''))}-{threads}t-"
            f"{_slug(machine['dtype'])}")


def markdown(report: Report) -> str:
    m, settings = report.machine, report.settings
    head = (f"{m['device']} ({m['device_name']}), {m['dtype']}, {m['threads']} threads, torch {m['torch']}, "
            f"transformers {m['transformers']}; target {report.plan.target}, draft {report.plan.draft}; up "
            f"to {settings['max_new_tokens']} new tokens, {settings['repeats']} round-robin repeats "
            "(medians).\n\n")
    lines = ["| prompt | sampling | mode | tokens/s | ×plain | predicted | tokens/call | α | same as plain |",
             "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for r in report.runs:
        pred, alpha = ("", "") if r.prediction is None else (f"{r.prediction.predicted_speedup:.2f}×",
                                                             f"{r.prediction.alpha:.2f}")
        same = "" if r.identical_to_plain is None else (
            "yes" if r.identical_to_plain else f"no (from token {r.first_difference})")
        lines.append(f"| {r.prompt_kind} | {r.sampling} | {r.mode} | {r.tokens_per_s:.1f} | "
                     f"{r.speedup:.2f}× | {pred} | {r.tokens_per_call:.2f} | {alpha} | {same} |")
    return head + "\n".join(lines) + "\n"


def plan_fingerprint(p: Plan) -> str:
    """The fingerprint run(p) will give its report on this machine, known before anything loads, so that
    `bench_live.py --save-reference` can refuse to replace a committed reference before its minutes of
    timing rather than after them."""
    import torch

    from specnotes.env import device_name, environment

    return fingerprint({**environment().as_dict(), "device": torch.device(p.device).type,
                        "device_name": device_name(p.device), "dtype": p.dtype})


def reference_path(fp: str, folder: Path | None = None, force: bool = False) -> Path:
    """Where the reference of the machine `fp` goes. A FileExistsError when one is there already and
    `force` is off: a reference is a committed record of a machine, and two machines whose fingerprints
    collide (the same CPU model, say) must not replace each other's runs by accident."""
    if not isinstance(fp, str) or not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", fp):
        raise ValueError(f"fingerprint {fp!r} is not a file-name-safe machine id (letters, digits and "
                         "dashes, as live.fingerprint makes them)")
    path = Path(REFERENCES if folder is None else folder) / f"{fp}.json"
    if path.exists() and not force:
        raise FileExistsError(f"{path} already exists: it is the reference of a machine with the fingerprint "
                              f"{fp}. Pass --force (save_reference(..., force=True)) to replace it, or keep "
                              "it and compare against it in notebook 07.")
    return path


def _as_json(report) -> dict:
    """A Report's JSON form; a dict is taken to be one already (a reference read back from its file)."""
    return report.as_dict() if isinstance(report, Report) else report


def save_reference(report: Report | dict, folder: Path | None = None, force: bool = False) -> Path:
    """Write `report` (a Report, or its JSON form) as the reference of its machine
    (data/reference_runs/<fingerprint>.json), atomically: notebook 07 reads these files, and a run
    killed half-way must leave the old one whole."""
    report = _as_json(report)
    problem = _unreadable(report)
    if problem is not None:
        raise ValueError(f"this report cannot be a reference: {problem} (live.run makes a whole one)")
    path = reference_path(report["fingerprint"], folder, force)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, json.dumps(report, indent=1) + "\n")


_RUN_KEYS = ("mode", "prompt_kind", "sampling", "speedup", "tokens_per_s")


def _unreadable(report) -> str | None:
    """Why side_by_side cannot show `report` (the parsed JSON of a reference), or None when it can."""
    if not isinstance(report, dict):
        return f"it holds a {type(report).__name__}, not a report (a JSON object)"
    missing = [key for key in ("fingerprint", "machine", "runs") if key not in report]
    if missing:
        return f"it has no {', '.join(repr(k) for k in missing)}"
    if not isinstance(report["fingerprint"], str) or not isinstance(report["machine"], dict):
        return "its 'fingerprint' is not a string or its 'machine' is not an object"
    if not isinstance(report["runs"], list) or not all(isinstance(r, dict) for r in report["runs"]):
        return "its 'runs' is not a list of records"
    for i, run in enumerate(report["runs"]):
        lacking = [key for key in _RUN_KEYS if key not in run]
        if lacking:
            return f"runs[{i}] has no {', '.join(repr(k) for k in lacking)}"
        for key in ("speedup", "tokens_per_s"):
            value = run[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                return f"runs[{i}]['{key}'] is {value!r}, not a positive number"
    return None


def references(folder: Path | None = None) -> list[dict]:
    """Every committed reference report (one per machine). A file that cannot be read as one (cut short
    by a killed write, hand-edited, another tool's report) is skipped with a warning naming it, so one bad
    file does not take the comparison of notebook 07 down with it."""
    refs = []
    for path in sorted(Path(REFERENCES if folder is None else folder).glob("*.json")):
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            problem = f"it is not readable JSON ({exc})"
        else:
            problem = _unreadable(report)
        if problem is not None:
            warnings.warn(f"skipped the reference {path}: {problem}. Re-record it with `python "
                          "tools/bench_live.py --save-reference --force`, or delete it.", stacklevel=2)
            continue
        refs.append(report)
    return refs


def side_by_side(report: Report | dict, refs: list[dict], sampling: str = "greedy") -> str:
    """Markdown: speedup over plain per mode and prompt kind, this machine (a Report, or its JSON form)
    next to each reference (as references() reads them)."""
    from specnotes.timing import check_samplings

    report = _as_json(report)
    if not isinstance(refs, (list, tuple)):
        raise TypeError(f"refs must be a list of reports (live.references()), got a {type(refs).__name__}")
    check_samplings((sampling,))
    for name, rep in [("report", report), *((f"refs[{i}]", r) for i, r in enumerate(refs))]:
        problem = _unreadable(rep)
        if problem is not None:
            raise ValueError(f"{name} cannot be shown: {problem}")
    cols = [("this machine", report)] + [(f"reference {r['fingerprint']}", r) for r in refs]
    keys = [(r["mode"], r["prompt_kind"]) for r in report["runs"] if r["sampling"] == sampling]

    def cell(rep, mode, kind):
        r = next((x for x in rep["runs"] if x["mode"] == mode and x["prompt_kind"] == kind
                  and x["sampling"] == sampling), None)
        return "—" if r is None else f"{r['speedup']:.2f}× ({r['tokens_per_s']:.0f} tok/s)"

    lines = ["| mode | prompt | " + " | ".join(name for name, _ in cols) + " |",
             "|---|---|" + "---:|" * len(cols)]
    for mode, kind in keys:
        lines.append(f"| {mode} | {kind} | " + " | ".join(cell(rep, mode, kind) for _, rep in cols) + " |")
    return "\n".join(lines) + "\n"
