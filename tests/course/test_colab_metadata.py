"""Notebooks 06-09 open on a Colab T4: they carry the runtime request Colab itself saves after
Runtime > Change runtime type > T4 GPU, and neither tool that rewrites notebooks (tools/run_notebooks.py
after every run, tools/notebook_nav.py) drops it. The other notebooks run on a CPU runtime.
"""

from __future__ import annotations

import copy
import json

import nbformat
import pytest

from tests import notebook_utils
from tests.notebook_utils import NOTEBOOKS

GPU_NOTEBOOKS = ["06_drafters", "07_live_timings", "08_production", "09_vllm_serving"]
T4 = {"accelerator": "GPU", "colab": {"gpuType": "T4", "provenance": []}}


def metadata(path) -> dict:
    return json.loads(path.read_text())["metadata"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_only_the_gpu_notebooks_ask_colab_for_a_t4(path):
    meta = metadata(path)
    if path.stem in GPU_NOTEBOOKS:
        assert {k: meta.get(k) for k in T4} == T4
    else:  # a CPU notebook that asked for a GPU would spend a learner's Colab GPU quota for nothing
        assert "accelerator" not in meta and "colab" not in meta


def test_the_nav_tool_writes_the_same_list():
    assert notebook_utils.notebook_nav().COLAB_GPU == set(GPU_NOTEBOOKS)


def _as_colab_saved_it(nb):
    """What a notebook looks like after a run on Colab and File > Save: extra Colab keys, an edit
    history, widget state, per-cell Colab metadata."""
    nb = copy.deepcopy(nb)
    nb.metadata["colab"].update(provenance=[{"file_id": "abc", "timestamp": 1700000000}], name="x.ipynb",
                                toc_visible=True)
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    for cell in nb.cells:
        cell.metadata["colab"] = {"base_uri": "https://localhost:8080/"}
        cell.metadata["executionInfo"] = {"elapsed": 5, "status": "ok"}
    return nb


@pytest.mark.parametrize("name", GPU_NOTEBOOKS)
def test_run_notebooks_clean_keeps_the_t4_request_and_drops_the_noise(name):
    clean = notebook_utils.tool("run_notebooks").clean
    nb = _as_colab_saved_it(nbformat.read(notebook_utils.ROOT / "notebooks" / f"{name}.ipynb", as_version=4))
    tags = [c.metadata.get("tags") for c in nb.cells]
    claims = [c.metadata.get("claims") for c in nb.cells]  # the prose claims' justifications
    clean(nb)
    assert {k: nb.metadata.get(k) for k in T4} == T4
    assert set(nb.metadata) == {"accelerator", "colab", "kernelspec", "language_info"}
    assert [c.metadata.get("tags") for c in nb.cells] == tags
    assert [c.metadata.get("claims") for c in nb.cells] == claims
    assert all(set(c.metadata) <= {"tags", "claims"} for c in nb.cells)


def test_clean_leaves_a_cpu_notebook_without_a_gpu_request():
    clean = notebook_utils.tool("run_notebooks").clean
    nb = nbformat.read(NOTEBOOKS[0], as_version=4)
    clean(nb)
    assert "accelerator" not in nb.metadata and "colab" not in nb.metadata


@pytest.mark.parametrize("name", GPU_NOTEBOOKS)
def test_notebook_nav_keeps_and_restores_the_t4_request(name):
    nav = notebook_utils.notebook_nav()
    paths = nav.notebooks()
    i = [p.stem for p in paths].index(name)
    nb = nbformat.read(paths[i], as_version=4)
    before = nbformat.writes(nb)
    nav.apply(nb, paths, i)
    assert nbformat.writes(nb) == before  # a rewrite of a current notebook changes nothing
    for key in T4:
        del nb.metadata[key]
    nav.apply(nb, paths, i)
    assert {k: nb.metadata.get(k) for k in T4} == T4
