"""Live assisted-generation timings: every mode of notebook 07, round-robin, greedy and sampled.

    python tools/bench_live.py                     # writes bench/report.json and bench/report.md
    python tools/bench_live.py --save-reference    # also data/reference_runs/<machine>.json
    python tools/bench_live.py --save-reference --force    # replace the reference already there

`make bench` runs it. SPECNOTES_QUICK=1 is the short run (QUICK below): every prompt, as the full run,
so both measure the same ratios, but fewer new tokens and only the modes those ratios need.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specnotes import live, live_summary, quick_mode, references
from specnotes.paths import write_atomic

# The full run: every prompt, 96 new tokens, every mode, 3 timed repeats after a warm-up run of each mode
# (as long as the 2 repeats after a whole warm-up round it used to be).
FULL = dict(max_new_tokens=96, repeats=3)
# The quick run (about 6 minutes on 2 CPU cores). A quick run used to time one prompt per kind at 48 tokens
# and 2 repeats: a different, shorter measurement than the full run's (one copy prompt, cut at 48 tokens),
# whose engine/transformers ratio sat near 1 (0.96x in one run, 1.01x in the next) where the full run's is
# 1.2-1.4x.
# Now it times every prompt, as the full run does: the copy prompts end on EOS at about 55 tokens, so 64
# tokens lose little of the copying, and the free-form ones, which run to the limit, cost 2/3 of a full
# run. 3 repeats give each ratio a median and a range; the draft model's two modes (the slowest, a third of
# a round) and the extra engine modes stay out, so a round costs about 110 s instead of 340 s.
QUICK = dict(max_new_tokens=64, repeats=3, extra_modes=False, draft_modes=False, cost_repeats=3)


def engine_vs_hf(report: live.Report) -> list[str]:
    """The engine's prompt lookup against transformers', per prompt kind and sampling, repeat by repeat;
    a ratio whose repeats disagree (live_summary.Ratio.resolved) is reported as not resolved, not as a
    number."""
    lines = []
    for kind in ("copy", "free"):
        for sampling in ("greedy", "sample"):
            e = report.find("engine-prompt-lookup", kind, sampling)
            h = report.find("hf-prompt-lookup", kind, sampling)
            if e is not None and h is not None:
                same = "" if sampling == "sample" else (
                    f", identical tokens: {e.identical_to_plain and h.identical_to_plain}")
                lines.append(f"- {kind}, {sampling}: engine prompt lookup / transformers prompt lookup = "
                             f"{live_summary.ratio(e, h)}{same}")
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
            references.reference_path(references.plan_fingerprint(p), force=args.force)
        except FileExistsError as exc:
            ap.error(str(exc))
    report = live.run(p, **(QUICK if quick else FULL))
    out = Path("bench")
    out.mkdir(exist_ok=True)
    write_atomic(out / "report.json", json.dumps(report.as_dict(), indent=1) + "\n")
    left_out = "" if not quick else (
        "Quick run: every prompt, fewer tokens; the draft model's modes and the extra engine modes are left "
        "out (`make bench` without SPECNOTES_QUICK times them all).\n\n")
    text = ("# Live timings: transformers' assisted generation and the specnotes engine\n\n" + left_out
            + live.markdown(report) + "\n" + "\n".join(engine_vs_hf(report)) + "\n")
    write_atomic(out / "report.md", text)
    print(text)
    if args.save_reference:
        print("reference written to", references.save_reference(report, force=args.force))
    greedy = [r for r in report.runs if r.sampling == "greedy"]
    return 0 if all(r.identical_to_plain for r in greedy) else 1


if __name__ == "__main__":
    sys.exit(main())
