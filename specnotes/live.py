"""Live assisted-generation timings (notebook 07, `make bench`): transformers' assisted generation and
the engine side by side, every mode timed round-robin by specnotes.timing, and each engine mode's speedup
predicted from its measured acceptance and costs before it is compared with the measured one.
"""


from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from specnotes import checks, drafter_table, models, timing
from specnotes.decode import prompt_ids
from specnotes.drafters import registry
from specnotes.env import default_device, default_dtype, dtype_name, environment, model_facts
from specnotes.live_summary import NEGATIVE_OVERHEAD, Costs, Record, markdown_table, summarize
from specnotes.placement import device_of, to_model
from specnotes.prompts import LIVE
from specnotes.references import fingerprint
from specnotes.timing import Output, Pass, cache_of, pass_times, random_ids
from specnotes.training.distilled import load_distilled_draft
from specnotes.training.early_exit import committed_path

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
            online = models.hub_reachable()
        if online:
            return Plan(device, dtype, HUB_PAIR[0], HUB_PAIR[1],
                        "GPU and hub: the seed article's pair, 360M target with the 135M draft")
    return Plan(device, dtype, models.DEFAULT, "distilled",
                "offline: SmolLM2-135M-Instruct with the 2-layer draft distilled in notebook 06")


def load(p: Plan):
    """(target, tokenizer, draft model) for a plan, both on its device in its dtype."""
    import torch

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
            with models.quiet_transformers():
                out = target.generate(ids, **kwargs, **extra_kwargs)
            return Output(out[0, ids.shape[1]:].tolist())
        return run

    parts = registry.Parts(target)
    parts.once("draft", lambda: draft)

    def own(name):  # a registry entry at its own engine k, with k as the run's
        entry = registry.ENTRIES[name]
        return drafter_table.engine_mode(target, entry.factory(target, parts), max_new_tokens,
                                         entry.engine_k(k))

    out = {
        "plain": hf(),
        "engine-no-draft": own("engine-no-draft"),  # drafts nothing: the engine's own overhead
        "hf-prompt-lookup": hf(prompt_lookup_num_tokens=10),
        "engine-prompt-lookup": own("prompt-lookup"),
    }
    if draft_model:
        out["hf-assistant"] = hf(assistant_model=draft)
        out["engine-draft-model"] = own("distilled-draft")
    if extra:
        out["engine-suffix"] = own("suffix")
        if committed_path(4).exists() and target.config.num_hidden_layers == 30:  # trained for the 135M
            out["engine-early-exit"] = own("early-exit+adapter")
    return out


def measure_costs(target, ids, max_width: int, context_extra: int = 32, repeats: int = 5) -> Costs:
    """Prefill time, decode step time and the verify-width cost curve at this prompt's context, for
    widths 1, 2, 3, 4, 6, 8, 12, 16, 24, 33 (up to max_width; interpolated between them). timing.pass_times
    times the prompt pass and the widths interleaved, after a warm-up round, `repeats` rounds of all of
    them, and each takes its median, so a slow moment of the machine cannot bend the curve."""
    import torch

    max_width = checks.whole(max_width, "max_width", scalar=True)
    context_extra = checks.whole(context_extra, "context_extra", low=0, scalar=True)
    repeats = checks.whole(repeats, "repeats", scalar=True)
    checks.prompt_tensor(ids, "ids", target)
    checks.fits(target, ids.shape[1] + context_extra + max_width, "the prompt + context_extra + max_width")
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


def verdicts(target, ids, rows: list[drafter_table.Row], goal: float = 1.4,
             repeats: int = 5) -> list[drafter_table.Verdict]:
    """drafter_table.verdicts for `rows` against `goal`, with the verify-cost curve measured here, at the
    context of the prompt `ids`, for widths up to the longest mean draft a round + 2 (measure_costs)."""
    if not rows:
        return []
    widest = max(2, max(round(r.mean_draft) for r in rows) + 2)
    costs = measure_costs(target, ids, widest, repeats=repeats)
    return drafter_table.verdicts(rows, costs.verify, goal)


def run(p: Plan | None = None, max_new_tokens: int = 64, repeats: int = 3, k: int = 3,
        samplings=("greedy", "sample"), prompts_per_kind: int | None = None, extra_modes: bool = True,
        warmup: int = 1, cost_repeats: int = 5, progress: bool = True, loaded=None,
        draft_modes: bool = True) -> Report:
    """The whole suite: load, time every mode round-robin, measure costs, predict, summarize.
    loaded: (target, tokenizer, draft) already in memory, instead of loading the plan's models.
    extra_modes, draft_modes: modes(extra=..., draft_model=...)."""
    # every setting is checked before the models load and the minutes of timing start
    if p is not None and not isinstance(p, Plan):
        raise TypeError(f"p must be a live.Plan (live.plan() makes one), got {p!r}")
    max_new_tokens = checks.whole(max_new_tokens, "max_new_tokens", scalar=True)
    repeats, k = checks.whole(repeats, "repeats", scalar=True), checks.whole(k, "k", scalar=True)
    warmup = checks.whole(warmup, "warmup", low=0, scalar=True)
    cost_repeats = checks.whole(cost_repeats, "cost_repeats", scalar=True)
    if prompts_per_kind is not None:
        prompts_per_kind = checks.whole(prompts_per_kind, "prompts_per_kind", scalar=True)
    samplings = checks.samplings(samplings)
    p = p or plan()
    target, tokenizer, draft = load(p) if loaded is None else loaded
    texts = {kind: lst[:prompts_per_kind] for kind, lst in LIVE.items()}
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


def markdown(report: Report) -> str:
    m, settings = report.machine, report.settings
    head = (f"{m['device']} ({m['device_name']}), {m['dtype']}, {m['threads']} threads, torch {m['torch']}, "
            f"transformers {m['transformers']}; target {report.plan.target}, draft {report.plan.draft}; up "
            f"to {settings['max_new_tokens']} new tokens, {settings['repeats']} round-robin repeats "
            "(medians).\n\n")
    columns = [("prompt", "l"), ("sampling", "l"), ("mode", "l"), ("tokens/s", "r"), ("×plain", "r"),
               ("predicted", "r"), ("tokens/call", "r"), ("α", "r"), ("overhead ms/round", "r"),
               ("same as plain", "l")]
    rows = []
    for r in report.runs:
        p = r.prediction
        pred = ("", "", "") if p is None else (f"{p.predicted_speedup:.2f}×", f"{p.alpha:.2f}",
                                              f"{p.round_overhead_ms:.1f}")
        same = "" if r.identical_to_plain is None else (
            "yes" if r.identical_to_plain else f"no (from token {r.first_difference})")
        rows.append([r.prompt_kind, r.sampling, r.mode, f"{r.tokens_per_s:.1f}", f"{r.speedup:.2f}×", pred[0],
                     f"{r.tokens_per_call:.2f}", pred[1], pred[2], same])
    negative = any(r.prediction is not None and r.prediction.round_overhead_ms < 0 for r in report.runs)
    return head + markdown_table(columns, rows) + ("\n" + NEGATIVE_OVERHEAD + "\n" if negative else "")


