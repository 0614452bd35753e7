"""Every result figure a notebook's markdown quotes must be among that notebook's printed outputs.

A *figure* is a number in the prose that reads as a result: one with a decimal point (0.92, 1.63), one
followed by × or % (3×, 45%), or a whole number of 10 or more standing on its own (batch 152). It is
accepted when
- a code cell's output prints it, to the prose's rounding (prose 0.92 matches a printed 0.9213; prose 45%
  matches 45%, 45.1% or 0.451); outputs rendered by a cell (`display(Markdown(...))`) count, which is the
  other way to write a figure: render the sentence from the measured values;
- a code cell sets it as a literal (a parameter the reader can see: K = 4, AUDIT_SHIFT = 0.25);
- its sentence, list item or table is marked as cited: it says "cited" (with its source), as in
  "(cited: Leviathan et al. 2023)"; or
- it is structure, not a result: a version (0.32.0), part of a name (SmolLM2-135M, fp32, 4k, 16-bit), an
  issue or PR number, a year, one of the models' constants (CONSTANTS), a notebook's **Time:** line
  (written from tools/notebook_nav.py's guide), inside code (`...`), maths ($...$), a link target, or a
  heading's number.

Usage: python tools/prose_numbers.py [notebooks/NN_name.ipynb ...]  (default: all) prints every figure
that no output backs, and exits 1 if there is one. tests/course/test_prose_numbers.py runs it in make test.
"""

from __future__ import annotations

import io
import json
import re
import sys
import tokenize
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent

# a number, with its sign and an optional ×/% after it; the look-arounds keep parts of names and versions out
NUMBER = re.compile(r"(?<![\w.\-/])([−-]?\d+(?:,\d{3})*(?:\.\d+)?)"  # the number
                    r"(\s?(?:[×x](?!\s*\d)|%)(?![\w]))?"  # × or % (not the × of a product: 49,152 × 576)
                    r"(?![\w⁰¹²³⁴⁵⁶⁷⁸⁹⁻]|[.,]\d|-[A-Za-z])")  # not a name (4k, 16-bit), a power, a version
CITED = re.compile(r"\bcited\b", re.I)
# facts of the models and the course, not results: SmolLM2's vocabulary, hidden size and layer counts
# (135M: 30 layers, 360M: 32), the toy language's contexts (notebook 03)
CONSTANTS = {49152.0, 576.0, 30.0, 32.0, 1024.0}
# numbers that name things: an issue or pull request, a notebook's guide line (tools/notebook_nav.py writes
# the **Time:** line from its Guide, and tests/course/test_nav.py checks it)
NAMES = re.compile(r"(#|\bPR\s|\bissue\s|\bpull request\s)$", re.I)


class Figure(NamedTuple):
    cell: int  # index of the markdown cell among all cells
    text: str  # the figure as written
    context: str  # the sentence around it


def _strip(markdown: str) -> str:
    """Markdown with the parts that hold no result figures blanked out."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]*\$", " ", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    text = re.sub(r"<[^>]+>", " ", text)  # html tags
    text = re.sub(r"https?://\S+", " ", text)
    text = re.sub(r"^#+\s*[\d.]*\s*", "", text, flags=re.M)  # heading numbers
    text = re.sub(r"^\*\*Time:\*\*.*$", " ", text, flags=re.M)  # the guide's line (tools/notebook_nav.py)
    text = re.sub(r"^\s*\d+\.\s", " ", text, flags=re.M)  # numbered-list markers
    return text


def _pieces(text: str) -> list[str]:
    """Sentences, list items and whole tables: the units a "cited" mark covers."""
    out, table = [], []
    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            table.append(line)
            continue
        if table:
            out.append("\n".join(table))
            table = []
        out += [s for s in re.split(r"(?<=[.!?;])\s+(?=[A-Z(*_])", line) if s.strip()]
    if table:
        out.append("\n".join(table))
    return out


def _magnitude(number: str) -> float:
    """|x| of a number as prose writes it: thousands commas, a typographic minus."""
    return abs(float(number.replace(",", "").replace("−", "-")))


def _value(text: str) -> tuple[float, int, str]:
    """(value, decimals, suffix) of a figure as written."""
    match = NUMBER.fullmatch(text.strip())
    number, suffix = match.group(1), (match.group(2) or "").strip()
    decimals = len(number.split(".")[1]) if "." in number else 0
    return _magnitude(number), decimals, suffix


def figures(markdown: str, cell: int = 0) -> list[Figure]:
    """The result figures of one markdown cell that are not marked as cited."""
    found = []
    for piece in _pieces(_strip(markdown)):
        if CITED.search(piece):
            continue
        for m in NUMBER.finditer(piece):
            number, suffix = m.group(1), (m.group(2) or "").strip()
            if "." not in number and not suffix and _magnitude(number) < 10:
                continue
            if re.fullmatch(r"(19|20)\d\d", number) or NAMES.search(piece[:m.start()]):  # a year, a name
                continue
            if not suffix and _magnitude(number) in CONSTANTS:
                continue
            found.append(Figure(cell, m.group(0).strip(), " ".join(piece.split())[:160]))
    return found


def _numbers(text: str) -> set[float]:
    return {_magnitude(n)
            for n in re.findall(r"[−-]?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?", text)}


def _output_text(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append("".join(out.get("text", "")))
        for kind in ("text/plain", "text/markdown", "text/html"):
            data = out.get("data", {}).get(kind)
            if data:
                parts.append("".join(data))
    return "\n".join(parts)


def _literals(source: str) -> set[float]:
    found = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.NUMBER:
                try:
                    found.add(abs(float(tok.string.replace("_", ""))))
                except ValueError:
                    pass
    except (tokenize.TokenError, IndentationError, SyntaxError):
        found |= _numbers(source)
    return found


def backed(figure: str, printed: set[float], literals: set[float]) -> bool:
    """Whether a figure as written matches a printed number to its rounding, or a code literal."""
    value, decimals, suffix = _value(figure)
    candidates = set(printed)
    if suffix == "%":
        candidates |= {100 * x for x in printed}
    for x in candidates:
        if abs(round(x, decimals) - value) < 0.5 * 10 ** -decimals * 1e-6 + 1e-12:
            return True
    return any(abs(x - value) < 1e-12 for x in literals)


def unbacked(path: Path | str) -> list[Figure]:
    """Every result figure in the notebook's markdown that no output prints and no code sets."""
    nb = json.loads(Path(path).read_text())
    printed, literals = set(), set()
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            printed |= _numbers(_output_text(c))
            literals |= _literals("".join(c["source"]))
    out = []
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] == "markdown":
            out += [f for f in figures("".join(c["source"]), i) if not backed(f.text, printed, literals)]
    return out


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    bad = 0
    for path in paths:
        for f in unbacked(path):
            bad += 1
            print(f"{path.name} cell {f.cell}: {f.text!r} is printed by no output: {f.context}")
    print(f"{bad} figure(s) in prose that no output backs" if bad else "every figure in prose is backed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
