"""The widget notebooks as people use them: real JupyterLab, driven in headless Chromium by Playwright.

`make test` runs this (and `make test-browser` runs it alone). The lab serves a scratch copy of the
notebooks, so nothing it autosaves touches the repository. Screenshots land in build/browser/.
Chromium comes from Debian (`.ci/install-chromium`); Playwright's own browser download is never used.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
        if os.environ.get("CI"):
            pytest.fail(f"the browser test must run in CI, but {why}")
        pytest.skip(f"browser test skipped: {why}")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a free loopback port with a random token, serving a copy of notebooks/."""
    chromium = _chromium()
    shutil.rmtree(ARTIFACTS, ignore_errors=True)  # this run's screenshots only
    home = tmp_path_factory.mktemp("lab")
    served = home / "notebooks"
    shutil.copytree(ROOT / "notebooks", served, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    settings = home / "settings"
    for name, value in LAB_SETTINGS.items():
        plugin, file = name.rsplit("/", 1)
        (settings / plugin).mkdir(parents=True, exist_ok=True)
        (settings / plugin / file).write_text(json.dumps(value))
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"), JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    env.pop("MPLBACKEND", None)  # a person's kernel draws inline, not to Agg
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={served}",
           "--ServerApp.port_retries=0", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "getuid") and os.getuid() == 0:
        cmd.append("--allow-root")
    log = (home / "lab.log").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"JupyterLab did not start; its log:\n{(home / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.5)
    yield {"url": url, "token": token, "chromium": chromium}
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=lab["chromium"], headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _open_and_run_all(browser, lab, name: str):
    """Open a notebook in JupyterLab, run all cells from the Run menu, wait until every cell ran."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{lab['url']}/lab/tree/{name}?reset&token={lab['token']}")  # reset: no tabs restored
    page.wait_for_selector(f"{NB} .jp-Cell", timeout=60_000)
    # the status bar says "Idle" once the kernel is connected; a run queued before that can be dropped
    page.locator(".jp-StatusBar-TextItem", has_text="Idle").first.wait_for(timeout=90_000)
    started = """(NB) => [...document.querySelectorAll(NB + ' .jp-CodeCell .jp-InputPrompt')]
                     .some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))"""
    for attempt in range(3):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        try:
            page.wait_for_function(started, arg=NB, timeout=30_000, polling=250)
            break
        except Exception:
            if attempt == 2:
                raise
    cells = json.loads((ROOT / "notebooks" / name).read_text())["cells"]
    n_code = sum(c["cell_type"] == "code" for c in cells)
    # every code cell has an execution count and none is still queued or running
    try:
        page.wait_for_function(
            """([n, NB]) => {
                const prompts = [...document.querySelectorAll(NB + ' .jp-CodeCell .jp-InputPrompt')]
                    .map(e => e.textContent.trim());
                return prompts.length === n && prompts.every(t => /^\\[\\d+\\]:$/.test(t));
            }""", arg=[n_code, NB], timeout=RUN_ALL_TIMEOUT_S * 1000, polling=500)
    except Exception as exc:
        _shot(page, f"{name.removesuffix('.ipynb')}_FAILED.png", check=False)
        prompts = page.locator(f"{NB} .jp-CodeCell .jp-InputPrompt").all_inner_texts()
        shown = page.locator(".jp-OutputArea-output[data-mime-type*='error'], "
                             ".jp-OutputArea-output[data-mime-type*='stderr']").all_inner_texts()
        raise AssertionError(f"{name}: not every cell ran within {RUN_ALL_TIMEOUT_S} s; prompts {prompts} "
                             f"({n_code} code cells); errors shown: {[t[-1500:] for t in shown]}") from exc
    failed = page.locator(f"{NB} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                          has_text="Traceback")
    assert failed.count() == 0, f"{name}: a cell raised:\n{failed.first.inner_text()[:2000]}"
    return page, errors


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


def _wait_changed(page, get, before: str, what: str, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = get()
        if now and now != before:
            return now
        page.wait_for_timeout(250)
    raise AssertionError(f"{what} did not change within {timeout_s:.0f} s after the slider moved")


def _shot(page, name: str, check: bool = True) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=False)
    assert not check or path.stat().st_size > 10_000, f"screenshot {path} is suspiciously small"
    return path


def test_speedup_explorer_sliders_move_plot_and_best_k(browser, lab):
    page, errors = _open_and_run_all(browser, lab, "05_speedup_math.ipynb")
    widget = page.locator(".widget-vbox", has=page.locator(".widget-label", has_text="α acceptance")).first
    readout = widget.locator(".widget-html-content").first
    output = widget.locator(".widget-output").first
    alpha_slider, alpha_handle, alpha_value = _slider(page, "α acceptance")
    k_slider, k_handle, k_value = _slider(page, "k drafted")
    widget.scroll_into_view_if_needed()
    text0, plot0, a0 = readout.inner_text(), _plot_src(output), alpha_value.inner_text()
    assert "best k=" in text0, text0
    _settle(page, output)
    _shot(page, "05_speedup_explorer_before.png")

    _drag_to(page, alpha_slider, alpha_handle, 0.92)  # α 0.80 -> about 0.91: best k and the curve move
    a1 = _wait_changed(page, alpha_value.inner_text, a0, "the α readout")
    text1 = _wait_changed(page, readout.inner_text, text0, "the best-k readout")
    plot1 = _wait_changed(page, lambda: _plot_src(output), plot0, "the speedup plot")
    best = [t.split("best k=")[1].split()[0] for t in (text0, text1) if "best k=" in t]
    assert float(a1) > float(a0), (a0, a1)
    assert len(best) == 2 and best[0] != best[1], f"best k did not move: {text0!r} -> {text1!r}"
    assert 0.85 < float(a1) < 0.97, a1
    _settle(page, output)
    _shot(page, "05_speedup_explorer_alpha_moved.png")

    k0 = k_value.inner_text()
    _drag_to(page, k_slider, k_handle, 0.4)
    k1 = _wait_changed(page, k_value.inner_text, k0, "the k readout")
    assert int(k1) > int(k0), (k0, k1)
    deadline = time.monotonic() + 30  # the readout follows the slider's final value
    while f"at k={int(k1)} " not in readout.inner_text():
        assert time.monotonic() < deadline, f"the readout never showed k={k1}: {readout.inner_text()!r}"
        page.wait_for_timeout(250)
    _wait_changed(page, lambda: _plot_src(output), plot1, "the speedup plot after moving k")
    _settle(page, output)
    _shot(page, "05_speedup_explorer_k_moved.png")
    assert not errors, f"JavaScript errors in the page: {errors}"
    page.close()


def test_roofline_calculator_slider_moves_plot_and_readout(browser, lab):
    page, errors = _open_and_run_all(browser, lab, "01_roofline.ipynb")
    widget = page.locator(".widget-vbox", has=page.locator(".widget-label", has_text="parameters")).first
    readout = widget.locator(".widget-html-content").first
    output = widget.locator(".widget-output").first
    slider, handle, value = _slider(page, "k drafted")
    widget.scroll_into_view_if_needed()
    text0, plot0, k0 = readout.inner_text(), _plot_src(output), value.inner_text()
    _settle(page, output)
    _shot(page, "01_roofline_calculator_before.png")
    _drag_to(page, slider, handle, 0.6)
    k1 = _wait_changed(page, value.inner_text, k0, "the k readout")
    _wait_changed(page, readout.inner_text, text0, "the roofline readout")
    _wait_changed(page, lambda: _plot_src(output), plot0, "the roofline plot")
    assert int(k1) > int(k0)
    _settle(page, output)
    _shot(page, "01_roofline_calculator_k_moved.png")
    assert not errors, f"JavaScript errors in the page: {errors}"
    page.close()
