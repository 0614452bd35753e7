"""The committed data (hardware catalog, prompts, trained drafters, reference runs) is found from a clone,
an editable install, a clone made without symlinks (as on Windows) and a non-editable install (Colab's)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import specnotes
from specnotes import paths
from tests.notebook_utils import ROOT

# Run by another interpreter, from outside the repository: what that install sees of the data.
PROBE = r"""
import json
import specnotes
from specnotes import distill, paths, references, roofline
from specnotes.training import distilled, eagle, early_exit, medusa
from specnotes.prompts import prompt_set

data = paths.data_dir()
drafters = [distilled.committed_path(), eagle.committed_path(), early_exit.committed_path(4),
            medusa.committed_path(3)]
print(json.dumps({
    "specnotes": specnotes.__file__,
    "data": str(data),
    "catalog": sorted(roofline.catalog()),
    "heldout": len(prompt_set("heldout")),
    "train_sequences": len(distill.sequences("train")[0]),
    "references": sorted(r["fingerprint"] for r in references.references()),
    "drafters_found": all(p.is_file() and p.stat().st_size > 1000 for p in drafters),
    "files": {p.relative_to(data).as_posix(): p.stat().st_size for p in data.rglob("*") if p.is_file()},
    "links": [p.as_posix() for p in data.rglob("*") if p.is_symlink()],
}))
"""


def probe(python: str | Path, cwd: Path, env: dict | None = None) -> dict:
    out = subprocess.run([str(python), "-c", PROBE], cwd=cwd, capture_output=True, text=True,
                         env={**os.environ, **(env or {})}, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def repo_data_files() -> dict[str, int]:
    data = ROOT / "data"
    return {p.relative_to(data).as_posix(): p.stat().st_size for p in data.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def assert_sees_all_the_data(seen: dict, inside: Path):
    assert Path(seen["specnotes"]).resolve().is_relative_to(inside.resolve()), seen["specnotes"]
    assert Path(seen["data"]).resolve().is_relative_to(inside.resolve()), seen["data"]
    assert {"H100 SXM", "T4"} <= set(seen["catalog"])
    assert seen["heldout"] > 0 and seen["train_sequences"] > 0
    assert seen["references"], "no reference run found"
    assert seen["drafters_found"], "a committed drafter's weights are missing"
    assert seen["links"] == []
    assert seen["files"] == repo_data_files()


def git(*args, cwd=ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


needs_git = pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                               reason="needs git and a git checkout")


def test_a_checkout_reads_the_repository_data_folder():
    assert paths.data_dir() == ROOT / "data"
    from specnotes import distill, references, roofline

    for path in (roofline.CATALOG_CSV, distill.DATA, references.REFERENCES):
        assert path.exists() and path.is_relative_to(paths.data_dir()), path


@needs_git
def test_no_file_in_the_repository_is_a_symlink():
    # a clone without symlinks (git's default on Windows) turns each one into a small text file
    links = [line.split("\t")[1] for line in git("ls-files", "-s").splitlines() if line.startswith("120000")]
    assert links == []


@needs_git
def test_a_clone_without_symlinks_reads_the_data(tmp_path):
    clone = tmp_path / "clone"
    git("-c", "core.symlinks=false", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone), cwd=tmp_path)
    # the clone's own package first on sys.path, ahead of this checkout's editable install
    seen = probe(sys.executable, tmp_path, env={"PYTHONPATH": str(clone)})
    assert Path(seen["specnotes"]).is_relative_to(clone) and Path(seen["data"]) == clone / "data"
    assert {"H100 SXM", "T4"} <= set(seen["catalog"]) and seen["heldout"] > 0 and seen["references"]
    assert seen["drafters_found"] and seen["links"] == []
    assert {f"data/{name}" for name in seen["files"]} == set(git("ls-files", "data", cwd=clone).splitlines())


def test_a_non_editable_install_carries_the_data_inside_the_package(tmp_path):
    """`pip install .` (as the Colab cell's `pip install git+...` does) into a fresh venv, then the data
    is read from outside the repository. Offline: no build isolation, no index, no dependencies."""
    pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True)
    if pip.returncode != 0:
        pytest.skip("this Python has no pip to build the wheel with")
    src = tmp_path / "src"  # build from a copy so the checkout gets no build/ or egg-info
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "NOTICE"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    shutil.copytree(ROOT / "specnotes", src / "specnotes", ignore=ignore, symlinks=True)
    shutil.copytree(ROOT / "data", src / "data", ignore=ignore)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the dependencies (torch, numpy, ...) come from this environment, listed after the venv's own
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         "--no-build-isolation", "--no-index", "--disable-pip-version-check", str(src)],
        capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]

    seen = probe(python, tmp_path)
    assert_sees_all_the_data(seen, Path(site))
    assert Path(seen["data"]) == Path(site) / "specnotes" / "data"


def test_every_module_file_is_an_attribute_of_the_package():
    package = Path(specnotes.__file__).parent
    names = {p.stem for p in package.glob("*.py") if not p.name.startswith("_")}
    names |= {p.parent.name for p in package.glob("*/__init__.py")}
    assert {"tree", "serving", "numerics", "adaptive", "mtp", "drafters", "paths"} <= names
    for name in sorted(names):
        module = getattr(specnotes, name)
        assert module.__name__ == f"specnotes.{name}"
    assert names <= set(dir(specnotes))
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        specnotes.nonexistent  # noqa: B018
