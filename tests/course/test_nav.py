"""Every notebook's generated header and footer (tools/notebook_nav.py) are current and correct:
the Colab badge points at the notebook's real path in the repo, prev/next links follow the order and
resolve, the header gives objectives, prerequisites and time, and each notebook ends with a summary.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest

from tests import notebook_utils
from tests.notebook_utils import NOTEBOOKS, ROOT, cells, source

notebook_nav = notebook_utils.notebook_nav()

LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_generated_cells_are_up_to_date():
    assert notebook_nav.stale() == [], "run `python tools/notebook_nav.py` and commit the notebooks"


def test_every_notebook_has_a_guide_entry():
    assert sorted(notebook_nav.GUIDE) == [p.stem for p in NOTEBOOKS]


@pytest.mark.parametrize("i", range(len(NOTEBOOKS)), ids=[p.stem for p in NOTEBOOKS])
def test_badge_and_links_resolve(i):
    path = NOTEBOOKS[i]
    nb_cells = cells(path)
    head, foot = nb_cells[0], nb_cells[-1]
    assert head["id"] == notebook_nav.HEADER_ID and foot["id"] == notebook_nav.FOOTER_ID
    header = source(head)
    badge = re.search(r"\(https://colab\.research\.google\.com/github/([^/]+/[^/]+)/blob/([^/]+)/(\S+?)\)",
                      header)
    assert badge, "no Colab badge link in the header"
    repo, branch, repo_path = badge.groups()
    assert (repo, branch) == (notebook_nav.REPO, notebook_nav.BRANCH)
    assert (ROOT / repo_path).resolve() == path.resolve(), f"the badge opens {repo_path}, not {path.name}"
    for text in (header, source(foot)):
        for target in LINK.findall(text):
            if target.startswith("http"):
                continue
            assert (path.parent / target.split("#")[0]).exists(), f"{path.name} links to missing {target}"
    # prev and next are the neighbours in the numbered order
    if i > 0:
        assert f"[← {NOTEBOOKS[i - 1].stem[:2]} · " in header and f"({NOTEBOOKS[i - 1].name})" in header
    if i + 1 < len(NOTEBOOKS):
        nxt = NOTEBOOKS[i + 1].name
        footer = source(foot)
        assert f"({nxt})" in header and f"**Next:** [{nxt[:2]} · " in footer and f"({nxt})" in footer


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_opens_with_objectives_prerequisites_time_and_ends_with_a_summary(path):
    nb_cells = cells(path)
    header = source(nb_cells[0])
    assert "**You will**\n- " in header and "**You need:**" in header and "**Time:**" in header
    assert header.count(f"\n# {path.stem[:2]} · ") == 1  # the title, once
    body = [c for c in nb_cells[1:-1] if c["cell_type"] == "markdown"]
    assert any("\n## Summary\n" in "\n" + source(c) for c in body[-2:]), "no '## Summary' at the end"
    # the intro no longer repeats what the header says
    repeats = ("**You will:**", "**Prerequisites:**", "In this notebook you will")
    assert not any(s in source(nb_cells[1]) for s in repeats)


def test_stale_check_notices_an_edited_link(tmp_path):
    copies = []
    for path in NOTEBOOKS:
        shutil.copy(path, tmp_path / path.name)
        copies.append(tmp_path / path.name)
    nb = json.loads(copies[3].read_text())
    nb["cells"][-1]["source"] = ["---\n**Next:** [somewhere](nowhere.ipynb)"]
    copies[3].write_text(json.dumps(nb))
    assert notebook_nav.stale(copies) == [copies[3].name]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_first_code_cell_is_the_generated_install_cell(path):
    code = [c for c in cells(path) if c["cell_type"] == "code"]
    assert source(code[0]) == notebook_nav.INSTALL
    assert sum(notebook_nav.INSTALL_MARK in source(c) for c in code) == 1  # installed once, at the top


def test_stale_check_notices_an_old_install_cell_and_lost_colab_metadata(tmp_path):
    copies = []
    for path in NOTEBOOKS:
        shutil.copy(path, tmp_path / path.name)
        copies.append(tmp_path / path.name)
    old_guard = ['import sys\n', 'if "google.colab" in sys.modules:\n',
                 '    !pip install -q "specnotes @ git+https://github.com/specnotes/specnotes"']
    nb = json.loads(copies[1].read_text())
    next(c for c in nb["cells"] if c["cell_type"] == "code")["source"] = old_guard
    copies[1].write_text(json.dumps(nb))
    gpu = next(p for p in copies if p.stem in notebook_nav.COLAB_GPU)
    nb = json.loads(gpu.read_text())
    del nb["metadata"]["accelerator"]
    gpu.write_text(json.dumps(nb))
    assert notebook_nav.stale(copies) == sorted([copies[1].name, gpu.name])
