"""The package's shape stays what CONTRIBUTING.md's module map says: no module over 400 lines, no module
reaching into another's private names, and no drafter capability read by duck typing (the protocol is
specnotes.drafters.base.Drafter: what a drafter needs, it declares)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import NamedTuple

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


# --------------------------------------------------------------------------- the import graph

DEFERRED = {
    "torch": "`import specnotes` and the numpy modules stay torch-free",
    "transformers": "it imports torch",
    "safetensors": "safetensors.torch imports torch (weights.save)",
    "tqdm": "env.progress_bar picks tqdm.std or tqdm.auto at call time, and tqdm.auto would bring IPython "
            "into `import specnotes`",
    "httpx": "not a dependency of specnotes: only notebook 09's client to a vLLM server needs it",
    "vllm": "not a dependency of specnotes: it lives in its own venv",
}
"""The only packages a function may import: everything else, intra-package, stdlib and numpy included,
is imported at the top of its module, where a reader sees what the module stands on."""


class Import(NamedTuple):
    importer: str  # dotted module name, e.g. specnotes.toy
    imported: str  # dotted module name as written, resolved to the package's own module where it is one
    line: int
    deferred: bool  # inside a function


def module_name(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def imports_of(path: Path, root: Path, modules: set[str]) -> list[Import]:
    """Every import statement of one module, top-level and inside functions. `from a import b` counts as
    an import of module a.b when that is one of `modules`, else of a."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    deferred = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            if base == "__future__":
                continue
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        found += [Import(name, t, node.lineno, id(node) in deferred) for t in dict.fromkeys(targets)]
    return found


def import_graph(package_dir: Path) -> tuple[dict[str, set[str]], list[Import]]:
    """({module: the package's modules it imports}, every import) for a package folder."""
    root = package_dir.parent
    paths = sorted(package_dir.rglob("*.py"))
    modules = {module_name(p, root) for p in paths}
    everything = [i for p in paths for i in imports_of(p, root, modules)]
    graph = {m: set() for m in modules}
    for i in everything:
        if i.imported in modules and i.imported != i.importer:
            graph[i.importer].add(i.imported)
    return graph, everything


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None when the graph has none (depth-first search)."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                return [*stack[stack.index(n):], n]
            if n not in state and (cycle := visit(n)):
                return cycle
        stack.pop()
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def hidden_imports(everything: list[Import]) -> list[str]:
    """'module:line imported' for each import inside a function of a package that DEFERRED does not name."""
    return [f"{i.importer}:{i.line} {i.imported}" for i in everything
            if i.deferred and i.imported.partition(".")[0] not in DEFERRED]


GRAPH, IMPORTS = import_graph(PACKAGE)


def test_the_package_has_no_import_cycle_counting_imports_inside_functions():
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_a_function_imports_only_torch_transformers_and_the_deferred_packages(module):
    hidden = hidden_imports([i for i in IMPORTS if i.importer == module])
    assert not hidden, f"move these to the top of the module: {hidden}"


def test_the_import_checks_can_fail(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import numpy as np\n\nfrom pkg import b\n\n\ndef f():\n    import torch\n")
    (pkg / "b.py").write_text("def g():\n    from pkg.sub import c\n    import json\n")
    (pkg / "sub" / "c.py").write_text("from .. import a\n")
    graph, everything = import_graph(pkg)
    assert graph == {"pkg": set(), "pkg.sub": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.sub.c"},
                     "pkg.sub.c": {"pkg.a"}}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]
    assert hidden_imports(everything) == ["pkg.b:2 pkg.sub.c", "pkg.b:3 json"]
    (pkg / "sub" / "c.py").write_text("import pkg.sub\n")  # the cycle broken
    assert find_cycle(import_graph(pkg)[0]) is None
