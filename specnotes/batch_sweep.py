"""The Monday-morning flip, measured in the course's own engine (notebook 08 §2, `make bench`): total tokens/s
of batched speculative decoding (engine.generate_batch) against batched plain decoding (engine.plain_batch)
at each batch size, round-robin, on a copy-heavy and a free-form mix of the held-out prompts.

Every timed run generates exactly max_new_tokens per row (no EOS), so a batch of B stays a batch of B and
every mode does the same work. Within a repeat, the modes of one (mix, batch) cell run back to back in an
order that rotates with the repeat, so a busy minute of a shared machine falls on all of them; a ratio is
taken within one repeat (speculative over the plain run beside it), and the spread over repeats is the noise
band. `versus_transformers` times plain_batch beside transformers' own left-padded batched generate.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from specnotes import checks, engine
from specnotes.decode import prompt_ids
from specnotes.env import progress_bar
from specnotes.prompts import prompt_set

MIXES = {"copy-heavy": ("copy",), "free-form": ("story", "qa")}  # held-out prompt kinds per mix
BATCHES = (1, 2, 4, 8, 16, 32, 64)


def mix_prompts(tokenizer, mixes=None, split: str = "heldout", per_mix: int = 4) -> dict[str, list]:
    """{mix: token-id lists}: `per_mix` held-out prompts of each mix's kinds, in the chat template,
    alternating kinds (so a small batch holds both)."""
    mixes = MIXES if mixes is None else mixes
    prompts = prompt_set(split)
    out = {}
    for mix, kinds in mixes.items():
        by_kind = [[p["text"] for p in prompts if p["kind"] == kind] for kind in kinds]
        texts = [t for group in zip(*by_kind, strict=False) for t in group]  # as many of each
        out[mix] = [prompt_ids(tokenizer, t)[0].tolist() for t in texts[:checks.whole(per_mix, "per_mix",
                                                                                        scalar=True)]]
    return out


def rows(prompts: list, batch: int, offset: int = 0) -> list:
    """`batch` prompts, cycling through the list from `offset`."""
    return [prompts[(offset + i) % len(prompts)] for i in range(batch)]


def chunked(prompts: list, batch: int, offset: int = 0) -> list[list]:
    """The batches that serve a whole mix at batch size `batch`: every prompt once, in consecutive batches
    of `batch` (the last may be shorter) when the mix is larger; one batch cycling through the mix when it
    is not. Every batch size thus runs the same prompts (rotated by `offset`)."""
    if batch >= len(prompts):
        return [rows(prompts, batch, offset)]
    order = rows(prompts, len(prompts), offset)
    return [order[i:i + batch] for i in range(0, len(order), batch)]


@dataclass(frozen=True)
class Point:
    mix: str
    mode: str  # "plain", or the drafter's name
    batch: int
    repeat: int
    seconds: float  # wall time of the batched generations that served the mix (prefill included)
    tokens: int  # new tokens over every row
    passes: int  # target passes (rounds), over the batches one after another
    accepted: int  # accepted drafts over every row (plain: 0)
    judged: int  # drafts the target examined
    drafted: int  # drafted tokens over every row and round
    drafting_rounds: int  # row-rounds that drafted anything
    same_as_plain: int  # rows whose greedy tokens equal the plain run's beside it (plain: every row)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds


@dataclass
class BatchSweep:
    points: list[Point]
    max_new_tokens: int

    def modes(self) -> list[str]:
        return list(dict.fromkeys(p.mode for p in self.points if p.mode != "plain"))

    def mixes(self) -> list[str]:
        return list(dict.fromkeys(p.mix for p in self.points))

    def batches(self) -> list[int]:
        return sorted({p.batch for p in self.points})

    def _point(self, mix, mode, batch, repeat) -> Point:
        return next(p for p in self.points if (p.mix, p.mode, p.batch, p.repeat) == (mix, mode, batch,
                                                                                         repeat))

    def ratios(self, mix: str, mode: str, batch: int) -> np.ndarray:
        """Speculative tokens/s over the plain run of the same repeat, one per repeat."""
        if mode not in self.modes() or mix not in self.mixes():
            raise ValueError(f"mode must be one of {self.modes()} and mix one of {self.mixes()}, got "
                             f"{mode!r}, {mix!r}")
        repeats = sorted({p.repeat for p in self.points if (p.mix, p.mode, p.batch) == (mix, mode, batch)})
        return np.array([self._point(mix, mode, batch, r).tokens_per_s
                         / self._point(mix, "plain", batch, r).tokens_per_s for r in repeats])

    def band(self, mix: str, mode: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(median, lowest, highest) ratio over repeats, per batch in batches()' order."""
        per = [self.ratios(mix, mode, b) for b in self.batches()]
        return (np.array([np.median(r) for r in per]), np.array([r.min() for r in per]),
                np.array([r.max() for r in per]))

    def crossover(self, mix: str, mode: str) -> int | None:
        """The batch from which the median ratio stays below 1 at every larger batch of the sweep (None:
        it is not below 1 at the largest)."""
        median, batches = self.band(mix, mode)[0], self.batches()
        if median[-1] >= 1:
            return None
        last_above = max((i for i, m in enumerate(median) if m >= 1), default=-1)
        return batches[last_above + 1]

    def above(self, mix: str, mode: str) -> list[int]:
        """The batches whose median ratio is above 1: where speculation paid."""
        return [b for b, m in zip(self.batches(), self.band(mix, mode)[0], strict=True) if m > 1]

    def alpha(self, mix: str, mode: str, batch: int | None = None) -> float:
        """Pooled acceptance (accepted drafts over judged) over every repeat, at one batch or all."""
        picked = [p for p in self.points if (p.mix, p.mode) == (mix, mode) and batch in (None, p.batch)]
        judged = sum(p.judged for p in picked)
        return sum(p.accepted for p in picked) / judged if judged else float("nan")

    def draft_length(self, mix: str, mode: str) -> float:
        """Mean drafted tokens over the row-rounds that drafted anything, over the whole sweep."""
        picked = [p for p in self.points if (p.mix, p.mode) == (mix, mode)]
        rounds = sum(p.drafting_rounds for p in picked)
        return sum(p.drafted for p in picked) / rounds if rounds else 0.0

    def as_dict(self) -> dict:
        return {"max_new_tokens": self.max_new_tokens, "points": [asdict(p) for p in self.points]}

    def markdown(self) -> str:
        """One table per mix: plain tokens/s, each drafter's tokens/s and ratio (median [low, high]) per
        batch, and the crossover read off the medians."""
        out = []
        for mix in self.mixes():
            head = ("| B | plain tok/s | " + " | ".join(f"{m} tok/s | {m} / plain" for m in self.modes())
                    + " |")
            out += [f"### {mix}", "", head, "|" + "---|" * (2 + 2 * len(self.modes()))]
            for i, b in enumerate(self.batches()):
                plain = np.median([p.tokens_per_s for p in self.points if (p.mix, p.mode, p.batch) ==
                                   (mix, "plain", b)])
                cells = [f"{b}", f"{plain:.1f}"]
                for m in self.modes():
                    med, lo, hi = (x[i] for x in self.band(mix, m))
                    rate = np.median([p.tokens_per_s for p in self.points
                                      if (p.mix, p.mode, p.batch) == (mix, m, b)])
                    cells += [f"{rate:.1f}", f"{med:.2f}x [{lo:.2f}, {hi:.2f}]"]
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
            for m in self.modes():
                cross = self.crossover(mix, m)
                out.append(f"- {m}: " + (f"below plain from B = {cross} on" if cross is not None else
                                         f"not below plain at B = {self.batches()[-1]}"))
            out.append("")
        return "\n".join(out)


def _timed(fn: Callable):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def sweep(target, prompts: dict[str, list], drafters: dict[str, Callable], batches=BATCHES,
          max_new_tokens: int = 32, repeats: int = 3, k: int | None = None,
          progress: bool = True) -> BatchSweep:
    """Time plain_batch and generate_batch with each drafter (drafters: {name: make_drafter}) at every batch
    size on every mix (prompts: {mix: token-id lists}, mix_prompts makes them), greedy, round-robin. At
    each batch size the whole mix is served (chunked): below the mix's size in consecutive batches, above
    it in one batch that repeats prompts. A warm-up run of every mode at the smallest batch comes first
    and is not kept."""
    batches = [checks.whole(b, "batches", scalar=True) for b in batches]
    repeats = checks.whole(repeats, "repeats", scalar=True)
    max_new_tokens = checks.whole(max_new_tokens, "max_new_tokens", scalar=True)
    if not drafters or not prompts:
        raise ValueError("sweep needs at least one drafter and one mix of prompts")
    modes = ["plain", *drafters]

    def run(mode, batch_rows):
        if mode == "plain":
            return engine.plain_batch(target, batch_rows, max_new_tokens, eos_token_id=-1)
        return engine.generate_batch(target, drafters[mode], batch_rows, max_new_tokens, k=k, eos_token_id=-1)

    for mix_rows in prompts.values():
        for mode in modes:
            run(mode, rows(mix_rows, min(batches)))
    cells = [(r, mix, b) for r in range(repeats) for mix in prompts for b in batches]
    bar = None
    if progress:
        bar = progress_bar()(total=len(cells), desc="batched sweep")
    points = []
    for r, mix, b in cells:
        chunks = chunked(prompts[mix], b, offset=r)
        order = modes[r % len(modes):] + modes[:r % len(modes)]
        results = {mode: _timed(lambda mode=mode, cs=chunks: [x for c in cs for x in run(mode, c)])
                   for mode in order}
        plain = [res.tokens for res in results["plain"][0]]
        for mode in modes:
            res, seconds = results[mode]
            judged = sum(rd.judged for x in res for rd in x.trace)
            sizes = [rd.size for x in res for rd in x.trace]
            passes = sum(max(len(x.trace) for x in res[i:i + b]) for i in range(0, len(res), b))
            points.append(Point(mix, mode, b, r, seconds, sum(len(x.tokens) for x in res), passes,
                                sum(int(x.accepted_counts.sum()) for x in res),
                                judged, sum(sizes), sum(n > 0 for n in sizes),
                                sum(x.tokens == p for x, p in zip(res, plain, strict=True))))
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    return BatchSweep(points, max_new_tokens)


def versus_transformers(target, prompts: list, batch: int = 16, max_new_tokens: int = 32,
                        repeats: int = 3) -> dict:
    """plain_batch against transformers' own batched generate (left-padded, greedy), round-robin on the same
    rows: {"ours_s": [...], "theirs_s": [...], "ratio": median of theirs/ours per repeat (above 1: ours is
    faster), "identical": rows with the same tokens}."""
    import torch

    batch_rows = rows(prompts, batch)
    width = max(map(len, batch_rows))
    pad = target.config.pad_token_id if target.config.pad_token_id is not None else 0
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in batch_rows], device=target.device)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in batch_rows], device=target.device)

    def theirs():
        with torch.inference_mode():
            return target.generate(ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                                   min_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad,
                                   eos_token_id=None)[:, width:].tolist()

    def ours():
        return [r.tokens for r in engine.plain_batch(target, batch_rows, max_new_tokens, eos_token_id=-1)]

    theirs(), ours()  # warm-up
    times = {"ours_s": [], "theirs_s": []}
    for r in range(checks.whole(repeats, "repeats", scalar=True)):
        for name, fn in ((("ours_s", ours), ("theirs_s", theirs)) if r % 2 == 0 else
                         (("theirs_s", theirs), ("ours_s", ours))):
            out, seconds = _timed(fn)
            times[name].append(seconds)
            if name == "ours_s":
                mine = out
            else:
                reference = out
    ratio = float(np.median(np.array(times["theirs_s"]) / np.array(times["ours_s"])))
    return {**times, "ratio": ratio, "batch": batch, "max_new_tokens": max_new_tokens,
            "identical": sum(a == b for a, b in zip(mine, reference, strict=True))}


@dataclass(frozen=True)
class Waste:
    """Each row keeping its own accepted prefix against the whole batch keeping the shortest one."""

    own_s: float
    shortest_s: float
    own_passes: int
    shortest_passes: int
    accepted: int  # drafts the rows accepted in the per-row run
    dropped: int  # accepted drafts the whole-batch rollback threw away
    identical: bool  # the two runs gave the same tokens (both are lossless under greedy)
    accepted_shortest: int  # drafts the whole-batch rollback kept

    @property
    def dropped_fraction(self) -> float:
        """Of the drafts the target accepted under the whole-batch rollback, the share it threw away."""
        kept_and_dropped = self.dropped + self.accepted_shortest
        return self.dropped / kept_and_dropped if kept_and_dropped else 0.0


def rollback_waste(target, batch_rows: list, make_drafter: Callable, max_new_tokens: int = 32,
                   k: int | None = None) -> Waste:
    """Time the same greedy batch with rollback="row" (each row its own prefix) and "shortest" (the naive
    alternative), back to back after a warm-up of each."""
    def run(rollback):
        return engine.generate_batch(target, make_drafter, batch_rows, max_new_tokens, k=k, eos_token_id=-1,
                                     rollback=rollback)

    run("row"), run("shortest")
    own, own_s = _timed(lambda: run("row"))
    short, short_s = _timed(lambda: run("shortest"))
    return Waste(own_s, short_s, max(len(r.trace) for r in own), max(len(r.trace) for r in short),
                 sum(int(r.accepted_counts.sum()) for r in own),
                 sum(rd.dropped for r in short for rd in r.trace),
                 [r.tokens for r in own] == [r.tokens for r in short],
                 sum(int(r.accepted_counts.sum()) for r in short))
