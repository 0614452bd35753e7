"""The committed notebooks are what readers see on GitHub: executed, error-free, navigable."""

import re

import pytest

from tests.notebook_utils import NOTEBOOKS, cells, source, tagged

# grows as notebooks land; every one listed must be present
EXPECTED = [
    "00_start_here", "01_roofline", "02_draft_and_verify", "03_rejection_sampling", "04_bug_zoo",
    "05_speedup_math", "06_drafters", "07_live_timings", "08_production", "09_vllm_serving",
]


def test_the_course_notebooks_exist():
    names = [p.stem for p in NOTEBOOKS]
    assert names == sorted(names)
    assert set(EXPECTED) <= set(names)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebook_is_executed_and_error_free(nb):
    code = [c for c in cells(nb) if c["cell_type"] == "code" and source(c).strip()]
    assert code, "a notebook with no code"
    unrun = [i for i, c in enumerate(code) if c.get("execution_count") is None]
    assert not unrun, f"code cells {unrun} were never run: `make notebooks`"
    errors = [o.get("ename") for c in code for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, f"error outputs committed: {errors}"
    counts = [c["execution_count"] for c in code]
    assert counts == sorted(counts), "cells were run out of order"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_a_colab_badge_for_its_own_path(nb):
    first = source(cells(nb)[0])
    match = re.search(r"colab\.research\.google\.com/github/[\w.-]+/[\w.-]+/blob/main/(\S+?\.ipynb)", first)
    assert match and match.group(1) == f"notebooks/{nb.name}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_reads_quick_mode_in_a_parameters_cell(nb):
    params = tagged(nb, "parameters")
    assert len(params) == 1 and "quick_mode()" in source(params[0])
