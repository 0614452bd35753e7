"""Reference runs: each machine's live-suite report, kept in data/reference_runs/ under a fingerprint of
the machine, read back and set beside this machine's run (notebook 07, `make bench --save-reference`).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

from specnotes import checks
from specnotes.env import device_name, environment
from specnotes.paths import data_dir, write_atomic

REFERENCES = data_dir() / "reference_runs"

def _slug(value) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(value).lower()).strip("-") or "unknown"


def fingerprint(machine: dict) -> str:
    """A file-name-safe machine id: device, device name, threads, dtype. Every part is reduced to
    lower-case letters, digits and dashes, since the id names a file in data/reference_runs/."""
    if not isinstance(machine, dict):
        raise TypeError(f"machine must be a report's 'machine' dict, got {type(machine).__name__}")
    missing = [key for key in ("device", "threads", "dtype") if key not in machine]
    if missing:
        raise ValueError(f"machine has no {', '.join(missing)}: build it as run() does, from "
                         "env.environment().as_dict() and env.model_facts(model)")
    threads = checks.whole(machine["threads"], "machine['threads']", scalar=True)
    return (f"{_slug(machine['device'])}-{_slug(machine.get('device_name', ''))}-{threads}t-"
            f"{_slug(machine['dtype'])}")


def plan_fingerprint(p) -> str:
    """The fingerprint run(p) will give its report on this machine, known before anything loads, so that
    `bench_live.py --save-reference` can refuse to replace a committed reference before its minutes of
    timing rather than after them."""
    import torch

    return fingerprint({**environment().as_dict(), "device": torch.device(p.device).type,
                        "device_name": device_name(p.device), "dtype": p.dtype})


def reference_path(fp: str, folder: Path | None = None, force: bool = False) -> Path:
    """Where the reference of the machine `fp` goes. A FileExistsError when one is there already and
    `force` is off: a reference is a committed record of a machine, and two machines whose fingerprints
    collide (the same CPU model, say) must not replace each other's runs by accident."""
    if not isinstance(fp, str) or not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", fp):
        raise ValueError(f"fingerprint {fp!r} is not a file-name-safe machine id (letters, digits and "
                         "dashes, as references.fingerprint makes them)")
    path = Path(REFERENCES if folder is None else folder) / f"{fp}.json"
    if path.exists() and not force:
        raise FileExistsError(f"{path} already exists: it is the reference of a machine with the fingerprint "
                              f"{fp}. Pass --force (save_reference(..., force=True)) to replace it, or keep "
                              "it and compare against it in notebook 07.")
    return path


def _as_json(report) -> dict:
    """A live.Report's JSON form (its as_dict()); a dict is taken to be one already (a reference read back
    from its file). This module does not import live (live imports it)."""
    if isinstance(report, dict):
        return report
    if not callable(getattr(report, "as_dict", None)):
        raise TypeError(f"report must be a live.Report or its JSON form (a dict), got a "
                        f"{type(report).__name__}")
    return report.as_dict()


def save_reference(report, folder: Path | None = None, force: bool = False) -> Path:
    """Write `report` (a Report, or its JSON form) as the reference of its machine
    (data/reference_runs/<fingerprint>.json), atomically: notebook 07 reads these files, and a run
    killed half-way must leave the old one whole."""
    report = _as_json(report)
    problem = _unreadable(report)
    if problem is not None:
        raise ValueError(f"this report cannot be a reference: {problem} (live.run makes a whole one)")
    path = reference_path(report["fingerprint"], folder, force)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, json.dumps(report, indent=1) + "\n")


_RUN_KEYS = ("mode", "prompt_kind", "sampling", "speedup", "tokens_per_s")


def _unreadable(report) -> str | None:
    """Why side_by_side cannot show `report` (the parsed JSON of a reference), or None when it can."""
    if not isinstance(report, dict):
        return f"it holds a {type(report).__name__}, not a report (a JSON object)"
    missing = [key for key in ("fingerprint", "machine", "runs") if key not in report]
    if missing:
        return f"it has no {', '.join(repr(k) for k in missing)}"
    if not isinstance(report["fingerprint"], str) or not isinstance(report["machine"], dict):
        return "its 'fingerprint' is not a string or its 'machine' is not an object"
    if not isinstance(report["runs"], list) or not all(isinstance(r, dict) for r in report["runs"]):
        return "its 'runs' is not a list of records"
    for i, run in enumerate(report["runs"]):
        lacking = [key for key in _RUN_KEYS if key not in run]
        if lacking:
            return f"runs[{i}] has no {', '.join(repr(k) for k in lacking)}"
        for key in ("speedup", "tokens_per_s"):
            value = run[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                return f"runs[{i}]['{key}'] is {value!r}, not a positive number"
    return None


def references(folder: Path | None = None) -> list[dict]:
    """Every committed reference report (one per machine). A file that cannot be read as one (cut short
    by a killed write, hand-edited, another tool's report) is skipped with a warning naming it, so one bad
    file does not take the comparison of notebook 07 down with it."""
    refs = []
    for path in sorted(Path(REFERENCES if folder is None else folder).glob("*.json")):
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            problem = f"it is not readable JSON ({exc})"
        else:
            problem = _unreadable(report)
        if problem is not None:
            warnings.warn(f"skipped the reference {path}: {problem}. Re-record it with `python "
                          "tools/bench_live.py --save-reference --force`, or delete it.", stacklevel=2)
            continue
        refs.append(report)
    return refs


def side_by_side(report, refs: list[dict], sampling: str = "greedy") -> str:
    """Markdown: speedup over plain per mode and prompt kind, this machine (a Report, or its JSON form)
    next to each reference (as references() reads them)."""
    report = _as_json(report)
    if not isinstance(refs, (list, tuple)):
        raise TypeError(f"refs must be a list of reports (references.references()), got a "
                        f"{type(refs).__name__}")
    checks.samplings((sampling,))
    for name, rep in [("report", report), *((f"refs[{i}]", r) for i, r in enumerate(refs))]:
        problem = _unreadable(rep)
        if problem is not None:
            raise ValueError(f"{name} cannot be shown: {problem}")
    cols = [("this machine", report)] + [(f"reference {r['fingerprint']}", r) for r in refs]
    keys = [(r["mode"], r["prompt_kind"]) for r in report["runs"] if r["sampling"] == sampling]

    def cell(rep, mode, kind):
        r = next((x for x in rep["runs"] if x["mode"] == mode and x["prompt_kind"] == kind
                  and x["sampling"] == sampling), None)
        return "—" if r is None else f"{r['speedup']:.2f}× ({r['tokens_per_s']:.0f} tok/s)"

    lines = ["| mode | prompt | " + " | ".join(name for name, _ in cols) + " |",
             "|---|---|" + "---:|" * len(cols)]
    for mode, kind in keys:
        lines.append(f"| {mode} | {kind} | " + " | ".join(cell(rep, mode, kind) for _, rep in cols) + " |")
    return "\n".join(lines) + "\n"
