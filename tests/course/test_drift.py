"""The notebooks and the package cannot drift apart: every `specnotes` name a notebook uses must exist.

Code cells are parsed (IPython `!` and `%` lines dropped) and every import from specnotes, and every
attribute chain hanging off a name bound to specnotes or one of its modules, is resolved for real.
Markdown cells are checked too, for the `specnotes.x.y` names they tell the reader to call. Keyword
arguments and attributes of returned objects are beyond a static check; the notebooks' own runs in
`make test` cover those.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import types
from pathlib import Path

import pytest

from tests.notebook_utils import NOTEBOOKS, cells, source

DOTTED = re.compile(r"\bspecnotes(?:\.[A-Za-z_]\w*)+")


def resolve(dotted: str) -> str | None:
    """None if `dotted` exists, else what is missing. Follows modules and classes, then stops."""
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        if not isinstance(obj, (type, types.ModuleType)):
            return None  # an attribute of a function or instance: beyond what can be checked statically
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        name = ".".join(parts[: i + 1])
        try:
            obj = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise  # a dependency is missing, not a specnotes name
            return name
    return None


def _code(text: str) -> str:
    """The cell as Python: an IPython `!` or `%` line becomes `pass` at the same indent."""
    lines = text.splitlines()
    return "\n".join(line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("!", "%"))
                     else line for line in lines)


def names_used(cells: list[dict]) -> set[str]:
    """Every dotted specnotes name the cells (one notebook, in order) import, call or mention."""
    used: set[str] = set()
    bound: dict[str, str] = {}  # local name -> the specnotes path it is bound to
    for cell in cells:
        text = source(cell)
        if cell["cell_type"] == "markdown":
            used.update(DOTTED.findall(text))
            continue
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse(_code(text))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "specnotes":
                        used.add(a.name)
                        bound[a.asname or "specnotes"] = a.name if a.asname else "specnotes"
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "specnotes":
                for a in node.names:
                    used.add(f"{node.module}.{a.name}")
                    bound[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                chain = []
                inner = node
                while isinstance(inner, ast.Attribute):
                    chain.append(inner.attr)
                    inner = inner.value
                if isinstance(inner, ast.Name) and inner.id in bound:
                    used.add(".".join([bound[inner.id], *reversed(chain)]))
    return used


def missing_in(path: Path) -> list[str]:
    return sorted({m for name in names_used(cells(path)) if (m := resolve(name))})


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_specnotes_name_in_the_notebook_exists(path):
    missing = missing_in(path)
    assert not missing, f"{path.name} uses names the package lacks: {missing}"


def test_notebooks_do_use_the_package():
    used = set().union(*(names_used(cells(p)) for p in NOTEBOOKS))
    assert len(used) > 100, sorted(used)  # the check has something to bite on


def test_drift_check_catches_a_renamed_function(tmp_path):
    cells = [
        {"cell_type": "code", "source": ["!pip install -q x\n", "from specnotes import viz_cache, theory\n",
                                         "import specnotes.drafters as d\n"]},
        {"cell_type": "code", "source": ["viz_cache.plot_speedup_old(1)\n", "theory.speedup(0.8, 4, 0.1)\n",
                                         "d.NoSuchDrafter()\n", "d.PromptLookup().propose\n"]},
        {"cell_type": "markdown", "source": ["Call `specnotes.models.load_everything()` or "
                                             "`specnotes.exercises.check`."]},
        {"cell_type": "code", "source": ["from specnotes.nosuchmodule import thing\n"]},
    ]
    nb = tmp_path / "99_planted.ipynb"
    nb.write_text(json.dumps({"cells": cells}))
    assert missing_in(nb) == ["specnotes.drafters.NoSuchDrafter", "specnotes.models.load_everything",
                              "specnotes.nosuchmodule", "specnotes.viz_cache.plot_speedup_old"]
