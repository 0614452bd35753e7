"""Train notebook 06's drafters in full mode and write their weights to data/drafters/ (committed).

    python tools/train_drafters.py            # every one: draft LM, exit adapter, Medusa and the three
                                              # feature drafters (EagleLite, ParallelLite, Eagle3Lite)
    python tools/train_drafters.py --only medusa

Data: the self-distillation set (the target's own answers, data/drafters/selfdistill.npz) plus windows of
Python's pydoc topics, with the target's top-8 next-token probabilities as targets (one teacher pass,
cached). EagleLite trains on the self-distillation set plus the larger free-form one
(selfdistill-more.npz, 120k tokens the target wrote) and takes its targets from the cached hidden
states instead; ParallelLite reads the same, and Eagle3Lite the states of its three fused layers (one more
hidden-state pass).
Budgets: about 3 minutes of teacher pass, 9 minutes for the draft LM, 4 for the adapter and up to 10 for
the Medusa heads (plus a 2-minute pass for the hidden states); EagleLite needs a 5-minute hidden-state
pass, then 3000 steps in about 13 minutes, on 2 CPU cores; ParallelLite up to 10 minutes, and
Eagle3Lite 1000 steps (about 13 minutes) from EagleLite's committed weights. Without these files,
load_distilled_draft(), EarlyExit(adapter="trained"), Medusa(target) and the feature drafters
(EagleLite(target) and the others) train quick ones.
"""

from __future__ import annotations

import argparse
import sys

import torch

from specnotes import distill, models
from specnotes.training import distilled, eagle, eagle3, early_exit, medusa, parallel


def report(name: str, path, log) -> None:
    """One line per trained drafter: steps, seconds, first loss -> the mean of the last 20, where it went."""
    print(f"{name}: {log.steps} steps in {log.seconds:.0f} s, loss {log.losses[0]:.2f} -> "
          f"{log.summary()['final_loss']:.2f}; wrote {path}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["draft", "exit", "medusa", "eagle", "parallel", "eagle3"])
    ap.add_argument("--draft-seconds", type=float, default=540)
    ap.add_argument("--exit-seconds", type=float, default=240)
    ap.add_argument("--medusa-seconds", type=float, default=600)
    ap.add_argument("--eagle-steps", type=int, default=3000)
    ap.add_argument("--eagle-seconds", type=float, default=900)
    ap.add_argument("--parallel-steps", type=int, default=1500)
    ap.add_argument("--parallel-seconds", type=float, default=600)
    ap.add_argument("--eagle3-steps", type=int, default=1000)
    ap.add_argument("--eagle3-seconds", type=float, default=2400)  # a cap; 1000 steps take about 13 min
    ap.add_argument("--eagle3-lr", type=float, default=5e-4)  # fine-tuning EagleLite: a quarter of its rate
    # each training-time-test step's loss weighs this much less than the one before: the first guess, which
    # every round makes, counts most (at 1, the first guess got worse than EagleLite's)
    ap.add_argument("--eagle3-step-weight", type=float, default=0.5)
    # EagleLite's pull of the predicted state toward the target's, kept (EAGLE-3 drops it)
    ap.add_argument("--eagle3-feature-weight", type=float, default=0.1)
    ap.add_argument("--pydoc-windows", type=int, default=300)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    target, tokenizer = models.load(device="cpu", dtype=torch.float32)
    if args.only in (None, "draft", "exit", "medusa"):  # the feature drafters read their own data
        data = distill.concat(distill.self_windows(), distill.pydoc_windows(tokenizer, args.pydoc_windows))
        print(f"training windows: {len(data.inputs)} x {data.inputs.shape[1]} tokens")
        distill.teacher_targets(target, data.inputs)
    if args.only in (None, "draft"):
        path = distilled.committed_path()
        report("draft", path, distilled.train_distilled_draft(
            target, steps=int(args.draft_seconds / 1.3), seconds=args.draft_seconds, data=data,
            save_to=path)[1])
    if args.only in (None, "exit"):
        path = early_exit.committed_path(4)
        report("exit adapter", path, early_exit.train_exit_adapter(
            target, 4, steps=int(args.exit_seconds / 0.8), seconds=args.exit_seconds, data=data,
            save_to=path)[1])
    if args.only in (None, "medusa"):
        path = medusa.committed_path(3)
        report("medusa heads", path, medusa.train_medusa(
            target, 3, steps=int(args.medusa_seconds / 0.8), seconds=args.medusa_seconds, data=data,
            save_to=path)[1])
    if args.only in (None, "eagle"):
        path = eagle.committed_path()
        report("EagleLite", path, eagle.train_eagle(
            target, steps=args.eagle_steps, seconds=args.eagle_seconds, save_to=path)[1])
    if args.only in (None, "parallel"):
        path = parallel.committed_path()
        report("parallel", path, parallel.train_parallel(
            target, steps=args.parallel_steps, seconds=args.parallel_seconds, save_to=path)[1])
    if args.only in (None, "eagle3"):
        # EAGLE-3's changes on top of EagleLite: it starts from EagleLite's committed layer (trained just
        # above when every drafter is trained)
        path = eagle3.committed_path()
        report("eagle3", path, eagle3.train_eagle3(
            target, steps=args.eagle3_steps, seconds=args.eagle3_seconds, lr=args.eagle3_lr,
            step_weight=args.eagle3_step_weight, feature_weight=args.eagle3_feature_weight,
            start=eagle.load_eagle(target), save_to=path)[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
