"""The live suite's records: one Record per mode, prompt kind and sampling from the round-robin samples,
each engine mode's Prediction (from specnotes.theory) beside its measured speedup, and the Ratio of two
modes repeat by repeat, which says when the sizes were too small to resolve it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from specnotes import checks, theory
from specnotes.metrics import Acceptance
from specnotes.timing import Output, Sample, first_difference


@dataclass
class Costs:
    """Measured on this machine at one prompt's context: seconds of the prompt pass and of one decode
    step, and the cost of a pass over w positions in decode steps (verify[w], verify[1] = 1)."""

    prefill_s: float
    step_s: float
    verify: list[float]


def _group(samples, mode, kind, sampling):
    return [s for s in samples if s.mode == mode and s.prompt_kind == kind and s.sampling == sampling]


def _checked(samples, costs) -> list:
    """samples as a list, once they hold what summarize relies on, else an error saying what is off:
    timing.Sample records with a finite positive time and at least one token, the same number of repeats of
    every prompt (numbered 0, 1, ... within its kind), one Costs per prompt, and a 'plain' run of every
    prompt kind and sampling (every speedup is measured against it)."""
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
            raise TypeError(f"costs[{kind!r}] must hold live_summary.Costs (measure_costs makes them), "
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


@dataclass(frozen=True)
class Timed:
    """One group of round-robin samples reduced (a mode on one prompt, or on all of a kind's prompts): the
    one reducer of a timed run, behind summarize's Records and the drafter table's Runs."""

    prompts: list[int]
    first: dict  # prompt -> its first Sample
    tokens: int  # new tokens of each prompt's first run, summed
    seconds: float  # each prompt's median time, summed
    by_repeat: np.ndarray  # repeat r: the r-th run of each prompt, summed
    calls: int  # target calls of each prompt's first run, summed
    draft_seconds: float  # each prompt's median drafting time (engine modes), summed
    acceptance: Acceptance | None  # engine modes: one request per prompt (its first run), pooled


def reduce(samples, key=lambda s: (s.mode, s.prompt_kind, s.sampling)) -> dict:
    """key(sample) -> Timed, one per group of `samples` (timing.Sample) that share a key: by default a
    mode on one prompt kind in one sampling; key=lambda s: (s.mode, s.prompt_kind, s.prompt, s.sampling)
    gives one group per prompt."""
    groups: dict = {}
    for s in samples:
        groups.setdefault(key(s), []).append(s)
    return {k: _timed(group) for k, group in groups.items()}


def _timed(group) -> Timed:
    prompts = sorted({s.prompt for s in group})
    runs = {i: [s for s in group if s.prompt == i] for i in prompts}
    first = {i: runs[i][0] for i in prompts}
    results = [first[i].output.result for i in prompts if first[i].output.result is not None]
    # repeat r of the kind: the r-th sample of each of its prompts (in any order of the samples)
    return Timed(prompts, first, sum(len(first[i].output.tokens) for i in prompts),
                 sum(float(np.median([s.seconds for s in runs[i]])) for i in prompts),
                 np.sum([[s.seconds for s in runs[i]] for i in prompts], axis=0),
                 sum(first[i].target_calls for i in prompts),
                 sum(float(np.median([s.output.draft_seconds for s in runs[i]])) for i in prompts),
                 Acceptance.from_result(results) if results else None)


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
    overhead = 0.0 if calib is None else round_overhead(calib, kind_costs)
    plain = timed["plain", kind, sampling]
    return Prediction(**_prediction(outputs, t.acceptance, kind_costs, overhead,
                                    plain.tokens / plain.seconds),
                      round_overhead_ms=1e3 * overhead)


def round_overhead(calib: Timed, costs: list) -> float:
    """Seconds per round the engine spends beyond the target's passes, from engine-no-draft's timing (one
    round per token): its time less the measured prompt passes and decode steps, per round. Not clamped:
    a negative estimate means the cost model (prefill_s, step_s) over-predicts what those passes cost
    inside the engine, and a report should show it, not hide it as 0."""
    step = float(np.mean([c.step_s for c in costs]))
    prefill = sum(c.prefill_s for c in costs)
    steps = calib.tokens - len(calib.prompts)  # the first round is the prompt pass; each later one a step
    return (calib.seconds - prefill - steps * step) / calib.tokens


def summarize(samples, costs: dict, k: int = 3) -> list[Record]:
    """One Record per (mode, prompt kind, sampling): medians over repeats, summed over the kind's prompts.
    costs: prompt kind -> list of Costs, one per prompt."""
    samples = _checked(samples, costs)
    keys = list(dict.fromkeys((s.mode, s.prompt_kind, s.sampling) for s in samples))
    timed = reduce(samples)
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


def _prediction(outputs, acc: Acceptance, costs, overhead: float, plain_tokens_per_s: float) -> dict:
    """What the engine's traces and the measured costs say about a mode, and its speedup predicted by
    theory.predicted_speedup: α by position for each draft length, each round's length, the verify cost
    at its width, its drafting and the engine's per-round overhead, the prompt pass (the first round's
    verify pass), all in decode steps, against plain decoding's measured time for the same tokens.
    Notebook 05's formula, theory.speedup at the pooled α and c (from `acc`, the runs' record), rides
    along."""
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
        # the record keeps a negative overhead as measured; a round's cost cannot go below 0
        draft_cost=max(draft_s / max(len(lengths), 1) + overhead, 0.0) / step,
        prefill=sum(c.prefill_s for c in costs) / step, n_tokens=tokens, prompts=len(outputs),
        plain=tokens / plain_tokens_per_s / step)
    alpha = acc.alpha if acc.judged else 0.0
    mean_draft = acc.mean_draft if acc.drafting_rounds else 0.0
    c_tok = draft_s / max(acc.drafted, 1) / step
    formula = float(theory.speedup(alpha, max(1, round(mean_draft)), c_tok)) if acc.drafting_rounds else 1.0
    return {"predicted_speedup": predicted, "predicted_tokens_per_s": predicted * plain_tokens_per_s,
            "formula_speedup": formula, "alpha": alpha,
            "alpha_by_position": acc.per_position_acceptance.round(3).tolist()[:8],
            "mean_draft": mean_draft, "c_per_token": c_tok,
            "verify_cost_at_mean": float(np.interp(mean_draft + 1, np.arange(len(verify)), verify))}


def markdown_table(columns, rows) -> str:
    """The one markdown renderer of the timed tables (live.markdown, drafter_table.markdown): columns is
    a list of (title, align), align "l" or "r"; rows lists each row's cells, already formatted."""
    head = "| " + " | ".join(title for title, _ in columns) + " |"
    rule = "|" + "|".join("---:" if align == "r" else ":---:" if align == "c" else "---"
                          for _, align in columns) + "|"
    return "\n".join([head, rule, *("| " + " | ".join(cells) + " |" for cells in rows)]) + "\n"


NEGATIVE_OVERHEAD = ("A negative overhead per round means the cost model over-predicts: the prompt pass and "
                     "decode steps, timed alone, cost more than the whole engine-no-draft run spent on them.")
