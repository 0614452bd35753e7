"""The README is for learners and workshop teachers: short enough to read, and its counts are the course's
own (the notebooks it lists, the bug zoo's size). The test catalogue lives in CONTRIBUTING.md."""

import re

from specnotes import bugzoo
from tests.notebook_utils import ROOT

README = (ROOT / "README.md").read_text()
WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
         "sixteen seventeen eighteen nineteen twenty").split()


def test_the_readme_is_short_and_has_no_wall_of_text():
    assert len(README) <= 12_000, f"README.md has {len(README)} characters; move detail to CONTRIBUTING.md"
    longest = max(len(line) for line in README.splitlines())
    assert longest <= 1_000, f"a README line has {longest} characters"


def test_the_readme_lists_every_notebook_and_no_other():
    listed = set(re.findall(r"\]\(notebooks/(\d\d_\w+)\.ipynb\)", README))
    assert listed == {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}


def test_the_readme_counts_the_bug_zoo_as_the_package_does():
    assert f"{WORDS[len(bugzoo.ZOO)]} sampler mistakes" in README


def test_contributing_holds_the_test_catalogue():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    for path in ("tests/test_engine.py", "tests/test_batch.py", "tests/test_drafters.py",
                 "tests/test_layout.py"):
        assert path in text
    assert "make check" in text and "make bench" in text
