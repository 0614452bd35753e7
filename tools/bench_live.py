"""Live assisted-generation timings: every mode of notebook 07, round-robin, greedy and sampled.

    python tools/bench_live.py                     # writes bench/report.json and bench/report.md
    python tools/bench_live.py --save-reference    # also data/reference_runs/<machine>.json
    python tools/bench_live.py --save-reference --force    # replace the reference already there

`make bench` runs it. SPECNOTES_QUICK=1 uses one prompt per kind, fewer tokens and repeats.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specnotes import live, quick_mode
from specnotes.paths import write_atomic


def engine_vs_hf(report: dict) -> list[str]:
    lines = []
    for kind in ("copy", "free"):
        for sampling in ("greedy", "sample"):
            get = {r["mode"]: r for r in report["runs"]
                   if r["prompt_kind"] == kind and r["sampling"] == sampling}
            if "engine-prompt-lookup" in get and "hf-prompt-lookup" in get:
                e, h = get["engine-prompt-lookup"], get["hf-prompt-lookup"]
                same = "" if sampling == "sample" else (
                    f", identical tokens: {e['identical_to_plain'] and h['identical_to_plain']}")
                lines.append(f"- {kind}, {sampling}: engine prompt lookup / transformers prompt lookup = "
                             f"{e['tokens_per_s'] / h['tokens_per_s']:.2f}×{same}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save-reference", action="store_true",
                    help="also write the report to data/reference_runs/<machine fingerprint>.json")
    ap.add_argument("--force", action="store_true",
                    help="with --save-reference: replace a reference of the same fingerprint already there")
    args = ap.parse_args(argv)
    quick = quick_mode()
    p = live.plan()
    if args.save_reference:  # refuse now, not after the minutes of timing
        try:
            live.reference_path(live.plan_fingerprint(p), force=args.force)
        except FileExistsError as exc:
            ap.error(str(exc))
    report = live.run(p, max_new_tokens=48 if quick else 96, repeats=2,
                         prompts_per_kind=1 if quick else None)
    out = Path("bench")
    out.mkdir(exist_ok=True)
    write_atomic(out / "report.json", json.dumps(report, indent=1) + "\n")
    text = ("# Live timings: transformers' assisted generation and the specnotes engine\n\n"
            + live.markdown(report) + "\n" + "\n".join(engine_vs_hf(report)) + "\n")
    write_atomic(out / "report.md", text)
    print(text)
    if args.save_reference:
        print("reference written to", live.save_reference(report, force=args.force))
    greedy = [r for r in report["runs"] if r["sampling"] == "greedy"]
    return 0 if all(r["identical_to_plain"] for r in greedy) else 1


if __name__ == "__main__":
    sys.exit(main())
