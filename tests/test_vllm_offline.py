"""specnotes.vllm_offline against a stand-in for vLLM's offline engine: a package named vllm on PYTHONPATH
whose LLM counts steps and accepted drafts like the real one (one process-wide counter, as in vLLM), so the
real subprocess, the JSON job, the round-robin and the per-request bookkeeping run with no vLLM installed.
Notebook 09 runs the real engine."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import numpy as np
import pytest

from specnotes import vllm_offline
from specnotes.server import ServerError

FAKE = textwrap.dedent('''
    import json, os, time
    from collections import namedtuple

    Metric = namedtuple("Metric", "name value")
    ACCEPTED = [0]  # like vLLM's Prometheus registry: one per process, shared by every LLM in it
    CALLS = []

    class SamplingParams:
        def __init__(self, max_tokens, temperature, ignore_eos):
            assert temperature == 0.0 and ignore_eos
            self.max_tokens = max_tokens

    class LLM:
        def __init__(self, model, speculative_config=None, **kw):
            if os.environ.get("FAKE_DIE"):
                raise RuntimeError("fake vllm: planted failure at load")
            want = os.environ.get("FAKE_RESERVED")
            if want is not None and os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] != want:
                raise RuntimeError("reserved cpus " + os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"])
            self.k = (speculative_config or {}).get("num_speculative_tokens", 0)

        def generate(self, prompts, params, use_tqdm=False):
            for p in prompts:
                kept = params.max_tokens // 2 if self.k else 0  # a speculating step keeps one draft
                ACCEPTED[0] += kept
                CALLS.append((self.k, len(p["prompt_token_ids"])))
                time.sleep(0.0005 * (params.max_tokens - kept))
            if os.environ.get("FAKE_LOG"):
                with open(os.environ["FAKE_LOG"], "a") as f:
                    f.write(json.dumps([self.k, [len(p["prompt_token_ids"]) for p in prompts]]) + "\\n")

        def get_metrics(self):
            return [Metric("vllm:spec_decode_num_accepted_tokens", ACCEPTED[0]), Metric("vllm:other", 7)]
''')

NGRAM = {"method": "ngram", "num_speculative_tokens": 4}
PROMPTS = [[1, 2, 3], [4, 5, 6, 7], [8, 9]]


@pytest.fixture
def fake(tmp_path, monkeypatch):
    (tmp_path / "site" / "vllm").mkdir(parents=True)
    (tmp_path / "site" / "vllm" / "__init__.py").write_text(FAKE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    return tmp_path


def measure(**kw):
    args = dict(model="m", prompts=PROMPTS, max_tokens=20, configs={"plain": None, "ngram": NGRAM}, repeats=2,
                python=sys.executable, timeout=120)
    args.update(kw)
    return vllm_offline.measure(**args)


def test_each_configuration_is_credited_its_own_accepted_drafts_and_steps(fake):
    out = measure()
    assert out.names == ["plain", "ngram"] and out.tokens == 20
    assert [len(out.seconds[n]) for n in out.names] == [6, 6]  # repeats x prompts, every one timed
    # the counter is shared by both engines in the process: only reading it around each request splits it
    assert out.accepted == {"plain": 0, "ngram": 6 * 10}
    assert out.steps("plain") == 120 and out.steps("ngram") == 60
    assert out.tokens_per_step("plain") == 1.0 and out.tokens_per_step("ngram") == 2.0
    assert out.ratios("ngram", "plain").shape == (6,)
    assert np.isclose(out.rate("plain"), np.median(20 / np.array(out.seconds["plain"])))
    assert np.isclose(out.step_ms("ngram"), 1e3 * sum(out.seconds["ngram"]) / 60)


def test_every_prompt_goes_through_every_configuration_in_turn_after_a_warm_up(fake, tmp_path, monkeypatch):
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_LOG", str(log))
    measure(repeats=1)
    calls = [tuple(json.loads(line)) for line in log.read_text().splitlines()]  # [k, [prompt lengths]]
    assert calls[:2] == [(0, [3, 4, 2]), (4, [3, 4, 2])]  # the warm-up: every prompt, each engine
    timed = [(k, lengths[0]) for k, lengths in calls[2:]]
    assert timed == [(0, 3), (4, 3), (4, 4), (0, 4), (0, 2), (4, 2)]  # the order rotates prompt by prompt


def test_engine_cores_reserves_the_rest_for_the_engine_to_leave_alone(fake, monkeypatch):
    cores = os.cpu_count() or 1
    monkeypatch.setenv("FAKE_RESERVED", str(cores - 1))
    assert measure(engine_cores=1, repeats=1).engine_cores == 1
    monkeypatch.setenv("FAKE_RESERVED", "0")
    assert measure(repeats=1).engine_cores == cores


def test_a_failing_engine_shows_its_last_lines(fake, monkeypatch):
    monkeypatch.setenv("FAKE_DIE", "1")
    with pytest.raises(ServerError, match="planted failure at load"):
        measure()


@pytest.mark.parametrize("kw, name", [(dict(configs={}), "configs"), (dict(configs=[None]), "configs"),
                                      (dict(prompts=[]), "prompts"), (dict(prompts=[[]]), "prompts"),
                                      (dict(prompts=[[1, "a"]]), "prompts"),
                                      (dict(max_tokens=0), "max_tokens"), (dict(repeats=0), "repeats"),
                                      (dict(engine_cores=0), "engine_cores")])
def test_bad_arguments_are_named(kw, name):
    with pytest.raises(ValueError, match=name):
        measure(**kw)


def test_an_unknown_configuration_is_named(fake):
    out = measure(repeats=1)
    with pytest.raises(ValueError, match="'draft'"):
        out.rate("draft")
