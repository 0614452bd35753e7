"""The metrics people misread: one run's acceptance under each engine's definition (`Acceptance.table()`),
the conversions between them, and per-chunk ITL against per-token TPOT. Notebook 07 shows one run under
every definition.

alpha divides by the drafts the target judged, vLLM's draft_acceptance_rate by every drafted token; an
acceptance length counts the target's own token or not, over every round or only those that drafted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from specnotes import checks

LENGTHS = ("draft_acceptance_rate", "length_without_bonus", "length_with_bonus")  # what convert() takes


def _ratio(num, den) -> float:
    return float(num / den) if num is not None and den else float("nan")


@dataclass(frozen=True)
class Acceptance:
    """Counts summed over rounds (one generation or many); None where the source does not hold them.
    Every definition is a ratio of two; nan when one is unknown or the denominator is 0."""

    rounds: int | None  # target passes (verify steps), those that drafted nothing included
    drafting_rounds: int  # rounds that drafted at least one token (vLLM's num_drafts)
    drafted: int  # drafted (proposed) tokens
    accepted: int  # drafted tokens the target kept
    judged: int | None  # drafted tokens the target examined: min(accepted + 1, drafted) per round
    emitted: int | None = None  # new tokens: the accepted ones, plus the target's own unless EOS came first

    def __post_init__(self):
        names = ("rounds", "drafting_rounds", "drafted", "accepted", "judged", "emitted")
        for name in names:
            if getattr(self, name) is not None or name in names[1:4]:
                object.__setattr__(self, name, checks.whole(getattr(self, name), name, low=0, scalar=True))
        r, d, n, a, j, e = (getattr(self, name) for name in names)
        if r is not None and d > r:
            raise ValueError(f"drafting_rounds ({d}) cannot exceed rounds ({r})")
        if d > n or (n and not d):
            raise ValueError(f"drafted ({n}) must be >= drafting_rounds ({d}), and 0 when no round drafted")
        if a > n:
            raise ValueError(f"accepted ({a}) cannot exceed drafted ({n}): only drafted tokens are kept")
        if j is not None and not max(a, d) <= j <= min(n, a + d):
            raise ValueError(f"judged ({j}) must lie in {max(a, d)}..{min(n, a + d)}: a drafting round "
                             "judges its accepted drafts and at most one rejected one, and at least one")
        if e is not None and r is not None and not a <= e <= a + r:
            raise ValueError(f"emitted ({e}) must lie in {a}..{a + r}: the accepted drafts and at most one "
                             "target token per round")

    @classmethod
    def from_counts(cls, rounds, drafting_rounds, drafted, accepted, judged=None, emitted=None) -> Acceptance:
        """From totals you counted yourself; rounds, judged and emitted may be unknown (None)."""
        return cls(rounds, drafting_rounds, drafted, accepted, judged, emitted)

    @classmethod
    def from_result(cls, results) -> Acceptance:
        """From an engine.Result or a list of them: anything whose .trace holds rounds with .drafted,
        .accepted, .next_token (None after an EOS) and .judged, as engine.Round has."""
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        try:
            trace = [r for result in results for r in result.trace]
            n, a = [len(r.drafted) for r in trace], sum(r.accepted for r in trace)
            return cls(len(trace), sum(x > 0 for x in n), sum(n), a, sum(r.judged for r in trace),
                       a + sum(r.next_token is not None for r in trace))
        except AttributeError as exc:
            raise TypeError("from_result takes a specnotes.engine.Result or a list of them (a .trace of "
                            f"rounds with drafted, accepted, next_token and judged): {exc}") from None

    @classmethod
    def from_vllm(cls, num_drafts, num_draft_tokens, num_accepted_tokens,
                  accepted_per_position=None) -> Acceptance:
        """From vLLM's spec-decode counters (num_drafts, num_draft_tokens, num_accepted_tokens,
        num_accepted_tokens_per_pos). They count only the steps that drafted: rounds and emitted are
        unknown. Judged is known from accepted_per_position (k,) when every draft had the full length k:
        position 0 is judged in every draft, position i in those that kept i - 1. After shorter drafts
        (n-gram) a fully kept one seems to judge a position it never drafted: judged stays unknown."""
        counts = cls(None, num_drafts, num_draft_tokens, num_accepted_tokens, None)
        if accepted_per_position is None:
            return counts
        per = np.asarray(checks.whole(accepted_per_position, "accepted_per_position", low=0))
        if per.ndim != 1 or np.any(np.diff(per) > 0) or per[0] > counts.drafting_rounds:
            raise ValueError("accepted_per_position must be one count per draft position, non-increasing (a "
                             f"draft keeps a prefix), each <= num_drafts ({num_drafts}); got {per.tolist()}")
        if per.sum() != counts.accepted:
            raise ValueError(f"accepted_per_position sums to {per.sum()}, not num_accepted_tokens "
                             f"({counts.accepted}): read every counter from the same scrape")
        if counts.drafted != counts.drafting_rounds * per.size:
            return counts
        return replace(counts, judged=int(counts.drafting_rounds + per[:-1].sum()))

    @property
    def alpha(self) -> float:
        """Accepted over judged drafts: specnotes' Result.alpha, the alpha of the cost model."""
        return _ratio(self.accepted, self.judged)

    @property
    def draft_acceptance_rate(self) -> float:
        """Accepted over drafted tokens (vLLM's): below alpha, as the drafts after a rejection count too."""
        return _ratio(self.accepted, self.drafted)

    def mean_acceptance_length(self, with_bonus: bool = True, drafting_only: bool = True) -> float:
        """Accepted drafts per round, plus 1 for the target's own token with with_bonus (vLLM since PR
        17908); over the rounds that drafted (vLLM's num_drafts), or every round with drafting_only=False."""
        rounds = self.drafting_rounds if drafting_only else self.rounds
        return _ratio(self.accepted, rounds) + bool(with_bonus)

    @property
    def tokens_per_pass(self) -> float:
        """New tokens per target pass (Result.tokens_per_call): 1 + accepted/rounds but for EOS rounds."""
        return _ratio(self.emitted, self.rounds)

    def rows(self) -> list[tuple[str, float, str]]:
        """(definition, value, who reports it) for every definition, in one list a notebook can show."""
        n = self.mean_acceptance_length
        return [("alpha: accepted / judged drafts", self.alpha, "specnotes (Result.alpha)"),
                ("accepted / drafted tokens", self.draft_acceptance_rate, "vLLM (draft_acceptance_rate)"),
                ("1 + accepted / drafting rounds", n(True), "vLLM (mean_acceptance_length since PR 17908)"),
                ("accepted / drafting rounds", n(False), "vLLM before PR 17908, some papers"),
                ("1 + accepted / all rounds", n(True, False), "-"),
                ("accepted / all rounds", n(False, False), "-"),
                ("emitted tokens / target passes", self.tokens_per_pass,
                 "specnotes (Result.tokens_per_call), SGLang (accept length)")]

    def table(self) -> str:
        """rows() as aligned text."""
        width = max(len(name) for name, _, _ in self.rows())
        return "\n".join(f"{name:<{width}}  {value:7.3f}  {who}" for name, value, who in self.rows())


def convert(value, source: str, target: str, k: int | None = None) -> float:
    """One per-drafting-round definition in LENGTHS as another. The lengths with and without the
    target's own token differ by 1; the draft acceptance rate is the length without it over k, exact
    when every round drafted k tokens. alpha is no function of these: it needs the drafts judged."""
    for name in (source, target):
        if name not in LENGTHS:
            hint = ": alpha needs the judged count (Acceptance.from_vllm with accepted_per_position)"
            raise ValueError(f"can convert between {LENGTHS}, got {name!r}" + hint * (name == "alpha"))
    if k is not None:
        k = checks.whole(k, "k (drafted tokens per round)", scalar=True)
    elif "draft_acceptance_rate" in (source, target) and source != target:
        raise ValueError(f"converting {source} to {target} needs k, the tokens drafted per round")
    rate = source == "draft_acceptance_rate"
    value = checks.probability(value, source, scalar=True) if rate else checks.positive(
        value, source, zero=True, scalar=True)
    if source == target:
        return value
    kept = value * k if rate else value - (source == "length_with_bonus")
    if kept < 0 or (k is not None and kept > k):
        raise ValueError(f"{source} = {value:g} means {kept:g} accepted drafts per round, outside "
                         f"0..{'k' if k is None else k}")
    return {"draft_acceptance_rate": kept / k if k else 0.0, "length_without_bonus": kept,
            "length_with_bonus": kept + 1.0}[target]


class Latency(NamedTuple):
    chunk_gaps: np.ndarray  # (chunks - 1,) seconds between streamed chunks (one round's tokens each)
    chunk_itl: float  # their mean: the inter-token latency of a client that times chunks
    tpot: float  # (last token - first token) / (tokens - 1): the time per output token
    chunks: int
    tokens: int


def latency(arrival_times) -> Latency:
    """Per-chunk ITL and per-token TPOT from (tokens,) arrival times in seconds (Result.arrival_times);
    tokens with the same time came in one chunk. nan with fewer than 2 chunks (or tokens)."""
    t = np.atleast_1d(checks.positive(arrival_times, "arrival_times", zero=True))
    if t.ndim != 1:
        raise ValueError(f"arrival_times must be one time per token, shape (tokens,), got shape {t.shape}")
    if np.any(np.diff(t) < 0):
        raise ValueError("arrival_times must not decrease: token i + 1 cannot be ready before token i")
    gaps = np.diff(t[np.r_[True, np.diff(t) > 0]])  # a chunk: the tokens that arrived at one time
    itl = float(gaps.mean()) if gaps.size else float("nan")
    return Latency(gaps, itl, _ratio(t[-1] - t[0], t.size - 1), gaps.size + 1, t.size)
