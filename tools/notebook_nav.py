"""Write each notebook's generated parts: the header (Colab badge, prev/next links, objectives,
prerequisites and time), the install cell (the first code cell), the footer (the next-notebook link)
and, for the notebooks that want a GPU, Colab's runtime metadata. tests/course/test_nav.py checks them.

Usage: python tools/notebook_nav.py          rewrite those parts in every notebook (outputs untouched)
       python tools/notebook_nav.py --check  exit 1 and name the notebooks whose parts are out of date

Edit the GUIDE table, INSTALL and COLAB_GPU below, never the generated cells: the next run would
overwrite them.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import NamedTuple

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = "notebooks"
REPO = "specnotes/specnotes"  # GitHub owner/name: the Colab badges and the install cell use it
BRANCH = "main"
BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
HEADER_ID, FOOTER_ID = "nav-header", "nav-footer"

# The first code cell of every notebook. It installs only where specnotes cannot be imported (Colab,
# Kaggle, Binder, any bare kernel), so it never touches a `make lab` environment. Without --upgrade,
# pip keeps every installed package that already meets specnotes' requirements (pyproject gives
# lower bounds), so the runtime's own torch, transformers and ipywidgets stay; tests/course/test_colab.py
# checks that in a copy of Colab's stack. `%pip`, not `!pip`: it installs into the kernel's Python.
INSTALL = f"""\
# Installs specnotes where it is missing (Colab, Kaggle, Binder). Where it is installed already, as
# after `make lab`, this does nothing. pip upgrades nothing that already meets specnotes' needs, so
# the runtime keeps its own torch, transformers and ipywidgets.
import importlib.util

if importlib.util.find_spec("specnotes") is None:
    %pip install -q "specnotes @ git+https://github.com/{REPO}"
    importlib.invalidate_caches()"""
INSTALL_MARK = "specnotes @ git+"  # how apply() recognizes an install cell it is about to rewrite

# The notebooks whose timings and training want a GPU. Colab reads this notebook metadata (what it
# saves after Runtime > Change runtime type > T4 GPU) and opens them on a T4 runtime.
COLAB_GPU = {"06_drafters", "07_live_timings", "08_production", "09_vllm_serving"}
COLAB_GPU_METADATA = {"accelerator": "GPU", "colab": {"gpuType": "T4", "provenance": []}}


class Guide(NamedTuple):
    title: str             # the heading after "NN · "
    short: str             # link text for prev/next
    objectives: tuple      # what the learner will be able to do
    prerequisites: str
    minutes_cpu_full: int | None  # measured by `make notebooks` on 2 CPU cores; None: not timed yet
    minutes_reading: int   # reading, running and the exercises, at a learner's pace
    blurb: str             # one line for the previous notebook's "Next" link
    quick_minutes: float = 1  # quick mode's time on 2 CPU cores, at most


GUIDE = {
    "00_start_here": Guide(
        "Start here", "Start here",
        ("check that your environment is ready (versions, device, threads, quick mode)",
         "load SmolLM2-135M-Instruct offline and generate from it",
         "see why plain decoding costs one full forward pass per token"),
        "Python and a little PyTorch. No GPU and no network needed once `make lab` has run.",
        1, 20, "environment check, the offline model, one token per forward pass"),
    "01_roofline": Guide(
        "Why decode is memory-bound", "Roofline",
        ("compute a decode step's bytes, FLOPs and time bound for any model and GPU",
         "find the ridge point where a pass stops being memory-bound",
         "measure on your own machine that extra positions in one pass are nearly free"),
        "notebook 00.",
        1, 25, "why one decode pass costs what it costs, and why checking 8 tokens costs far less "
        "than 8 passes"),
    "02_draft_and_verify": Guide(
        "Draft and verify: the loop on a real model, traced token by token", "Draft and verify",
        ("run one round of speculative decoding by hand, then the next, and read what each did",
         "run the draft-and-verify loop on a real model with two drafters",
         "read a token trace: accepted, corrected and bonus tokens",
         "see the KV cache rolled back after a rejection, and the k + 1 distributions of one pass"),
        "notebooks 00 and 01.",
        1, 30, "the loop itself on the real model, traced token by token", quick_minutes=2),
    "03_rejection_sampling": Guide(
        "Rejection sampling: why speculative decoding is exact", "Rejection sampling",
        ("state the accept/reject rule and the residual distribution",
         "prove the rule exact by enumeration in fractions, and check it by converging statistics",
         "see how a subtly wrong residual biases the output, and why greedy is a special case",
         "run block verification, an exact rule that judges the draft as a block, and count what it keeps"),
        "notebook 02; basic probability (distributions, conditional probability).",
        1, 40, "why the sampled output is exactly the target's distribution"),
    "04_bug_zoo": Guide(
        "The bug zoo: sampler mistakes, planted one at a time, and the checks that catch them", "Bug zoo",
        ("recognize common sampler mistakes, most taken from public projects, and the lossy knobs engines "
         "ship",
         "run the two checks (exact enumeration and a χ² test) that catch each one",
         "tell a bug that changes the output from one that only costs speed"),
        "notebook 03.",
        1, 30, "sampler mistakes planted one at a time, and the checks that catch each"),
    "05_speedup_math": Guide(
        "The speedup math: tokens per pass, draft cost, and the best k", "Speedup math",
        ("derive the expected tokens per target pass and check it against simulation",
         "predict the speedup from α, k and c, and find the best k with sliders",
         "measure a real draft's cost c, and handle an α that depends on the position",
         "price a parallel drafter's one pass per round against k chain steps, and find the α that 1.4× "
         "needs from this machine's measured verify cost",
         "check the positional formula against an engine's synthetic-acceptance knob",
         "see what block verification adds to the formula, on the toy and on SmolLM2"),
        "notebooks 02 and 03.",
        14, 40, "tokens per pass, the speedup formula, and the best k, with sliders", quick_minutes=2),
    "06_drafters": Guide(
        "The drafter family: where the guesses come from", "Drafters",
        ("run prompt lookup, suffix decoding, lookahead, early exit and a distilled draft on one target",
         "train small drafters on a CPU, and verify a candidate tree in one pass (Medusa, EagleLite)",
         "see this year's two ideas run: fused features (Eagle3Lite) and a block of guesses in one pass "
         "(ParallelLite), with α by draft position",
         "compare every drafter by α, tokens per pass, draft cost and speedup, per kind of task, greedy "
         "and sampled, and name what stops each one short of 1.4×"),
        "notebooks 02 (the engine and its trace), 03 (the rejection rule) and 05 (α, k, c and the "
        "speedup formula).",
        26, 40, "where the guesses come from: every drafter family on one target", quick_minutes=2),
    "07_live_timings": Guide(
        "Live timings: transformers and our engine side by side, predicted against measured",
        "Live timings",
        ("time transformers' assisted generation and this package's engine fairly (warm-up, round-robin)",
         "predict each speedup from measured α, draft cost and the verify cost curve, then measure it",
         "explain the runs where speculation was slower",
         "read one run under every engine's acceptance definition, and price one-hot drafts"),
        "notebooks 01 (the cost of a pass over w positions), 05 (the speedup formula) and 06 (the "
        "drafters).",
        19, 30, "transformers and the engine side by side, predicted against measured", quick_minutes=2),
    "08_production": Guide(
        "Production reality: batch size eats the free compute", "Production",
        ("explain why batching eats speculation's gain, and find the crossover batch",
         "measure how α moves with content and temperature, and where fp32 and 16-bit runs diverge",
         "choose k adaptively and verify by cost, alone, in a batch and at a long context",
         "measure time to first token and bursty inter-token latency"),
        "notebooks 01 (the roofline), 05 (the speedup formula), 06 (drafters) and 07 (timing honestly).",
        35, 40, "batch size, content, temperature, numerics and adaptive k", quick_minutes=2),
    "09_vllm_serving": Guide(
        "The same model in a production serving engine: vLLM on this CPU", "vLLM serving",
        ("run vLLM's OpenAI-compatible server per configuration, loaded by concurrent streamed requests",
         "compare vLLM's greedy speculation with plain decoding and read its counters under every definition",
         "find a workload, K and n-gram sizes where n-gram speculation pays at one request, and take the "
         "server's speedup apart factor by factor (the engine, vLLM's offline API, one core, the HTTP "
         "server)",
         "measure both halves of the Monday-morning flip (throughput against concurrency, with its noise "
         "band) and turn speculation off by batch size",
         "audit a production sampler with the calibrated χ² test against the model's exact distribution"),
        "notebooks 03 (the rule and the χ² test), 07 (timing honestly), 08 (batching); `make vllm` once.",
        76, 40, "the same model in vLLM: the flip under real load, its sampler audited", quick_minutes=25),
}


def notebooks() -> list[Path]:
    return sorted((ROOT / NOTEBOOK_DIR).glob("[0-9][0-9]_*.ipynb"))


def colab_url(name: str) -> str:
    return f"https://colab.research.google.com/github/{REPO}/blob/{BRANCH}/{NOTEBOOK_DIR}/{name}"


def _label(path: Path) -> str:
    return f"{path.stem[:2]} · {GUIDE[path.stem].short}"


def header(paths: list[Path], i: int) -> str:
    path, g = paths[i], GUIDE[paths[i].stem]
    links = [f"[![Open In Colab]({BADGE})]({colab_url(path.name)})"]
    if i > 0:
        links += [f"[← {_label(paths[i - 1])}]({paths[i - 1].name})", f"[contents]({paths[0].name})"]
    if i + 1 < len(paths):
        links.append(f"[{_label(paths[i + 1])} →]({paths[i + 1].name})")
    objectives = "\n".join(f"- {o}" for o in g.objectives)
    return (f"{' · '.join(links)}\n\n# {path.stem[:2]} · {g.title}\n\n"
            f"**You will**\n{objectives}\n\n"
            f"**You need:** {g.prerequisites}\n\n"
            f"**Time:** about {g.minutes_reading} minutes to work through. " + (
                f"Running every cell takes about {g.minutes_cpu_full} min on 2 CPU cores in full mode"
                if g.minutes_cpu_full is not None else "Its full mode has not been timed yet")
            + f", under {g.quick_minutes:g} min in quick mode (`SPECNOTES_QUICK=1`).")


def footer(paths: list[Path], i: int) -> str:
    if i + 1 == len(paths):
        return (f"---\n**The end of the collection.** Back to the [contents]({paths[0].name}); "
                f"previous: [{_label(paths[i - 1])}]({paths[i - 1].name}).")
    nxt = paths[i + 1]
    back = f" · previous: [{_label(paths[i - 1])}]({paths[i - 1].name})" if i > 0 else ""
    return f"---\n**Next:** [{_label(nxt)}]({nxt.name}) — {GUIDE[nxt.stem].blurb}.{back}"


def _cell(cell_id: str, source: str):
    cell = nbformat.v4.new_markdown_cell(source)
    cell.id = cell_id
    cell.metadata = {"tags": [cell_id]}
    return cell


def _install_cell():
    cell = nbformat.v4.new_code_cell(INSTALL)
    cell.id = "install"
    return cell


def apply(nb, paths: list[Path], i: int) -> None:
    """Replace (or insert) the generated header, install cell and footer of one notebook, and set its
    Colab metadata, in place. The install cell keeps its id, execution count and outputs."""
    cells = [c for c in nb.cells if c.get("id") not in (HEADER_ID, FOOTER_ID)]
    code = next((c for c in cells if c.cell_type == "code"), None)
    if code is not None and INSTALL_MARK in code.source:
        code.source = INSTALL
    else:
        cells.insert(0, _install_cell())
    nb.cells = [_cell(HEADER_ID, header(paths, i)), *cells, _cell(FOOTER_ID, footer(paths, i))]
    for key in COLAB_GPU_METADATA:
        nb.metadata.pop(key, None)
    if paths[i].stem in COLAB_GPU:
        nb.metadata.update(copy.deepcopy(COLAB_GPU_METADATA))


def stale(paths: list[Path] | None = None) -> list[str]:
    """Names of notebooks whose generated cells differ from what this script would write."""
    paths = paths or notebooks()
    out = []
    for i, path in enumerate(paths):
        nb = nbformat.read(path, as_version=4)
        before = nbformat.writes(nb)
        apply(nb, paths, i)
        if nbformat.writes(nb) != before:
            out.append(path.name)
    return out


def main(argv: list[str]) -> int:
    paths = notebooks()
    missing = [p.stem for p in paths if p.stem not in GUIDE]
    if missing:
        print(f"no GUIDE entry for {missing}: add one to tools/notebook_nav.py", file=sys.stderr)
        return 1
    if "--check" in argv:
        out = stale(paths)
        if out:
            print(f"out of date (run `python tools/notebook_nav.py`): {out}", file=sys.stderr)
        return 1 if out else 0
    for i, path in enumerate(paths):
        nb = nbformat.read(path, as_version=4)
        apply(nb, paths, i)
        nbformat.write(nb, path)
    print(f"wrote the generated header, install cell, footer and Colab metadata of {len(paths)} notebooks")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
