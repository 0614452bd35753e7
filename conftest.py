"""Repo-wide pytest hooks: time each notebook that nbval runs and hold it to the quick-mode budget."""

from __future__ import annotations

import os
from collections import defaultdict

NOTEBOOK_BUDGET_S = float(os.environ.get("SPECNOTES_NOTEBOOK_BUDGET", "60"))
_seconds: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    if path.endswith(".ipynb"):
        _seconds[path] += report.duration  # setup (kernel start) + call of every cell


def pytest_sessionfinish(session, exitstatus):
    if not _seconds:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    over = {p: s for p, s in _seconds.items() if s > NOTEBOOK_BUDGET_S}
    lines = [f"notebook wall time (budget {NOTEBOOK_BUDGET_S:.0f} s each):"]
    lines += [f"  {s:6.1f} s  {p}{'  OVER BUDGET' if p in over else ''}" for p, s in sorted(_seconds.items())]
    if reporter is not None:
        reporter.write_line("")
        for line in lines:
            reporter.write_line(line)
    if over and session.exitstatus == 0:
        session.exitstatus = 1
