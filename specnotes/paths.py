"""Where the committed data lives: hardware catalog, prompt sets, trained drafters, reference runs.

Every module, tool and test asks `data_dir()`, so a clone, an editable install and a wheel all find them.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir() -> Path:
    """The data folder: `specnotes/data` inside an installed wheel, else the repository's `data/`.

    The repository keeps one copy, in `data/` at its top; building a wheel copies it into the package
    (setup.py), and a clone or an editable install reads it in place. The package's own copy is taken
    only when it is a real folder with the drafters in it, so nothing left over from the old symlinks
    (or their text-file stand-ins on a clone without symlinks) can shadow the repository's folder."""
    bundled = _PACKAGE / "data"
    drafters = bundled / "drafters"
    if drafters.is_dir() and not (bundled.is_symlink() or drafters.is_symlink()):
        return bundled
    return _PACKAGE.parent / "data"


def write_atomic(path, data: str | bytes) -> Path:
    """Write text or bytes to `path` so a reader sees the old file or the new one, never half of one:
    into a temporary sibling first, flushed to disk, then renamed over the target (os.replace is atomic
    on every OS). The temporary file is removed if anything fails."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
