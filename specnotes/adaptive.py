"""Adaptive draft length: schedules that pick k each round, and a drafter wrapper that applies them.
Notebook 08.

- `Fixed(k)`: the baseline.
- `Heuristic()`: transformers' "heuristic" schedule for assisted generation: +2 after a round whose
  drafts were all accepted, -1 otherwise (never below 1).
- `Controller(c)`: estimates α online (an exponentially weighted count of accepted over judged drafts)
  and picks the k that maximizes E(α, k) / (k c + verify cost of k + 1 positions), falling back to no
  draft (with an occasional 1-token probe) when no k is predicted to beat plain decoding.
- `CostAware(c, verify_cost)`: α per draft position, learned online; verifies the number of
  positions whose survival probabilities best pay for the measured cost of the verify pass, as wide as
  the batch that shares it (read from each round's feedback), so at large batch it stops drafting by
  itself. `cost_by_positions(grid)` turns a measured (batch, tokens) grid into the curve it reads.
Every schedule's observe(drafted, accepted, rows) is told how many sequences shared the round's pass.
A confidence stop (draft until the draft model's own probability for its token falls below a
threshold) lives in `DraftModel(stop_below=...)`; combine it with any schedule as the upper bound.
"""

from __future__ import annotations

import numpy as np

from specnotes import checks, theory
from specnotes.drafters.base import Draft, Wrapper, capped


def _check_round(drafted, accepted) -> None:
    """A round's counts: 0 <= accepted <= drafted, both whole (an impossible round would bend alpha)."""
    drafted = checks.whole(drafted, "drafted", low=0, scalar=True)
    checks.whole(accepted, "accepted", low=0, high=drafted, scalar=True)


class Fixed:
    def __init__(self, k: int):
        self.k = k = checks.whole(k, "k", scalar=True)
        self.name = f"fixed k={k}"

    def reset(self) -> None:
        pass

    def next_k(self) -> int:
        return self.k

    def observe(self, drafted: int, accepted: int, rows: int = 1) -> None:
        pass


class Heuristic:
    """+up after a fully accepted round, -down after any rejection; clamped to [k_min, k_max]."""

    def __init__(self, start: int = 5, up: int = 2, down: int = 1, k_min: int = 1, k_max: int = 20):
        start, up, down = (checks.whole(v, name, scalar=True) for v, name in
                           ((start, "start"), (up, "up"), (down, "down")))
        k_min, k_max = checks.whole(k_min, "k_min", scalar=True), checks.whole(k_max, "k_max", scalar=True)
        if not 1 <= k_min <= start <= k_max:
            raise ValueError(f"need 1 <= k_min <= start <= k_max, got {k_min}, {start}, {k_max}")
        self.start, self.up, self.down, self.k_min, self.k_max = start, up, down, k_min, k_max
        self.name = f"heuristic (+{up}/-{down})"
        self.reset()

    def reset(self) -> None:
        self.k = self.start
        self.history: list[int] = []

    def next_k(self) -> int:
        self.history.append(self.k)
        return self.k

    def observe(self, drafted: int, accepted: int, rows: int = 1) -> None:
        _check_round(drafted, accepted)
        if drafted == 0:
            return
        step = self.up if accepted == drafted else -self.down
        self.k = int(np.clip(self.k + step, self.k_min, self.k_max))


def _cost_curve(verify_cost, width: int, what: str, first: int = 1) -> np.ndarray:
    """verify_cost[w] for w = 0..width: a verify pass of w positions in target steps (None: 1 for every
    width, the memory-bound ideal); a short curve is extended with its last slope. Widths first..width
    must cost more than nothing."""
    cost = np.ones(width + 1) if verify_cost is None else np.atleast_1d(
        checks.positive(verify_cost, what, zero=True)).astype(float)
    if cost.size < 2:
        raise ValueError(f"{what} is indexed by width ({what}[1] = 1 step); got {verify_cost!r}")
    if cost.size < width + 1:
        slope = cost[-1] - cost[-2] if cost.size > 2 else 0.0
        cost = np.r_[cost, cost[-1] + slope * np.arange(1, width + 2 - cost.size)]
    if not np.all(cost[first:] > 0):
        raise ValueError(f"{what}: a pass over {first}..{width} positions must cost > 0 (a short curve is "
                         f"extended by its last slope); got {verify_cost!r}")
    return cost


def _probed(schedule, k: int) -> int:
    """A planning schedule's k for the next round, recorded in its history: while no k pays (k = 0), a
    1-token probe every `probe_every` skipped rounds keeps α measured."""
    if k == 0:
        schedule.skipped += 1
        if schedule.skipped % schedule.probe_every == 0:
            k = 1
    schedule.history.append(k)
    return k


class Controller:
    """Online α estimate plus the cost model: k = argmax theory.speedup(α, k, c, verify_cost[k + 1]).

    c is a draft step over a target step; verify_cost[w] is a verify pass of w positions in target
    steps (default: 1 for every width, the memory-bound ideal; pass the measured curve on a CPU).
    α starts at `prior` worth `prior_weight` judged drafts, and older rounds fade with `decay`."""

    def __init__(self, c: float, verify_cost=None, prior: float = 0.6, prior_weight: float = 4.0,
                 decay: float = 0.9, k_max: int = 12, probe_every: int = 8):
        c = checks.positive(c, "c", zero=True, scalar=True)
        prior = checks.probability(prior, "prior", scalar=True)
        decay = checks.probability(decay, "decay", low_open=True, scalar=True)
        prior_weight = checks.positive(prior_weight, "prior_weight (judged drafts the prior is worth)",
                                       scalar=True)
        k_max = checks.whole(k_max, "k_max", high=1000, scalar=True)
        probe_every = checks.whole(probe_every, "probe_every", scalar=True)
        self.c, self.prior, self.prior_weight, self.decay = float(c), prior, prior_weight, decay
        self.k_max, self.probe_every = k_max, probe_every
        self.verify_cost = _cost_curve(verify_cost, k_max + 1, "verify_cost", first=2)
        self.name = f"controller (c={c:.2f})"
        self.reset()

    def reset(self) -> None:
        self.kept, self.judged = self.prior * self.prior_weight, self.prior_weight
        self.skipped = 0
        self.history: list[int] = []

    @property
    def alpha(self) -> float:
        return self.kept / self.judged

    def plan(self, alpha: float) -> tuple[int, float]:
        """(k, predicted speedup) for a given α; k = 0 when no k beats plain decoding."""
        ks = np.arange(1, self.k_max + 1)
        a = min(alpha, 1 - 1e-9)
        gain = theory.speedup(a, ks, self.c, self.verify_cost[ks + 1])
        i = int(np.argmax(gain))
        return (int(ks[i]), float(gain[i])) if gain[i] > 1 else (0, 1.0)

    def next_k(self) -> int:
        return _probed(self, self.plan(self.alpha)[0])

    def observe(self, drafted: int, accepted: int, rows: int = 1) -> None:
        _check_round(drafted, accepted)
        if drafted == 0:
            return
        judged = min(drafted, accepted + 1)  # the scan stops at the first rejection
        self.kept = self.decay * self.kept + accepted
        self.judged = self.decay * self.judged + judged


def cost_by_positions(grid: dict) -> np.ndarray:
    """The verify cost of a pass by the positions it holds in all, in plain steps of one sequence:
    cost[n] for n = 0..the grid's largest batch x tokens, from a measured grid {(batch, tokens): seconds}
    (serving.measure_grid), dividing by the (1, 1) cell. Cells with the same batch x tokens are averaged
    and the rest interpolated: a batch of B rows verifying m drafts each is a pass of B (m + 1)
    positions, which is what CostAware prices."""
    if not isinstance(grid, dict) or (1, 1) not in grid:
        raise ValueError("grid must be a {(batch, tokens): seconds} dict with a (1, 1) cell, as serving."
                         f"measure_grid(model, batches=(1, ...), tokens=(1, ...)) returns; got {grid!r:.80}")
    by_total: dict[int, list[float]] = {}
    for (b, t), seconds in grid.items():
        by_total.setdefault(int(b) * int(t), []).append(float(checks.positive(seconds, f"grid[{(b, t)}]")))
    totals = np.array(sorted(by_total))
    costs = np.array([np.mean(by_total[n]) for n in totals]) / grid[(1, 1)]
    n = np.arange(int(totals[-1]) + 1)
    return np.r_[0.0, np.interp(n[1:], totals, costs)]


class CostAware:
    """Adaptive verification by cost, in the spirit of vLLM 0.32's enable_adaptive_verification: α per
    draft position, learned online, priced against the measured cost of verifying one more position.

    Position i survives a round with probability S_i = α_1 α_2 ... α_i, so verifying m positions yields
    1 + S_1 + ... + S_m tokens on average. The pass that verifies them is `rows` sequences wide (a batch
    shares it), each with m + 1 positions, against rows positions for a plain step; each drafted token
    costs c target steps to draft. Each round takes the m that maximizes

        (1 + S_1 + ... + S_m) / (m c + verify_cost[rows (m + 1)] / verify_cost[rows])

    and no draft when no m beats plain decoding (a 1-token probe every `probe_every` rounds keeps α
    learning). verify_cost[n] is a pass over n positions in all (`cost_by_positions` of a measured grid;
    None: 1 for every width, the memory-bound ideal). rows=None (the default) follows the pass: each
    round's feedback says how many sequences shared it, so in generate_batch a batch's width is priced
    with no setting; an int fixes it. At large batch the pass is compute-bound, every extra position
    costs a full token's work, and m falls to 0 by itself. Each α_i starts at `prior`, worth
    `prior_weight` judged drafts; older rounds fade with `decay`."""

    def __init__(self, c: float = 0.0, verify_cost=None, rows: int | None = None, prior: float = 0.6,
                 prior_weight: float = 4.0, decay: float = 0.95, k_max: int = 12, probe_every: int = 8):
        self.c = float(checks.positive(c, "c", zero=True, scalar=True))
        self.follow = rows is None
        self.rows = 1 if rows is None else checks.whole(rows, "rows (sequences sharing a verify pass)",
                                                        scalar=True)
        self.prior = checks.probability(prior, "prior", scalar=True)
        self.prior_weight = checks.positive(prior_weight, "prior_weight (judged drafts the prior is worth)",
                                            scalar=True)
        self.decay = checks.probability(decay, "decay", low_open=True, scalar=True)
        self.k_max = checks.whole(k_max, "k_max", high=1000, scalar=True)
        self.probe_every = checks.whole(probe_every, "probe_every", scalar=True)
        self.given = verify_cost
        self.verify_cost = _cost_curve(verify_cost, self.rows * (self.k_max + 1), "verify_cost")
        self.name = "cost-aware" if self.follow else f"cost-aware ({self.rows} row{'s' * (self.rows > 1)})"
        self.reset()

    def reset(self) -> None:
        self.kept = np.full(self.k_max, self.prior * self.prior_weight)
        self.judged = np.full(self.k_max, self.prior_weight)
        self.skipped = 0
        self.history: list[int] = []
        if self.follow:
            self.rows = 1

    @property
    def alphas(self) -> np.ndarray:
        """(k_max,) the current estimate of α at each draft position."""
        return self.kept / self.judged

    def plan(self, alphas=None) -> tuple[int, float]:
        """(m, predicted speedup over plain) for per-position α (default: the current estimates); m = 0
        when no m beats plain decoding."""
        if alphas is None:
            a = self.alphas
        else:  # positions past the last given take the last one's α
            given = np.atleast_1d(checks.probability(alphas, "alphas")).astype(float)
            a = np.r_[given, np.repeat(given[-1], max(0, self.k_max - given.size))][:self.k_max]
        m = np.arange(1, self.k_max + 1)
        tokens = 1 + np.cumsum(np.cumprod(np.minimum(a, 1 - 1e-9)))
        cost = m * self.c + self.verify_cost[self.rows * (m + 1)] / self.verify_cost[self.rows]
        gain = tokens / cost
        i = int(np.argmax(gain))
        return (int(m[i]), float(gain[i])) if gain[i] > 1 else (0, 1.0)

    def next_k(self) -> int:
        return _probed(self, self.plan()[0])

    def observe(self, drafted: int, accepted: int, rows: int = 1) -> None:
        _check_round(drafted, accepted)
        if self.follow and rows != self.rows:  # the batch changed width (or this is the first batched round)
            self.rows = checks.whole(rows, "rows", scalar=True)
            if self.verify_cost.size < self.rows * (self.k_max + 1) + 1:
                self.verify_cost = _cost_curve(self.given, self.rows * (self.k_max + 1), "verify_cost")
        if drafted == 0:
            return
        judged = min(drafted, accepted + 1, self.k_max)  # the scan stops at the first rejection
        self.kept *= self.decay
        self.judged *= self.decay
        self.kept[:min(accepted, self.k_max)] += 1
        self.judged[:judged] += 1


def versus_hindsight(bands: dict, policy: str, fixed: list[str]) -> dict:
    """Is `policy` as fast as the best fixed k chosen after the fact? bands: name -> (median, lowest,
    highest) speedup over repeats (drafter_table.bands); fixed: the names of the fixed-k runs. It holds
    when the policy's median is at least the best fixed k's lowest repeat: no slower than that k, within
    the noise its own repeats show."""
    missing = [n for n in [policy, *fixed] if n not in bands]
    if missing or not fixed:
        raise ValueError(f"bands has no entry for {missing or 'any fixed k'}; it has {sorted(bands)}")
    best = max(fixed, key=lambda n: bands[n][0])
    return {"best": best, "best_band": bands[best], "policy_band": bands[policy],
            "holds": bands[policy][0] >= bands[best][1]}


class AdaptiveK(Wrapper):
    """A drafter whose k comes from a schedule, below the engine's cap (and the tokens left). Wraps any
    drafter that takes k, such as DraftModel; what the wrapped drafter needs from the target's pass
    (Lookahead's predictions, EagleLite's states) it still gets."""

    def __init__(self, drafter, schedule):
        if isinstance(schedule, type) or not all(callable(getattr(schedule, m, None))
                                                 for m in ("reset", "next_k", "observe")):
            raise TypeError(f"schedule must be a schedule object such as Fixed(4), Heuristic(), "
                            f"Controller(c) or CostAware(c, verify_cost), not {schedule!r}")
        super().__init__(drafter)
        self.drafter, self.schedule = drafter, schedule
        self.name = schedule.name

    def reset(self, prompt: list[int]) -> None:
        self.schedule.reset()
        self.drafter.reset(prompt)

    def propose(self, tokens: list[int], k: int | None, sampler) -> Draft:
        own = capped(self.schedule.next_k(), k)  # the schedule's k, under the engine's cap
        return self.drafter.propose(tokens, own, sampler) if own > 0 else Draft([])

    def update(self, feedback) -> None:
        self.schedule.observe(len(feedback.drafted), feedback.accepted, feedback.rows)
        self.drafter.update(feedback)
