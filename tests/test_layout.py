"""The package's shape stays what the README's module map says: no module over 400 lines, no module reaching
into another's private names, and no drafter capability read by duck typing (the protocol is
specnotes.drafters.base.Drafter: what a drafter needs, it declares)."""

from __future__ import annotations

import ast
import re

import pytest

from tests.notebook_utils import ROOT

PACKAGE = ROOT / "specnotes"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_LINES = 400


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_longer_than_the_limit(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines; split it by what it holds"


def private_imports(path) -> list[str]:
    """`from specnotes.x import _name` and `specnotes.x._name` across modules (a module's own privates are
    fine)."""
    tree = ast.parse(path.read_text())
    own = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specnotes"):
            found += [f"{node.module}.{a.name}" for a in node.names
                      if a.name.startswith("_") and node.module != own]
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            if isinstance(base, ast.Name) and base.id in {p.stem for p in MODULES}:
                found.append(f"{base.id}.{node.attr}")
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_uses_another_modules_private_names(path):
    assert not private_imports(path)


def test_the_private_name_check_can_fail(tmp_path):
    planted = PACKAGE / "tree.py"
    fake = tmp_path / "specnotes" / "planted.py"
    fake.parent.mkdir()
    fake.write_text("from specnotes.passes import _accepts_logits_to_keep\nx = models._secret()\n")
    import tests.test_layout as layout

    old = layout.ROOT
    layout.ROOT = tmp_path
    try:
        layout.MODULES.append(planted.with_name("models.py"))  # so `models` counts as a module name
        assert private_imports(fake) == ["specnotes.passes._accepts_logits_to_keep", "models._secret"]
    finally:
        layout.ROOT = old
        layout.MODULES.pop()


DUCK = re.compile(r"\b(getattr|hasattr)\(\s*(self\.)?(drafter|inner|make\(\))\b")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_drafter_capability_is_read_by_duck_typing(path):
    found = DUCK.findall(path.read_text())
    assert not found, f"{path.relative_to(ROOT)}: a drafter read with getattr/hasattr"
