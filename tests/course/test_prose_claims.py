"""Every claim a notebook's prose makes about its run (an order, a direction, a count, a trace colour) is
rendered from the run, printed by it, or justified in its cell's metadata (tools/prose_claims.py).

KNOWN is the worklist of claims the committed notebooks still make with nothing behind them, by kind and
words. It may only shrink: a claim not listed fails (render it, print it, or justify it), and a listed one
that is gone fails too (strike it). The claims pass of the course (issue #38) works through it."""

from __future__ import annotations

import collections
import json

import pytest

from tests.notebook_utils import NOTEBOOKS, tool

pc = tool("prose_claims")

KNOWN: dict[str, list[str]] = {}  # empty: every notebook's claims are backed (issue #38 emptied it)


def _planted(tmp_path, sentence: str, metadata: dict | None = None):
    """Notebook 05 with one sentence added to a markdown cell: (new unbacked claims, the path)."""
    source = next(p for p in NOTEBOOKS if p.stem == "05_speedup_math")
    nb = json.loads(source.read_text())
    md = next(c for c in nb["cells"] if c["cell_type"] == "markdown" and len(c["source"]) > 2)
    before = collections.Counter((c.kind, c.what) for c in pc.unbacked(source))
    md["source"] = ["".join(md["source"]) + "\n\n" + sentence + "\n"]
    md.setdefault("metadata", {}).update(metadata or {})
    path = tmp_path / "planted.ipynb"
    path.write_text(json.dumps(nb))
    return collections.Counter((c.kind, c.what) for c in pc.unbacked(path)) - before, path


@pytest.mark.parametrize("sentence, kind", [
    ("The figure has 4 branches from the root.", "count"),  # a count
    ("The measured curve falls from k = 3 on.", "comparison"),  # a direction
    ("In this run the draft model beats prompt lookup.", "comparison"),  # a winner
    ("In the trace below, accepted drafts are green.", "colour"),  # a colour against the drawn one
    ("A mostly red trace: most drafts were rejected.", "colour"),
])
def test_a_planted_contradiction_of_each_kind_fails(tmp_path, sentence, kind):
    found, path = _planted(tmp_path, sentence)
    assert [k for k, _ in found] == [kind], found
    assert pc.main([str(path)]) == 1


def test_a_justified_or_printed_claim_passes_and_an_unprinted_check_does_not(tmp_path):
    sentence = "In this run the draft model beats prompt lookup."
    found, _ = _planted(tmp_path, sentence, {"claims": [{"says": "beats prompt", "why": "mechanism: x"}]})
    assert not found
    found, _ = _planted(tmp_path, sentence, {"claims": [{"says": "beats prompt",
                                                         "why": "check: no cell prints this line"}]})
    assert list(found) == [("comparison", "beats")]
    found, _ = _planted(tmp_path, "In the trace, **light blue** drafts were accepted and **orange** ones "
                                  "rejected; **lavender** is the correction.")
    assert not found


def test_a_count_is_backed_when_an_output_prints_the_same_words():
    assert pc.claims("The tree has 5 branches.")[0].what == "5 branches"
    assert not pc.claims("A pass over k + 1 rows, in 2026 bugs, 49,152 rows of the head.")


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_every_claim_in_prose_comes_from_the_run(nb):
    found = collections.Counter(f"{c.kind}: {c.what}" for c in pc.unbacked(nb))
    known = collections.Counter(KNOWN.get(nb.stem, []))
    new = [f"cell {c.cell}: {c.kind} {c.what!r} in: {c.context[:200]}" for c in pc.unbacked(nb)
           if f"{c.kind}: {c.what}" not in known]
    assert not new, ("claims in prose that no output prints and nothing justifies: render the sentence from "
                     "the run, print the check it states, or justify it in the cell's metadata:\n"
                     + "\n".join(new))
    gone = sorted((known - found).elements())
    assert not gone, f"listed in KNOWN but no longer unbacked, strike them: {gone}"
