"""The widget notebooks as people use them: real JupyterLab, driven in headless Chromium by Playwright.

`make test` runs this (and `make test-browser` runs it alone). The lab serves a scratch copy of the
notebooks, so nothing it autosaves touches the repository. Screenshots land in build/browser/.
Chromium comes from Debian (`.ci/install-chromium`); Playwright's own browser download is never used.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.notebook_utils import ROOT, cells

ARTIFACTS = Path(os.environ.get("SPECNOTES_BROWSER_ARTIFACTS", ROOT / "build" / "browser"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
NB = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"  # the notebook in the visible tab
RUN_ALL_TIMEOUT_S = float(os.environ.get("SPECNOTES_BROWSER_TIMEOUT", "240"))
# JupyterLab user settings for the test: no news or update pop-ups over the screenshots, and every
# cell kept in the page (the default windowing drops off-screen cells from the DOM)
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def _chromium() -> str:
    path = (os.environ.get("SPECNOTES_CHROMIUM") or shutil.which("chromium")
            or shutil.which("chromium-browser"))
    why = None
    if not path:
        why = "no Chromium on PATH (Debian/Ubuntu: `apt-get install chromium`, or run .ci/install-chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            why = "the playwright package is not installed (`pip install -e '.[dev]'`)"
    if why:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"the browser test must run in CI, but {why}")
        pytest.skip(f"browser test skipped: {why}")
    return path


def _strip(path: Path) -> None:
    """No saved outputs or execution counts: every prompt number the test sees comes from this run."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.write(nb, path)


def _start_lab(home: Path, served: Path, env: dict, token: str):
    """(process, url), retrying on another free port if the chosen one was taken meanwhile."""
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={served}",
           "--ServerApp.port_retries=0", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "getuid") and os.getuid() == 0:
        cmd.append("--allow-root")
    for _ in range(3):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        with (home / "lab.log").open("w") as log:
            proc = subprocess.Popen([*cmd, f"--port={port}"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)  # its own process group, kernels included
        url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 90
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                return proc, url
            except OSError:
                time.sleep(0.5)
        _stop(proc)
    pytest.fail(f"JupyterLab did not start; its log:\n{(home / 'lab.log').read_text()[-3000:]}")


def _stop(proc) -> None:
    """Stop the server and every kernel it started."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a free loopback port with a random token, serving a stripped copy of
    notebooks/ with its own settings, config and data folders (nothing of the user's is read)."""
    chromium = _chromium()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):  # this run's screenshots only
        old.unlink()
    home = tmp_path_factory.mktemp("lab")
    served = home / "notebooks"
    shutil.copytree(ROOT / "notebooks", served, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for path in served.glob("*.ipynb"):
        _strip(path)
    settings = home / "settings"
    for name, value in LAB_SETTINGS.items():
        plugin, file = name.rsplit("/", 1)
        (settings / plugin).mkdir(parents=True, exist_ok=True)
        (settings / plugin / file).write_text(json.dumps(value))
    token = secrets.token_hex(16)
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"))
    env.pop("MPLBACKEND", None)  # a person's kernel draws inline, not to Agg
    proc, url = _start_lab(home, served, env, token)
    try:
        yield {"url": url, "token": token, "chromium": chromium}
    finally:
        _stop(proc)
        shutil.copy(home / "lab.log", ARTIFACTS / "lab.log")


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=lab["chromium"], headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@contextlib.contextmanager
def _page(browser, lab, stem: str):
    """A page that talks only to the lab (badge images and the like are refused, as offline), with a
    screenshot saved if the test fails inside it."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    origin = lab["url"]
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(origin)
                  else route.abort())
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    try:
        yield page
    except BaseException:
        with contextlib.suppress(Exception):
            _shot(page, f"{stem}_FAILED.png", check=False)
        raise
    finally:
        context.close()


def _run_all(page, lab, name: str) -> None:
    """Open a notebook in JupyterLab, run all cells from the Run menu, wait until every cell ran."""
    page.goto(f"{lab['url']}/lab/tree/{name}?reset&token={lab['token']}")  # reset: no tabs restored
    page.wait_for_selector(f"{NB} .jp-Cell", timeout=60_000)
    # the status bar says "Idle" once the kernel is connected; a run queued before that can be dropped
    page.locator(".jp-StatusBar-TextItem", has_text="Idle").first.wait_for(timeout=90_000)
    started = """(NB) => [...document.querySelectorAll(NB + ' .jp-CodeCell .jp-InputPrompt')]
                     .some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))"""
    for attempt in range(3):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()
        try:
            page.wait_for_function(started, arg=NB, timeout=30_000, polling=250)
            break
        except Exception:
            if attempt == 2:
                raise
    n_code = sum(c["cell_type"] == "code" for c in cells(ROOT / "notebooks" / name))
    # a fresh kernel numbers the cells 1..n; all n numbered means none is queued or running
    try:
        page.wait_for_function(
            """([n, NB]) => {
                const counts = [...document.querySelectorAll(NB + ' .jp-CodeCell .jp-InputPrompt')]
                    .map(e => (e.textContent.match(/^\\[(\\d+)\\]:$/) || [])[1]).filter(Boolean).map(Number);
                return counts.length === n && new Set(counts).size === n && Math.max(...counts) === n;
            }""", arg=[n_code, NB], timeout=RUN_ALL_TIMEOUT_S * 1000, polling=500)
    except Exception as exc:
        prompts = page.locator(f"{NB} .jp-CodeCell .jp-InputPrompt").all_inner_texts()
        shown = page.locator(f"{NB} .jp-OutputArea-output[data-mime-type*='error'], "
                             f"{NB} .jp-OutputArea-output[data-mime-type*='stderr']").all_inner_texts()
        raise AssertionError(f"{name}: not every cell ran within {RUN_ALL_TIMEOUT_S:.0f} s; "
                             f"prompts {prompts} "
                             f"({n_code} code cells); errors shown: {[t[-1500:] for t in shown]}") from exc
    failed = page.locator(f"{NB} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                          has_text="Traceback")
    assert failed.count() == 0, f"{name}: a cell raised:\n{failed.first.inner_text()[:2000]}"


def _slider(page, label: str):
    """The ipywidgets slider whose description is `label` (ipywidgets 8 noUiSlider or 7 jQuery UI)."""
    box = page.locator(".widget-slider", has=page.locator(".widget-label", has_text=label)).first
    box.scroll_into_view_if_needed()
    return box, box.locator(".noUi-handle, .ui-slider-handle").first, box.locator(".widget-readout").first


def _plot_src(output) -> str:
    img = output.locator("img").first
    img.wait_for(timeout=30_000)
    return img.get_attribute("src") or ""


def _drag_to(page, slider, handle, fraction: float) -> None:
    """Drag the handle with the mouse to `fraction` of the slider's track, as a person would."""
    track = slider.locator(".noUi-target, .ui-slider").first.bounding_box()
    box = handle.bounding_box()
    assert box is not None and track is not None, "slider handle is not visible"
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    to = track["x"] + fraction * track["width"]
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move((x + to) / 2, y, steps=4)
    page.mouse.move(to, y, steps=4)
    page.mouse.up()


def _settle(page, output) -> None:
    """Wait until the kernel is idle and the plot image has finished loading (for a true screenshot)."""
    page.locator(".jp-StatusBar-TextItem", has_text="Idle").first.wait_for(timeout=60_000)
    page.wait_for_function("(img) => img && img.complete && img.naturalWidth > 0",
                           arg=output.locator("img").first.element_handle(), timeout=30_000)


def _wait_for(page, get, ok, what: str, timeout_s: float = 30) -> str:
    """Poll get() until ok(value); fail naming `what`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = get()
        if ok(value):
            return value
        page.wait_for_timeout(250)
    raise AssertionError(f"{what} (last seen: {get()!r}) within {timeout_s:.0f} s after the slider moved")


def _settled_value(page, readout) -> str:
    """The slider's own readout once it has stopped moving (a drag passes through in-between values)."""
    last, same_since = readout.inner_text(), time.monotonic()
    while time.monotonic() - same_since < 1.0:
        page.wait_for_timeout(200)
        now = readout.inner_text()
        if now != last:
            last, same_since = now, time.monotonic()
    return last


def _shot(page, name: str, check: bool = True) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=False)
    assert not check or path.stat().st_size > 10_000, f"screenshot {path} is suspiciously small"
    return path


def _widget(page, label: str):
    """(readout HTML, plot output) of the explorer whose controls include `label`."""
    box = page.locator(".widget-vbox", has=page.locator(".widget-label", has_text=label)).first
    box.scroll_into_view_if_needed()
    return box.locator(".widget-html-content").first, box.locator(".widget-output").first


def _move(page, label: str, fraction: float, readout, output, expect) -> tuple[str, str, str]:
    """Drag slider `label`; wait until the explorer's readout shows expect(final value) and the kernel
    has redrawn the plot. Returns (final value, readout text, plot src)."""
    slider, handle, value = _slider(page, label)
    before_value, before_plot = value.inner_text(), _plot_src(output)
    _drag_to(page, slider, handle, fraction)
    final = _settled_value(page, value)
    assert final != before_value, f"the {label} slider did not move ({before_value!r})"
    text = _wait_for(page, readout.inner_text, lambda t: expect(final) in t,
                     f"the readout never showed {expect(final)!r}")
    _settle(page, output)
    plot = _plot_src(output)
    assert plot != before_plot, f"the plot did not change after moving {label}"
    return final, text, plot


def test_speedup_explorer_sliders_move_plot_and_best_k(browser, lab):
    with _page(browser, lab, "05_speedup_explorer") as page:
        _run_all(page, lab, "05_speedup_math.ipynb")
        readout, output = _widget(page, "α acceptance")
        _settle(page, output)
        text0 = readout.inner_text()
        assert text0.startswith("α=0.80, c=0.05: at k=4 ") and "best k=" in text0, text0
        _shot(page, "05_speedup_explorer_before.png")

        # α 0.80 -> about 0.91: the best k moves with it, and so does the curve
        alpha, text1, _ = _move(page, "α acceptance", 0.92, readout, output, lambda a: f"α={float(a):.2f}, ")
        assert 0.85 < float(alpha) < 0.97, alpha
        best = [t.split("best k=")[1].split()[0] for t in (text0, text1)]
        assert best[0] != best[1], f"best k did not move: {text0!r} -> {text1!r}"
        _shot(page, "05_speedup_explorer_alpha_moved.png")

        k, text2, _ = _move(page, "k drafted", 0.4, readout, output, lambda k: f"at k={int(k)} ")
        assert int(k) > 4 and text2.startswith(f"α={float(alpha):.2f}, "), (k, text2)
        _shot(page, "05_speedup_explorer_k_moved.png")
        assert not page.errors, f"JavaScript errors in the page: {page.errors}"


def test_roofline_calculator_slider_moves_plot_and_readout(browser, lab):
    with _page(browser, lab, "01_roofline_calculator") as page:
        _run_all(page, lab, "01_roofline.ipynb")
        readout, output = _widget(page, "parameters")
        _settle(page, output)
        assert "verifying k+1 = 5 tokens" in readout.inner_text(), readout.inner_text()
        _shot(page, "01_roofline_calculator_before.png")
        k, _, _ = _move(page, "k drafted", 0.6, readout, output,
                        lambda k: f"verifying k+1 = {int(k) + 1} tokens")
        assert int(k) > 4, k
        _shot(page, "01_roofline_calculator_k_moved.png")
        assert not page.errors, f"JavaScript errors in the page: {page.errors}"
