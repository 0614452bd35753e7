"""vLLM's offline engine (`vllm.LLM`: no HTTP server, no second process) timed request by request.

Notebook 09 uses it to take a server's speedup apart: the same prompts, tokens and configurations as the
server, without the front end, with both cores or with one. `measure` runs here and starts one process in
the vLLM environment (`python -m specnotes.vllm_offline`, reading its job as JSON on stdin). That process
loads every configuration once, warms each up on every prompt, then times them round-robin: each prompt
goes through every configuration in turn (the order rotating), so a slow minute falls on all of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

from specnotes import checks
from specnotes.server import ServerError, vllm_python

MARK = "SPECNOTES_OFFLINE_RESULT "  # the result's line on stdout, among vLLM's own log lines


@dataclass(frozen=True)
class Offline:
    """What `measure` timed. seconds[name] lists every timed request of configuration `name`, in the same
    order for every configuration (repeat by repeat, prompt by prompt), so position i of two lists is one
    pair. Every request generated `tokens` tokens (EOS ignored); accepted[name] counts the draft tokens
    its target kept over the timed requests (0 without speculation)."""

    names: list
    seconds: dict
    accepted: dict
    tokens: int
    engine_cores: int

    def _check(self, name):
        if name not in self.seconds:
            raise ValueError(f"name must be one of the measured configurations {self.names}, got {name!r}")
        return np.asarray(self.seconds[name], dtype=float)

    def rate(self, name: str) -> float:
        """Median tokens/s of one request."""
        return float(np.median(self.tokens / self._check(name)))

    def ratios(self, a: str, b: str) -> np.ndarray:
        """a's speed over b's, request by request (b's seconds over a's, paired)."""
        return self._check(b) / self._check(a)

    def steps(self, name: str) -> int:
        """Engine steps over the timed requests: each step emits its accepted drafts and one token more."""
        return self.tokens * len(self._check(name)) - int(self.accepted[name])

    def step_ms(self, name: str) -> float:
        """Mean milliseconds per engine step (prefill included)."""
        return 1e3 * float(self._check(name).sum()) / self.steps(name)

    def tokens_per_step(self, name: str) -> float:
        return self.tokens * len(self._check(name)) / self.steps(name)


def measure(model, prompts: list, max_tokens: int, configs: dict, repeats: int = 2,
            engine_cores: int | None = None, dtype: str = "float32", kv_cache_gib: float = 1.0,
            timeout: float = 1800.0, python=None) -> Offline:
    """Time `configs` ({name: speculative_config dict, or None for plain}) in vLLM's offline engine, greedy,
    `max_tokens` tokens per request, each prompt (a list of token ids) `repeats` times per configuration.
    engine_cores: the CPU threads the engine computes with (None: every core; on 2 cores, 1 is what
    `vllm serve` gives its engine). Returns an Offline."""
    if not isinstance(configs, dict) or not configs:
        raise ValueError("configs: give a dict {name: speculative config or None}, at least one")
    if not prompts or not all(isinstance(p, list) and p and all(isinstance(t, int) for t in p)
                              for p in prompts):
        raise ValueError("prompts: give a non-empty list of token-id lists, each non-empty")
    job = {"model": str(model), "prompts": prompts, "configs": configs, "dtype": dtype,
           "max_tokens": checks.whole(max_tokens, "max_tokens", low=1, scalar=True),
           "repeats": checks.whole(repeats, "repeats", low=1, scalar=True)}
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_CPU_KVCACHE_SPACE=f"{kv_cache_gib:g}",
               VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    cores = os.cpu_count() or 1
    engine_cores = cores if engine_cores is None else checks.whole(engine_cores, "engine_cores", low=1,
                                                                    high=cores, scalar=True)
    env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(cores - engine_cores)  # vLLM leaves these to other work
    python = python or vllm_python()
    done = subprocess.run([str(python), "-m", "specnotes.vllm_offline"], input=json.dumps(job), text=True,
                          capture_output=True, env=env, timeout=timeout)
    line = next((x for x in done.stdout.splitlines() if x.startswith(MARK)), None)
    if done.returncode != 0 or line is None:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise ServerError(f"vLLM's offline engine failed (exit {done.returncode}); its last lines:\n{tail}")
    out = json.loads(line.removeprefix(MARK))
    return Offline(list(configs), out["seconds"], out["accepted"], job["max_tokens"], engine_cores)


def _accepted(llm) -> int:
    """Draft tokens kept so far. The counters are the process's, shared by every LLM in it: read them
    around each request."""
    return int(sum(m.value for m in llm.get_metrics() if m.name == "vllm:spec_decode_num_accepted_tokens"))


def _main() -> None:  # in the vLLM environment
    from vllm import LLM, SamplingParams

    job = json.loads(sys.stdin.read())
    names = list(job["configs"])
    llms = {name: LLM(job["model"], dtype=job["dtype"], enforce_eager=True, max_model_len=2048, seed=0,
                      speculative_config=spec, disable_log_stats=False)
            for name, spec in job["configs"].items()}
    params = SamplingParams(max_tokens=job["max_tokens"], temperature=0.0, ignore_eos=True)
    prompts = [{"prompt_token_ids": p} for p in job["prompts"]]
    for llm in llms.values():  # warm-up: one-time costs (the n-gram matcher's compilation, first allocations)
        llm.generate(prompts, params, use_tqdm=False)
    seconds, accepted = {name: [] for name in names}, dict.fromkeys(names, 0)
    turn = 0
    for _ in range(job["repeats"]):
        for prompt in prompts:
            for name in names[turn % len(names):] + names[:turn % len(names)]:
                before = _accepted(llms[name])
                start = time.perf_counter()
                llms[name].generate([prompt], params, use_tqdm=False)
                seconds[name].append(time.perf_counter() - start)
                accepted[name] += _accepted(llms[name]) - before
            turn += 1
    print(MARK + json.dumps({"seconds": seconds, "accepted": accepted}), flush=True)


if __name__ == "__main__":
    _main()
