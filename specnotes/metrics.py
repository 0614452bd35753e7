"""The metrics people misread: one run's acceptance under each engine's definition (`Acceptance.table()`),
the conversions between them, and per-chunk ITL against per-token TPOT. Notebook 07 shows one run under
every definition.

alpha divides by the drafts the target judged, vLLM's draft_acceptance_rate by every drafted token; an
acceptance length counts the target's own token or not, over every round or only those that drafted.

`Acceptance` is the one acceptance record of the package: engine.Result, the drafter table, the live
summary and `make bench` all read their alpha, acceptance lengths, tokens per pass and per-position
acceptance from it (`Acceptance.from_trace` / `from_result`), so each is computed here and nowhere else.
Over several requests it keeps each request's own record too, so it can give a figure two ways: pooled
over every token (`alpha`), which weighs a long completion by its length, or averaged per request
(`alpha_per_request`), which weighs every request alike.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from specnotes import checks

LENGTHS = ("draft_acceptance_rate", "length_without_bonus", "length_with_bonus")  # what convert() takes


def _ratio(num, den) -> float:
    return float(num / den) if num is not None and den else float("nan")


def _mean(values) -> float:
    """The mean of the values that are not nan; nan when none is."""
    values = [v for v in values if v == v]
    return float(np.mean(values)) if values else float("nan")


def first_and_rest(judged_at, kept_at) -> tuple[float, float]:
    """(kept_at[0] / judged_at[0], sum(kept_at[1:]) / sum(judged_at[1:])): α at the first draft position
    and pooled over the later ones (nan where none was judged)."""
    judged, kept = (np.asarray(v, dtype=float).reshape(-1) for v in (judged_at, kept_at))
    if judged.shape != kept.shape:
        raise ValueError(f"judged_at and kept_at need one count per position each; got {judged.size} and "
                         f"{kept.size}")
    return _ratio(kept[:1].sum(), judged[:1].sum()), _ratio(kept[1:].sum(), judged[1:].sum())


@dataclass(frozen=True)
class Acceptance:
    """Counts summed over rounds (one generation or many); None where the source does not hold them.
    Every definition is a ratio of two; nan when one is unknown or the denominator is 0.

    judged_at[i] / kept_at[i]: rounds whose scan reached draft position i, and of those the rounds that
    kept it (empty when unknown). proposed: tokens the drafter proposed (a tree's nodes, a chain's
    length). requests: one record per request (generation) when pooled from several, else empty."""

    rounds: int | None  # target passes (verify steps), those that drafted nothing included
    drafting_rounds: int  # rounds that drafted at least one token (vLLM's num_drafts)
    drafted: int  # drafted tokens on the judged line (a chain: all of them; a tree: the accepted branch)
    accepted: int  # drafted tokens the target kept
    judged: int | None  # drafted tokens the target examined: min(accepted + 1, drafted) per round
    emitted: int | None = None  # new tokens: the accepted ones, plus the target's own unless EOS came first
    judged_at: tuple[int, ...] = ()
    kept_at: tuple[int, ...] = ()
    proposed: int | None = None
    requests: tuple[Acceptance, ...] = ()

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
        at = [tuple(int(x) for x in checks.whole(list(v), name, low=0)) if len(v) else ()
              for v, name in ((self.judged_at, "judged_at"), (self.kept_at, "kept_at"))]
        if len(at[0]) != len(at[1]) or any(k > j for j, k in zip(*at, strict=True)):
            raise ValueError("judged_at and kept_at need one count per draft position each, with kept_at[i] "
                             f"<= judged_at[i]; got {at[0]} and {at[1]}")
        object.__setattr__(self, "judged_at", at[0])
        object.__setattr__(self, "kept_at", at[1])
        if self.proposed is not None:
            object.__setattr__(self, "proposed", checks.whole(self.proposed, "proposed", low=0, scalar=True))
        if not all(isinstance(x, Acceptance) for x in self.requests):
            raise TypeError("requests must hold one metrics.Acceptance per request")
        object.__setattr__(self, "requests", tuple(self.requests))

    @classmethod
    def from_counts(cls, rounds, drafting_rounds, drafted, accepted, judged=None, emitted=None) -> Acceptance:
        """From totals you counted yourself; rounds, judged and emitted may be unknown (None)."""
        return cls(rounds, drafting_rounds, drafted, accepted, judged, emitted)

    @classmethod
    def from_trace(cls, trace, n_tokens: int | None = None) -> Acceptance:
        """One request's record from its rounds (engine.Round: .drafted, .accepted, .next_token (None after
        an EOS), .judged, and .size, the tokens the drafter proposed, where the round records it).
        n_tokens: the request's new tokens (len(Result.tokens)); None counts them from the rounds."""
        try:
            n = np.array([len(r.drafted) for r in trace], dtype=int)
            a = np.array([r.accepted for r in trace], dtype=int)
            j = np.array([r.judged for r in trace], dtype=int)
            bonus = sum(r.next_token is not None for r in trace)
            size = sum(getattr(r, "size", len(r.drafted)) for r in trace)
        except (AttributeError, TypeError) as exc:
            raise TypeError("from_trace takes a list of rounds (engine.Round: drafted, accepted, next_token "
                            f"and judged), such as Result.trace: {exc}") from None
        positions = np.arange(int(n.max(initial=0)))
        emitted = int(a.sum()) + bonus if n_tokens is None else n_tokens
        return cls(len(n), int((n > 0).sum()), int(n.sum()), int(a.sum()), int(j.sum()), emitted,
                   tuple((j[:, None] > positions).sum(0).tolist()),
                   tuple((a[:, None] > positions).sum(0).tolist()), int(size))

    @classmethod
    def from_result(cls, results) -> Acceptance:
        """From an engine.Result or a list of them (one request each): anything with a .trace of rounds
        (see from_trace). Several are pooled, each kept as one of `requests`."""
        many = isinstance(results, (list, tuple))
        try:
            records = [cls.from_trace(r.trace) for r in (results if many else [results])]
        except AttributeError as exc:
            raise TypeError("from_result takes a specnotes.engine.Result or a list of them (a .trace of "
                            f"rounds with drafted, accepted, next_token and judged): {exc}") from None
        return cls.pool(records) if many else records[0]

    @classmethod
    def pool(cls, records) -> Acceptance:
        """Several records as one: counts summed (unknown when one of them does not know it), positions
        summed position by position, and each request kept (a pooled record brings its own requests)."""
        records = list(records)
        if not records or not all(isinstance(r, Acceptance) for r in records):
            raise TypeError(f"pool takes a non-empty list of metrics.Acceptance, got {records!r}")

        def total(name):
            values = [getattr(r, name) for r in records]
            return None if any(v is None for v in values) else sum(values)

        at = {"judged_at": (), "kept_at": ()}  # unknown as soon as one record that drafted lacks them
        if all(r.judged_at or not r.drafted for r in records):
            for name in at:
                width = max(len(getattr(r, name)) for r in records)
                at[name] = tuple(sum(getattr(r, name)[i] for r in records if i < len(getattr(r, name)))
                                 for i in range(width))
        return cls(total("rounds"), total("drafting_rounds"), total("drafted"), total("accepted"),
                   total("judged"), total("emitted"), at["judged_at"], at["kept_at"], total("proposed"),
                   tuple(q for r in records for q in r.per_request))

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

    @property
    def mean_draft(self) -> float:
        """Drafted tokens per round that drafted."""
        return _ratio(self.drafted, self.drafting_rounds)

    @property
    def position_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(judged_at, kept_at) as arrays, each (max drafted,): rounds whose scan reached draft position i,
        and of those the rounds that kept it."""
        return np.array(self.judged_at, dtype=int), np.array(self.kept_at, dtype=int)

    @property
    def per_position_acceptance(self) -> np.ndarray:
        """(max drafted,) acceptance at draft position i among the rounds whose scan reached it (0 where
        none did)."""
        judged, kept = self.position_counts
        return kept / np.maximum(judged, 1)

    @property
    def first_and_rest(self) -> tuple[float, float]:
        """(α at draft position 1, α pooled over the positions after it), each among the rounds whose scan
        reached them: where a drafter's acceptance falls with depth (nan where no round reached them)."""
        return first_and_rest(self.judged_at, self.kept_at)

    @property
    def per_request(self) -> tuple[Acceptance, ...]:
        """One record per request: the pooled ones, or this record alone when it is one request."""
        return self.requests or (self,)

    @property
    def alpha_per_request(self) -> float:
        """The mean of each request's own alpha, over the requests that had a draft judged: every request
        weighs the same, where the pooled `alpha` weighs each by its judged drafts (a long completion
        counts more; vllm-project/vllm#42690, per-request metrics since vLLM 0.28)."""
        return _mean([r.alpha for r in self.per_request])

    def mean_acceptance_length_per_request(self, with_bonus: bool = True,
                                           drafting_only: bool = True) -> float:
        """mean_acceptance_length of each request, averaged over the requests where it is defined."""
        return _mean([r.mean_acceptance_length(with_bonus, drafting_only) for r in self.per_request])

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
                 "specnotes (Result.tokens_per_call), SGLang (accept length)")] + ([
                ("alpha, mean of each request's", self.alpha_per_request, "per request (vLLM 0.28)"),
                ("1 + accepted / drafting rounds, mean of each request's",
                 self.mean_acceptance_length_per_request(), "per request (vLLM 0.28)")]
                if len(self.per_request) > 1 else [])

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
