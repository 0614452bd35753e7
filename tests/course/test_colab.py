"""The Colab mimic: a fresh environment with Colab's preinstalled stack (.ci/colab-stack.txt), where
only the guarded install cell of notebook 00, run as it stands, installs specnotes. Then notebook 00
runs top to bottom, and every widget is built and redrawn under Colab's ipywidgets 7.

The cell's `%pip install "specnotes @ git+https://github.com/<repo>"` is sent to this repository's
committed HEAD through git's `url.<base>.insteadOf` (CI runs a clean clone of main, so HEAD is what is
tested). The guard installs wherever specnotes cannot be imported (Colab, Kaggle, Binder); a cheap
test runs it with and without specnotes importable. `google.colab` is a stub package imported at
start-up, as on Colab, so `specnotes.setup()` sees a Colab runtime.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import notebook_utils
from tests.notebook_utils import ROOT, cells, source

STACK = ROOT / ".ci" / "colab-stack.txt"
NB00 = ROOT / "notebooks" / "00_start_here.ipynb"
INSTALL = re.compile(r'^\s*%pip install (?P<args>.*"specnotes @ git\+(?P<url>https://github\.com/[\w.-]+/[\w.-]+)".*)$',
                     re.M)
GUARD = 'if importlib.util.find_spec("specnotes") is None:'

TORCH_INDEX = os.environ.get("TORCH_INDEX", "https://download.pytorch.org/whl/cpu")


def install_cell() -> tuple[str, str]:
    """(the install cell's source, the git URL it installs from)."""
    for cell in cells(NB00):
        m = INSTALL.search(source(cell))
        if cell["cell_type"] == "code" and m:
            return source(cell), m["url"]
    raise AssertionError("notebook 00 has no guarded `%pip install \"specnotes @ git+...\"` cell")


def test_install_cell_is_guarded_and_points_at_this_repo():
    cell, url = install_cell()
    assert GUARD in cell  # never reinstall anything where specnotes is already importable
    assert "!pip" not in cell  # `!pip` may install into another Python than the kernel's
    assert "--upgrade" not in cell and " -U" not in cell  # would replace the runtime's own packages
    assert url == f"https://github.com/{notebook_utils.notebook_nav().REPO}"  # badges and install agree


def _run_guarded_cell(tmp_path, importable: bool) -> list:
    """The install cell, as IPython turns it into Python, run in a bare Python (no site-packages) with a
    stand-in shell that records the magics instead of running pip. Returns the recorded magics."""
    from IPython.core.inputtransformer2 import TransformerManager

    cell, _ = install_cell()
    shell = textwrap.dedent("""
        import json
        calls = []
        class Shell:
            def run_line_magic(self, name, line):
                calls.append([name, line])
        def get_ipython():
            return Shell()
    """)
    code = shell + TransformerManager().transform_cell(cell) + "\nprint(json.dumps(calls))\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    if importable:
        env["PYTHONPATH"] = str(ROOT)  # specnotes importable from the checkout, as after `make lab`
    return json.loads(_run([sys.executable, "-S", "-c", code], env=env, cwd=tmp_path).splitlines()[-1])


def test_install_cell_installs_only_where_specnotes_is_missing(tmp_path):
    assert _run_guarded_cell(tmp_path, importable=True) == []
    (magic, line), = _run_guarded_cell(tmp_path, importable=False)
    assert magic == "pip" and line.startswith("install ") and '"specnotes @ git+https://github.com/' in line


def venv_site(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(_run([str(python), "-c", code]).strip())


def _run(cmd, env=None, timeout=900, **kw) -> str:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kw)
    if done.returncode:
        raise AssertionError(f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def _versions(python: Path) -> dict[str, str]:
    """Every installed distribution and its version."""
    code = ("import importlib.metadata as m, json; "
            "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))")
    # from a neutral folder: run from the repo, the repo's own specnotes.egg-info would be listed
    return json.loads(_run([str(python), "-c", code], cwd=python.parent).strip().splitlines()[-1])


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.skip("git is needed to run the install cell's git+https URL")
    home = tmp_path_factory.mktemp("colab")
    venv = home / "venv"
    started = time.monotonic()
    _run([sys.executable, "-m", "venv", str(venv)])  # this Python: see .ci/colab-stack.txt
    py, bindir = venv / "bin" / "python", venv / "bin"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    # the preinstalled stack, as Colab has it before the notebook runs. torch first, as the Makefile
    # does: on Linux the constraints pick the CPU build (PyPI's default there is a CUDA build of
    # several GB), from a local wheel folder or PyTorch's CPU index
    constraints = ["-c", str(ROOT / ".ci" / "constraints.txt")]
    _run([*pip, "--retries", "1", *constraints, "--extra-index-url", TORCH_INDEX, "torch"], timeout=1200)
    _run([*pip, *constraints, "-r", str(STACK)], timeout=1200)
    stub = home / "stub" / "google" / "colab"  # `google` stays a namespace package, as on Colab
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text('"""A stand-in: its presence is what the guard tests."""\n')
    # Colab's kernel has google.colab imported before the first cell runs
    (stub.parent.parent / "sitecustomize.py").write_text("import google.colab  # noqa: F401\n")
    _, url = install_cell()
    gitconfig = home / "gitconfig"
    gitconfig.write_text(f'[url "{ROOT.as_uri()}"]\n\tinsteadOf = {url}\n[safe]\n\tdirectory = *\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env.update(PATH=f"{bindir}{os.pathsep}{env['PATH']}", PYTHONPATH=str(home / "stub"),
               GIT_CONFIG_GLOBAL=str(gitconfig), GIT_CONFIG_NOSYSTEM="1", SPECNOTES_QUICK="1",
               MPLBACKEND="module://matplotlib_inline.backend_inline", PIP_DISABLE_PIP_VERSION_CHECK="1")
    before = _versions(py)
    version = _run([str(py), "-c", "import sys; print(sys.version.split()[0])"]).strip()
    shown = {n: before.get(n) for n in ("torch", "transformers", "ipywidgets", "ipython", "ipykernel")}
    print(f"Colab mimic: Python {version}, {len(before)} packages, {shown}, built in "
          f"{time.monotonic() - started:.0f} s")
    # notebook 00 as it stands: its first cell installs specnotes, the rest must then just work
    out = home / "00_start_here.ipynb"
    runner = textwrap.dedent(f"""
        import nbformat
        from nbclient import NotebookClient
        nb = nbformat.read({str(NB00)!r}, as_version=4)
        NotebookClient(nb, timeout=900, kernel_name="python3",
                       resources={{"metadata": {{"path": {str(home)!r}}}}}).execute()
        nbformat.write(nb, {str(out)!r})
    """)
    _run([str(py), "-c", runner], env=env, timeout=1200, cwd=home)  # not the repo: import what pip put
    return {"home": home, "python": py, "env": env, "before": before, "after": _versions(py),
            "notebook": json.loads(out.read_text())}


def test_notebook_00_runs_after_the_install_cell(colab):
    nb_cells = colab["notebook"]["cells"]
    errors = [o for c in nb_cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    code = [c for c in nb_cells if c["cell_type"] == "code"]
    assert all(c["execution_count"] for c in code)
    # specnotes came from the install cell: it lives in the mimic's site-packages
    where = _run([str(colab["python"]), "-c", "import specnotes; print(specnotes.__file__)"],
                 env=colab["env"], cwd=colab["home"])
    assert Path(where.strip()).is_relative_to(venv_site(colab["python"])), where


def test_install_cell_keeps_colabs_preinstalled_stack(colab):
    before, after = colab["before"], colab["after"]
    changed = {name: (v, after.get(name)) for name, v in before.items() if after.get(name) != v}
    assert not changed, f"installing specnotes replaced or removed Colab's packages: {changed}"
    assert "specnotes" in set(after) - set(before)


def test_widgets_draw_and_redraw_under_colabs_ipywidgets(colab):
    code = textwrap.dedent("""
        import ipywidgets
        from specnotes import widgets
        assert ipywidgets.__version__.startswith("7."), ipywidgets.__version__
        box = widgets.speedup_explorer()
        before = box.readout.value
        box.sliders["alpha"].value = 0.95
        assert box.readout.value != before and "best k=" in box.readout.value
        calc = widgets.roofline_calculator()
        before = calc.readout.value
        calc.controls["k"].value = 12
        assert calc.readout.value != before
        serving = widgets.serving_explorer()
        before = serving.readout.value
        serving.controls["k"].value = 8
        assert serving.readout.value != before
        print("widgets ok under ipywidgets", ipywidgets.__version__)
    """)
    assert "widgets ok" in _run([str(colab["python"]), "-c", code], env=colab["env"], cwd=colab["home"])
