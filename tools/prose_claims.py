"""Every claim a notebook's hand-written markdown makes about its run must come from that run.

tools/prose_numbers.py holds the prose's *figures* to the printed outputs. This is its sibling for the
claims that carry no figure, the kind a newcomer found contradicting the outputs: an order or a winner
("beats", "slower", "wins"), a direction ("the curve falls", "rises"), a count ("5 branches") and a
colour named for what a trace draws. A sentence (list item, table) is a *claim* when
- it holds a comparison or direction word (WINNER, DIRECTION) and points at a result (ANCHOR: the run,
  the table, the figure, the curve, this CPU, measured, ...);
- it counts something a figure or a run shows: a whole number before a noun of COUNTED ("5 branches",
  "three bugs"), or a range of k ("k = 2–3"); or
- it names a colour for a trace's token kind (accepted, rejected, corrected, bonus) or for a whole trace.

A claim passes when
- it is a count that an output of the notebook prints with the same words ("5 branches"): the cell
  that drew the figure says it too;
- it names the trace colours that specnotes.readouts.TRACE_COLOUR_NAMES says are drawn; or
- its markdown cell's metadata justifies it: `"claims": [{"says": "<part of the sentence>", "why":
  "..."}]`, where why is `mechanism: ...` (it explains how something works, not what this run shows),
  `cited: <source>`, or `check: <text>`, and then some code cell of the notebook must print <text>: the
  visible check that the prose says no more than. Editing the sentence drops its justification.

Rendered sentences (cell outputs, `display(Markdown(...))`) are never checked: they come from the values.

Usage: python tools/prose_claims.py [notebooks/NN_name.ipynb ...]  (default: all) prints every claim that
nothing backs and exits 1 if there is one. tests/course/test_prose_claims.py runs it in make test.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import prose_numbers as pn  # noqa: E402  (the same markdown stripping and sentence splitting)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from specnotes.readouts import TRACE_COLOUR_NAMES  # noqa: E402

WINNER = (r"beats?|beaten|wins?|won|winning|loses?|lost|faster|slower|ahead|behind|outperforms?|better|"
          r"worse|pays|paid|above plain|below plain|above 1|below 1|above 1×|below 1×")
DIRECTION = (r"falls?|fell|falling|rises?|rose|rising|grows?|grew|growing|shrinks?|drops?|dropped|"
             r"climbs?|climbed|turns? up|turns? down|flattens?|decays?|increases?|decreases?")
ANCHOR = (r"this run|the run|in this notebook|the table|the figure|the plot|the curve|its curve|the trace|"
          r"the sweep|the printout|printed|measured|this CPU|this machine|here|above|below")
COUNTED = (r"branch(?:es)?|leaves|leaf|candidates?|nodes|entries|bugs|rows|points|curves|bars|rounds|"
           r"failures|divergences")
NUMBER_WORDS = "two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty"
COLOURS = r"light blue|blue|red|green|orange|yellow|lavender|purple|violet|grey|gray|pink|brown|teal"
ROLES = {"accepted": "accepted", "rejected": "rejected", "correction": "corrected",
         "corrected": "corrected", "bonus": "bonus"}

_comparison = re.compile(rf"\b(?:{WINNER}|{DIRECTION})\b", re.I)
_anchor = re.compile(rf"\b(?:{ANCHOR})\b", re.I)
_count = re.compile(
    rf"(?<![+×] )(?<![\w.,\-+×])"
    rf"((?!(?:19|20)\d\d\b)(?:\d+|{NUMBER_WORDS})\s+(?:[a-z\-]+\s+)?(?:{COUNTED}))\b",
    re.I,
)
_k_range = re.compile(r"\bk\s*=?\s*\d+\s*[–-]\s*\d+\b")
_colour = re.compile(rf"\b(?:{COLOURS})\b", re.I)
_role = re.compile(rf"\b(?:{'|'.join(ROLES)})\b", re.I)


class Claim(NamedTuple):
    cell: int  # index of the markdown cell among all cells
    kind: str  # "comparison", "count", "colour"
    what: str  # the words that make it a claim
    context: str  # the sentence


def _colour_errors(piece: str) -> list[str]:
    """The colours a sentence names against the trace's drawn ones. Each colour word is paired with the
    nearest token kind in its own clause (between commas, semicolons and dashes) and must be that kind's
    name; in a clause with no kind named, in a sentence about a trace, it must be one of the trace's."""
    bad, about_trace = [], re.search(r"\btraces?\b", piece, re.I)
    names = set(TRACE_COLOUR_NAMES.values()) | {n.split()[-1] for n in TRACE_COLOUR_NAMES.values()}
    for clause in re.split(r"[,;—]|\s-\s", piece):
        roles = [(m.start(), ROLES[m.group(0).lower()]) for m in _role.finditer(clause)]
        for m in _colour.finditer(clause):
            colour = m.group(0).lower()
            if roles:
                role = min(roles, key=lambda r: abs(r[0] - m.start()))[1]
                if colour not in (TRACE_COLOUR_NAMES[role], TRACE_COLOUR_NAMES[role].split()[-1]):
                    bad.append(f"{colour} for {role} (drawn: {TRACE_COLOUR_NAMES[role]})")
            elif about_trace and colour not in names:
                bad.append(f"{colour} (a trace draws {', '.join(TRACE_COLOUR_NAMES.values())})")
    return bad


def claims(markdown: str, cell: int = 0) -> list[Claim]:
    """The claims of one markdown cell that are not marked as cited in their sentence."""
    found = []
    for piece in pn._pieces(pn._strip(markdown)):
        if pn.CITED.search(piece):
            continue
        context = " ".join(piece.split())
        if _comparison.search(piece) and _anchor.search(piece):
            words = sorted({m.group(0).lower() for m in _comparison.finditer(piece)})
            found.append(Claim(cell, "comparison", ", ".join(words), context))
        found += [Claim(cell, "count", " ".join(m.group(1).split()), context) for m in _count.finditer(piece)]
        found += [Claim(cell, "count", m.group(0), context) for m in _k_range.finditer(piece)]
        found += [Claim(cell, "colour", bad, context) for bad in _colour_errors(piece)]
    return found


def _justified(claim: Claim, notes: list[dict], printed: str) -> bool:
    for note in notes:
        if note.get("says") and note["says"] in claim.context:
            why = note.get("why", "")
            if why.startswith(("mechanism:", "cited:")):
                return True
            if why.startswith("check:"):
                return why[len("check:"):].strip() in printed
    return False


def _printed(nb: dict) -> str:
    return "\n".join(pn._output_text(c) for c in nb["cells"] if c["cell_type"] == "code")


def unbacked(path: Path | str) -> list[Claim]:
    """Every claim in the notebook's markdown that no output prints and no justification covers."""
    nb = json.loads(Path(path).read_text())
    printed = _printed(nb)
    flat = " ".join(printed.split()).lower()
    out = []
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] != "markdown":
            continue
        notes = c.get("metadata", {}).get("claims", [])
        for claim in claims("".join(c["source"]), i):
            if claim.kind == "count" and claim.what.lower() in flat:
                continue  # the run prints the same count
            if claim.kind == "colour" or not _justified(claim, notes, printed):
                out.append(claim)
    return out


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    bad = 0
    for path in paths:
        for c in unbacked(path):
            bad += 1
            print(f"{path.name} cell {c.cell}: {c.kind} {c.what!r}: {c.context[:200]}")
    print(f"{bad} claim(s) in prose that nothing backs" if bad else "every claim in prose is backed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
