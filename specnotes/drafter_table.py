"""Every drafter on the same target and the same held-out prompts: acceptance, tokens per target pass,
draft cost and wall-clock speedup, measured side by side. Notebook 06's table and `make bench` use it.

Timing is honest by construction: timing.round_robin runs plain decoding and every drafter back to back
for each prompt, so a noisy neighbour slows them alike and a speedup is a ratio from the same moment,
after a warm-up run of each, so no first-call cost lands in the table.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from specnotes import checks, engine, live_summary, theory, timing
from specnotes.decode import plain_generate, prompt_ids
from specnotes.drafters.base import Drafter, Wrapper
from specnotes.drafters.registry import Entry, Parts
from specnotes.env import progress_bar
from specnotes.metrics import Acceptance, first_and_rest
from specnotes.placement import device_of
from specnotes.prompts import FREE_FORM, KINDS


class TimedDrafter(Wrapper):
    """Wraps a drafter and adds up the wall time spent proposing and updating (the draft cost)."""

    def __init__(self, drafter):
        super().__init__(drafter)
        self.seconds = 0.0
        self.proposals = 0

    def propose(self, tokens, k, sampler):
        start = time.perf_counter()
        draft = self.inner.propose(tokens, k, sampler)
        self.seconds += time.perf_counter() - start
        self.proposals += 1
        return draft

    def update(self, feedback):
        start = time.perf_counter()
        self.inner.update(feedback)
        self.seconds += time.perf_counter() - start


@dataclass
class Run:
    drafter: str
    kind: str
    prompt: int  # index into the prompt list
    new_tokens: int
    seconds: float
    plain_seconds: float
    draft_seconds: float
    target_calls: int
    acceptance: Acceptance  # the run's acceptance record (metrics.Acceptance.from_result)
    identical: bool | None = None  # greedy only: same tokens as plain greedy


@dataclass
class Row:
    drafter: str
    kind: str
    alpha: float  # accepted drafts / judged drafts
    per_position: list[float]
    tokens_per_call: float  # new tokens per verification pass
    draft_ms_per_call: float  # time drafting, per round
    c: float  # draft time per round / plain time per token: one round's drafting, in target steps
    c_per_token: float  # draft time per drafted token / plain time per token (notebook 05's c)
    speedup: float  # plain time / speculative time, same prompts, same moment
    identical: bool | None
    reached: list[int] = field(default_factory=list)  # rounds behind per_position[i]: their scan reached i
    rounds: int = 0  # verification passes (one per round)
    drafted: int = 0  # draft tokens proposed over those rounds (a drafter may propose none in a round)
    kept: list[int] = field(default_factory=list)  # of the rounds in reached[i], those that kept position i

    @property
    def mean_draft(self) -> float:
        """Draft tokens proposed per round (per verification pass)."""
        return self.drafted / max(self.rounds, 1)

    @property
    def first_and_rest(self) -> tuple[float, float]:
        """(α at draft position 1, α pooled over the later positions): metrics.first_and_rest."""
        return first_and_rest(self.reached, self.kept)


PLAIN = "plain"  # the table's baseline mode: plain decoding, which every drafter is measured against


def engine_mode(target, make: Callable[[], Drafter], max_new_tokens: int, k: int | None, **generate):
    """A timing.round_robin mode: a fresh `make()` through engine.generate at engine k `k` (None: the
    drafter's own length policy), wrapped in a TimedDrafter, so the Output carries the engine's Result and
    the seconds spent drafting. `generate`: more keywords for engine.generate (temperature, eos_token_id)."""

    def mode(ids, do_sample, seed):
        drafter = TimedDrafter(make())
        res = engine.generate(target, drafter, ids, max_new_tokens, k=k, do_sample=do_sample, seed=seed,
                              **generate)
        return timing.Output(res.tokens, res, drafter.seconds)

    return mode


def run(target, tokenizer, drafters: dict, prompts: list[dict], max_new_tokens: int = 64, k: int = 4,
        do_sample: bool = False, seed: int = 0, progress: bool = True, temperature: float = 1.0,
        repeats: int = 1, warmup: int = 1, rules: dict | None = None,
        parts: Parts | None = None) -> list[Run]:
    """Plain decoding and each drafter through the engine on every prompt, timed by timing.round_robin:
    for each prompt, plain and every drafter back to back, after `warmup` untimed runs of each on the
    first prompt (so no first-call cost lands in the table). With repeats > 1 a run's time is its median.
    drafters: name -> a registry Entry (registry.entries(): built from the committed parts, at its own
    engine k; `parts`: what they are built from, registry.Parts(target) by default) or a factory of no
    arguments (lambda: PromptLookup(), run at k). do_sample=False is greedy;
    otherwise both sample at `temperature`. rules: drafter name -> the engine's verification rule for it
    ("exact" for any name not in it), so one drafter can be timed under two rules side by side."""
    # everything is checked before the first prompt runs, not minutes later at the first bad one
    max_new_tokens = checks.whole(max_new_tokens, "max_new_tokens", scalar=True)
    k = checks.whole(k, "k", scalar=True)
    if not isinstance(drafters, dict) or not all(isinstance(v, Entry) or callable(v)
                                                 for v in drafters.values()):
        raise TypeError("drafters must be a dict of name -> registry Entry or factory (lambda: "
                        f"PromptLookup()), so each run gets a fresh drafter; got {drafters!r}")
    if PLAIN in drafters:
        raise ValueError(f"drafters: {PLAIN!r} names plain decoding, the baseline of the table; give that "
                         "drafter another name")
    if not isinstance(prompts, (list, tuple)) or not prompts:
        raise ValueError(f"prompts must be a non-empty list of {{'kind', 'text'}} dicts, got {prompts!r}")
    for i, p in enumerate(prompts):
        if not (isinstance(p, dict) and isinstance(p.get("text"), str) and "kind" in p):
            raise ValueError(f"prompts[{i}] must be a dict with 'kind' and 'text', got {p!r}")
    rules = {} if rules is None else rules
    if not isinstance(rules, dict) or set(rules) - set(drafters):
        raise ValueError(f"rules must map names in drafters to rules, got {rules!r}")
    eos = tokenizer.eos_token_id

    def plain(ids, sample, s):
        return timing.Output(plain_generate(target, ids, max_new_tokens, do_sample=sample,
                                            temperature=temperature, seed=s, eos_token_id=eos).tokens)

    parts = Parts(target) if parts is None else parts
    built = {name: (v.factory(target, parts), v.engine_k(k)) if isinstance(v, Entry) else (v, k)
             for name, v in drafters.items()}
    modes = {PLAIN: plain, **{name: engine_mode(target, make, max_new_tokens, engine_k,
                                                temperature=temperature, eos_token_id=eos,
                                                rule=rules.get(name, "exact"))
                              for name, (make, engine_k) in built.items()}}
    by_kind, where = {}, []  # kind -> its prompts' ids; where[i]: prompt i's (kind, index in its kind)
    for p in prompts:
        where.append((p["kind"], len(by_kind.setdefault(p["kind"], []))))
        by_kind[p["kind"]].append(prompt_ids(tokenizer, p["text"], device=device_of(target)))
    samples = timing.round_robin(target, modes, by_kind, ("sample",) if do_sample else ("greedy",), repeats,
                                 warmup, seed, progress=progress)
    timed = live_summary.reduce(samples, key=lambda s: (s.mode, s.prompt_kind, s.prompt))
    runs = []
    for i, (kind, j) in enumerate(where):
        plain_run = timed[PLAIN, kind, j]
        plain_tokens = plain_run.first[j].output.tokens
        for name in drafters:
            t = timed[name, kind, j]
            tokens = t.first[j].output.tokens
            runs.append(Run(
                name, kind, i, t.tokens, t.seconds,
                plain_run.seconds * t.tokens / max(plain_run.tokens, 1),  # plain's time for as many tokens
                t.draft_seconds, t.calls, t.acceptance,
                # compare equal lengths: an EOS can end either one first
                None if do_sample else tokens == plain_tokens[: len(tokens)]))
    return runs


def table(runs: list[Run]) -> list[Row]:
    """One row per (drafter, kind), and an "all" row per drafter; sums before ratios (the runs'
    acceptance records pooled)."""
    bad = [r for r in runs if not (r.seconds > 0 and r.plain_seconds > 0)]
    if bad:
        raise ValueError(f"runs: every run must have taken time; {bad[0].drafter} on {bad[0].kind} has "
                         f"seconds={bad[0].seconds}, plain_seconds={bad[0].plain_seconds}")
    rows = []
    names = list(dict.fromkeys(r.drafter for r in runs))
    kinds = [k for k in KINDS if any(r.kind == k for r in runs)]
    for name in names:
        for kind in [*kinds, "all"]:
            sel = [r for r in runs if r.drafter == name and (kind == "all" or r.kind == kind)]
            if not sel:
                continue
            acc = Acceptance.pool([r.acceptance for r in sel])
            calls = sum(r.target_calls for r in sel)
            tokens = sum(r.new_tokens for r in sel)
            plain_s = sum(r.plain_seconds for r in sel)
            draft_s = sum(r.draft_seconds for r in sel)
            step_s = plain_s / max(tokens, 1)
            same = [r.identical for r in sel if r.identical is not None]
            rows.append(Row(
                name, kind, alpha=acc.alpha,
                per_position=acc.per_position_acceptance.round(3).tolist(),
                tokens_per_call=tokens / max(calls, 1),
                draft_ms_per_call=1e3 * draft_s / max(calls, 1),
                c=draft_s / max(calls, 1) / step_s,
                c_per_token=draft_s / max(acc.drafted, 1) / step_s,
                speedup=plain_s / sum(r.seconds for r in sel),
                identical=all(same) if same else None,
                reached=list(acc.judged_at), rounds=int(calls), drafted=acc.drafted,
                kept=list(acc.kept_at)))
    return rows


def repeated(target, tokenizer, drafters: dict, prompts: list[dict], repeats: int = 3, warmup: int = 1,
             progress: bool = True, **options) -> list[list[Row]]:
    """`repeats` whole runs one after another (run's round-robin each time; the warm-up before the first
    only): one table per repeat, so each speedup comes with the spread of its repeats (`bands`).
    options: run's other keywords (max_new_tokens, k, do_sample, ...)."""
    tqdm = progress_bar()
    repeats = checks.whole(repeats, "repeats", scalar=True)
    return [table(run(target, tokenizer, drafters, prompts, warmup=warmup if i == 0 else 0, progress=False,
                      **options))
            for i in tqdm(range(repeats), desc="repeats", disable=not progress)]


def bands(tables: list[list[Row]], kind: str = "all") -> dict[str, tuple[float, float, float]]:
    """drafter -> (median, lowest, highest) speedup over the repeats' tables (`repeated`), for one kind."""
    by_name: dict[str, list[float]] = {}
    for rows in tables:
        for r in rows:
            if r.kind == kind:
                by_name.setdefault(r.drafter, []).append(r.speedup)
    if not by_name:
        raise ValueError(f"no row of kind {kind!r} in the tables; kinds there: "
                         f"{sorted({r.kind for rows in tables for r in rows})}")
    return {name: (float(np.median(v)), float(min(v)), float(max(v))) for name, v in by_name.items()}


def markdown_bands(tables: list[list[Row]], kind: str = "all") -> str:
    """A markdown table of repeated runs (`repeated`): each drafter's α, tokens per pass and draft time
    from the first repeat (greedy runs repeat them exactly), and its median speedup with the lowest and
    highest repeat."""
    spread = bands(tables, kind)
    columns = [("drafter", "l"), ("α", "r"), ("tokens/pass", "r"), ("draft ms/round", "r"),
               ("speedup (median)", "r"), ("repeats", "r")]
    return live_summary.markdown_table(columns, [
        [r.drafter, f"{r.alpha:.2f}", f"{r.tokens_per_call:.2f}", f"{r.draft_ms_per_call:.1f}",
         f"{spread[r.drafter][0]:.2f}×", f"{spread[r.drafter][1]:.2f}–{spread[r.drafter][2]:.2f}×"]
        for r in tables[0] if r.kind == kind])


def free_form(runs: list[Run]) -> list[Row]:
    """One row per drafter over the free-form prompts only (story and qa), kind "free-form": the text a
    model drafter has to guess, with no earlier copy of it in the prompt."""
    rows = table([r for r in runs if r.kind in FREE_FORM])
    return [replace(r, kind="free-form") for r in rows if r.kind == "all"]


def by_temperature(target, tokenizer, drafters: dict, prompts: list[dict],
                   temperatures=(0.0, 0.5, 1.0, 1.5), max_new_tokens: int = 48, k: int = 4, seed: int = 0,
                   progress: bool = True, warmup: int = 1) -> list[dict]:
    """The table at each temperature (0 = greedy): α and tokens per pass by drafter and prompt kind. The
    first temperature's run warms every mode up (`warmup` runs of each); the later ones find them warm."""
    tqdm = progress_bar()
    checks.positive(list(temperatures), "temperatures (0 means greedy)", zero=True)
    out = []
    for i, temp in enumerate(tqdm(temperatures, desc="temperatures", disable=not progress)):
        runs = run(target, tokenizer, drafters, prompts, max_new_tokens, k, do_sample=temp > 0, seed=seed,
                   progress=False, temperature=temp if temp > 0 else 1.0, warmup=warmup if i == 0 else 0)
        out += [{"temperature": float(temp), **asdict(r)} for r in table(runs)]
    return out


def as_records(rows: list[Row]) -> list[dict]:
    return [asdict(r) for r in rows]


def markdown(rows: list[Row], kind: str | None = None) -> str:
    """A markdown table (all kinds, or one)."""
    columns = [("drafter", "l"), ("task", "l"), ("α", "r"), ("tokens/pass", "r"), ("draft ms/round", "r"),
               ("c (round)", "r"), ("speedup", "r"), ("= greedy", "c")]
    return live_summary.markdown_table(columns, [
        [r.drafter, r.kind, f"{r.alpha:.2f}", f"{r.tokens_per_call:.2f}", f"{r.draft_ms_per_call:.1f}",
         f"{r.c:.2f}", f"{r.speedup:.2f}×", "" if r.identical is None else ("yes" if r.identical else "NO")]
        for r in rows if kind is None or r.kind == kind])


@dataclass(frozen=True)
class Verdict:
    """One drafter against a speedup goal, on the formula's terms (notebook 05): its measured speedup,
    α, drafts per round and drafting cost per round, the verify pass at that width (plain steps), and the
    α the formula needs for the goal at that cost (nan: not even α = 1 reaches it)."""

    drafter: str
    speedup: float
    alpha: float
    mean_draft: float  # draft tokens per round
    c: float  # one round's drafting, in plain steps (Row.c)
    verify: float  # a verify pass over mean_draft + 1 positions, in plain steps
    needed: float  # the α that reaches the goal at this round's cost; nan where none does
    # "reaches it"; "α" (more acceptance would do); "cost" (no α would); "the rest" (its α meets the formula's
    # need, so what the formula leaves out stops it: α falling by position, the loop's own cost per round)
    limit: str


def verdicts(rows: list[Row], verify_cost, goal: float = 1.4) -> list[Verdict]:
    """Each row (free_form's, say) against `goal`: what stops a drafter short of it. verify_cost[w] is a
    verify pass over w positions in plain steps (live.measure_costs' curve, [0, 1, ...]); a round that
    drafts d tokens on average is priced as the formula's round of k = round(d) (at least 1) drafts, at
    its measured drafting cost c and verify_cost at d + 1."""
    v = np.asarray(checks.positive(verify_cost, "verify_cost", zero=True), dtype=float).reshape(-1)
    if v.size < 2 or v[1] <= 0:
        raise ValueError(f"verify_cost must be indexed by width, verify_cost[1] > 0; got {verify_cost!r}")
    goal = checks.positive(goal, "goal", scalar=True)
    out = []
    for r in rows:
        d = r.mean_draft
        k = max(1, round(d))
        verify = float(np.interp(d + 1, np.arange(v.size), v))
        needed = float(theory.alpha_needed(goal, k, 0.0, verify, c_pass=r.c))
        limit = ("reaches it" if r.speedup >= goal else "cost" if np.isnan(needed)
                 else "α" if r.alpha < needed else "the rest")
        out.append(Verdict(r.drafter, r.speedup, r.alpha, d, r.c, verify, needed, limit))
    return out


def markdown_verdicts(found: list[Verdict], goal: float = 1.4) -> str:
    """The verdicts as a table (the term that stops each drafter in its last column), then one sentence:
    who reaches `goal`, or, where none does, the closest, its speedup to three decimals (the table's two
    would print 1.3975 as 1.40)."""
    table = live_summary.markdown_table(
        [("drafter", "l"), ("speedup", "r"), ("α", "r"), ("drafts/round", "r"), ("c (round)", "r"),
         ("verify (steps)", "r"), (f"α for {goal:g}×", "r"), ("what stops it", "l")],
        [[v.drafter, f"{v.speedup:.2f}×", f"{v.alpha:.2f}", f"{v.mean_draft:.2f}", f"{v.c:.2f}",
          f"{v.verify:.2f}", "none reaches it" if np.isnan(v.needed) else f"{v.needed:.2f}",
          {"reaches it": "nothing", "α": f"α: {v.alpha:.2f} measured, {v.needed:.2f} needed",
           "cost": f"cost: c + verify = {v.c + v.verify:.2f} steps a round",
           "the rest": f"not α ({v.alpha:.2f} ≥ {v.needed:.2f}): α's fall by position and the loop's "
                       "cost per round"}[v.limit]] for v in found])
    winners = [v for v in found if v.limit == "reaches it"]
    if winners:
        line = (f"Reaching {goal:g}× plain: " + ", ".join(
            f"{v.drafter} ({v.speedup:.2f}×, α {v.alpha:.2f}, c {v.c:.2f})" for v in winners) + ".")
    elif found:
        closest = max(found, key=lambda v: v.speedup)
        line = (f"None reaches {goal:g}× plain here; the closest is {closest.drafter}, at "
                f"{closest.speedup:.3f}× plain in this one run.")
    else:
        line = f"None reaches {goal:g}× plain here."
    return table + "\n" + line + "\n"
