"""`make check` leaves out what conftest.py marks slow; the marks must name tests that exist, or a renamed
slow test would quietly join the quick check."""

from __future__ import annotations

import importlib.util
import re

from tests.notebook_utils import ROOT


def root_conftest():
    spec = importlib.util.spec_from_file_location("specnotes_root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_test_marked_slow_exists():
    conftest = root_conftest()
    for path in conftest.SLOW_FILES:
        assert (ROOT / path).is_file(), path
    for nodeid in conftest.SLOW_TESTS:
        path, function = nodeid.split("::")
        assert (ROOT / path).is_file(), nodeid
        assert re.search(rf"^def {function}\(", (ROOT / path).read_text(), re.M), f"no {nodeid}"


def test_make_check_deselects_the_slow_tests_and_make_test_runs_everything():
    makefile = (ROOT / "Makefile").read_text()
    check = re.search(r"^check:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    test = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert '-m "not slow"' in check and "HF_HUB_OFFLINE=1" in check
    assert "pytest tests notebooks" in check
    # make test: the tests on every core, then the notebooks alone (their time budget is a laptop's)
    assert "pytest tests -n" in test and "pytest notebooks $(NBVAL)" in test
    assert "OMP_NUM_THREADS=1" in test.split("pytest notebooks")[0]  # one torch thread per test worker
    assert "OMP_NUM_THREADS" not in test.split("pytest notebooks")[1]
    assert "not slow" not in test and "slow" not in test.split("pytest", 1)[1]
    assert "make test" in (ROOT / ".ci" / "run").read_text()
