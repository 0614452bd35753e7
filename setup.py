"""One build step on top of pyproject.toml: the wheel carries the repository's data/ as specnotes/data.

data/ is the one committed copy (no symlinks, which a clone on Windows turns into text files). A clone or
an editable install reads it in place; an installed wheel reads its own copy (specnotes.paths.data_dir).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA = Path(__file__).resolve().parent / "data"
SKIP = {"__pycache__", ".ipynb_checkpoints", ".DS_Store"}


class build_py_with_data(build_py):
    def run(self):
        super().run()
        if self.editable_mode:  # an editable install finds the data in place
            return
        dest = Path(self.build_lib) / "specnotes" / "data"
        for path in sorted(DATA.rglob("*")):
            rel = path.relative_to(DATA)
            if path.is_file() and not SKIP & set(rel.parts):
                self.mkpath(str((dest / rel).parent))
                self.copy_file(str(path), str(dest / rel))


setup(cmdclass={"build_py": build_py_with_data})
