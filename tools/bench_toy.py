"""Speed of the vectorized toy sampler against a one-sequence-at-a-time loop, measured side by side.

`make bench` runs it and writes bench/toy_sampler.json and bench/toy_sampler.md.
The loop below is the baseline, not package code: the shape of the usual teaching script (a Python
loop per sequence and per draft position, numpy only for the row arithmetic).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from specnotes import quick_mode, stats, toy
from specnotes.env import cpu_name, version_of
from specnotes.paths import write_atomic

K, LENGTH = 3, 4


def draw(rng, row):
    return int(np.searchsorted(np.cumsum(row), rng.random() * row.sum(), side="right"))


def loop_sampler(P, Q, n, rng):
    """n speculative sequences, one at a time: the per-sequence baseline."""
    out = []
    for _ in range(n):
        seq = []
        while len(seq) < LENGTH:
            prev = seq[-1] if seq else toy.BOS
            drafted, ctx = [], prev
            for _ in range(K):
                ctx = draw(rng, Q[ctx])
                drafted.append(ctx)
            contexts = [prev] + drafted
            for i, x in enumerate(drafted):
                p, q = P[contexts[i]], Q[contexts[i]]
                if rng.random() < min(1.0, p[x] / q[x]):
                    seq.append(x)
                    continue
                seq.append(draw(rng, np.maximum(p - q, 0.0)))
                break
            else:
                seq.append(draw(rng, P[contexts[K]]))
        out.append(seq[:LENGTH])
    return np.array(out)


def best_rate(fn, n, repeats):
    """Sequences per second: the best of `repeats` runs (the least disturbed by other load)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(n)
        times.append(time.perf_counter() - start)
    return n / min(times), times


def main() -> int:
    quick = quick_mode()
    P, Q = toy.seed_pair()
    exact = toy.exact_distribution(P, LENGTH)
    rng = np.random.default_rng(0)
    n_loop = 5_000 if quick else 20_000
    n_vec = 1_000_000
    repeats = 3 if quick else 5

    # warm up both, then alternate so that machine noise hits them alike
    loop_sampler(P, Q, 200, rng)
    toy.sample_speculative(P, Q, 10_000, LENGTH, K, rng)
    loop_times, vec_times = [], []
    for _ in range(repeats):
        loop_times += best_rate(lambda n: loop_sampler(P, Q, n, rng), n_loop, 1)[1]
        vec_times += best_rate(lambda n: toy.sample_speculative(P, Q, n, LENGTH, K, rng), n_vec, 1)[1]
    loop_rate = n_loop / np.median(loop_times)
    vec_rate = n_vec / np.median(vec_times)

    start = time.perf_counter()
    samples, _ = toy.sample_speculative(P, Q, n_vec, LENGTH, K, rng)
    tv, p_value = stats.chi2_test(samples, exact)
    with_compare = time.perf_counter() - start
    loop_tv, _ = stats.chi2_test(loop_sampler(P, Q, n_loop, rng), exact)

    report = {
        "what": f"speculative sequences per second on the seed toy (V=4, k={K}, length={LENGTH})",
        "loop_sequences_per_s": loop_rate,
        "vectorized_sequences_per_s": vec_rate,
        "speedup": vec_rate / loop_rate,
        "loop_seconds": loop_times,
        "vectorized_seconds": vec_times,
        "n_loop": n_loop,
        "n_vectorized": n_vec,
        "million_with_compare_s": with_compare,
        "million_tv": tv,
        "million_p_value": p_value,
        "loop_tv_at_n_loop": loop_tv,
        "machine": {
            "python": platform.python_version(), "numpy": version_of("numpy"),
            "cpu": cpu_name(), "cores": os.cpu_count(),
            "quick": quick,
        },
    }
    out = Path("bench")
    out.mkdir(exist_ok=True)
    write_atomic(out / "toy_sampler.json", json.dumps(report, indent=1) + "\n")
    md = [
        f"# Toy sampler speed ({report['what']})",
        "",
        "| sampler | sequences/s (median of runs) | runs (s) |",
        "|---|---:|---|",
        f"| per-sequence loop (n={n_loop:,}) | {loop_rate:,.0f} | "
        + ", ".join(f"{t:.2f}" for t in loop_times) + " |",
        f"| toy.sample_speculative (n={n_vec:,}) | {vec_rate:,.0f} | "
        + ", ".join(f"{t:.2f}" for t in vec_times) + " |",
        "",
        f"**Vectorized / loop: {report['speedup']:.0f}x**, measured alternately in one run.",
        f"10^6 sequences plus their chi-square comparison: {with_compare:.2f} s "
        f"(TV {tv:.4f}, p = {p_value:.3f}).",
        f"Machine: Python {report['machine']['python']}, numpy {report['machine']['numpy']}, "
        f"{report['machine']['cores']} cores.",
    ]
    write_atomic(out / "toy_sampler.md", "\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
