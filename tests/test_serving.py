"""specnotes.serving: the roofline serving model of notebook 08."""

import numpy as np
import pytest

from specnotes import roofline, serving, theory

H100, N8B = "H100 SXM", 8e9


@pytest.mark.parametrize("alpha,k,c", [(0.8, 4, 0.05), (0.6, 2, 0.2), (0.3, 1, 0.0), (0.9, 8, 0.1)])
def test_batch_one_matches_theory_with_the_rooflines_cost_ratio(alpha, k, c):
    # weight-bound at B = 1: the k extra positions ride along, so the verify pass costs one step
    assert serving.verify_cost(1, k, N8B, "bf16", H100) == pytest.approx(1.0)
    assert serving.speedup(1, alpha, k, c, N8B, "bf16", H100) == pytest.approx(theory.speedup(alpha, k, c))


@pytest.mark.parametrize("k", [1, 4, 8])
def test_every_draft_accepted_gains_k_plus_one_per_round(k):
    # a measured alpha of exactly 1 (a short sweep where no draft was rejected) is a workload, not an
    # error: each round yields k + 1 tokens, and the crossover search runs on it
    assert serving.speedup(1, 1.0, k, 0.0, N8B, "bf16", H100) == pytest.approx(k + 1)
    cross = serving.crossover_batch(1.0, k, 0.0, 135e6, "fp32", H100)
    assert cross is None or cross > serving.crossover_batch(0.5, k, 0.0, 135e6, "fp32", H100)


def test_batch_one_on_a_compute_poor_machine_uses_the_implied_verify_cost():
    # a slow-compute machine: even B = 1 pays for the extra positions; theory.speedup with the
    # cost ratio the roofline implies, c + (verify - 1) / k, gives the same number
    slow = roofline.Machine("slow", bandwidth=1e11, peak_flops=2e11, memory_bytes=float("nan"), source="test")
    k, c, alpha = 4, 0.1, 0.7
    v = serving.verify_cost(1, k, 1e9, "fp32", slow)
    assert v > 1.2
    want = theory.speedup(alpha, k, c + (v - 1) / k)
    assert serving.speedup(1, alpha, k, c, 1e9, "fp32", slow) == pytest.approx(want)


@pytest.mark.parametrize("n_params,gpu,dtype", [(8e9, H100, "bf16"), (70e9, "A100 80GB", "bf16"),
                                                (1e9, "L4", "fp16"), (135e6, "T4", "fp16")])
def test_speedup_falls_monotonically_with_batch_and_crosses_one_at_the_crossover(n_params, gpu, dtype):
    batches = np.arange(1, 4097)
    s = serving.speedup(batches, 0.7, 4, 0.05, n_params, dtype, gpu)
    assert np.all(np.diff(s) <= 1e-12), "speedup must not rise with batch in the weight-bound regime"
    assert s[0] > 1.5 and s[-1] < 1
    b = serving.crossover_batch(0.7, 4, 0.05, n_params, dtype, gpu)
    assert b is not None and s[b - 1] < 1 <= s[b - 2]


def test_long_context_keeps_paying_at_large_batch():
    # MagicDec's regime: each sequence reads its own KV cache, which all k+1 positions share
    gpu = "H200"
    short = serving.speedup(64, 0.7, 4, 0.05, N8B, "bf16", gpu, context=0)
    long = serving.speedup(64, 0.7, 4, 0.05, N8B, "bf16", gpu, context=8192)
    assert long > 1.5 and long > short
    assert serving.simulate(64, 0.7, 4, 0.05, N8B, "bf16", gpu, context=8192).fits[()]  # and it fits
    assert serving.crossover_batch(0.7, 4, 0.05, N8B, "bf16", gpu, context=8192) is None
    # at short context the same model has lost the gain at a large batch
    assert serving.speedup(512, 0.7, 4, 0.05, N8B, "bf16", gpu) < 1


def test_throughput_and_latency_are_consistent():
    s = serving.simulate([1, 8, 64], 0.8, 4, 0.0, N8B, "bf16", H100)
    np.testing.assert_allclose(s.plain_tokens_per_s, s.batch / (s.plain_ms_per_token / 1e3))
    np.testing.assert_allclose(s.speedup, s.plain_ms_per_token / s.spec_ms_per_token)
    # a free drafter with nothing accepted breaks even while the extra positions are free, and loses
    # from the first batch where they are not
    batches = np.arange(1, 257)
    s0 = serving.speedup(batches, 0.0, 4, 0.0, N8B, "bf16", H100)
    assert np.all(s0 <= 1 + 1e-12)
    first_costly = int(batches[serving.verify_cost(batches, 4, N8B, "bf16", H100) > 1][0])
    assert serving.crossover_batch(0.0, 4, 0.0, N8B, "bf16", H100) == first_costly


def test_memory_capacity_is_reported():
    s = serving.simulate([1, 4096], 0.8, 4, 0.0, 8e9, "bf16", "A100 80GB", context=8192)
    assert not serving.simulate(1, 0.8, 4, 0.0, 70e9, "bf16", "A100 80GB").fits  # 140 GB of weights
    assert s.fits.tolist() == [True, False]


def test_largest_batch_is_the_last_that_fits_in_the_simulation():
    for context in (0, 4096, 32768):
        most = serving.largest_batch(4, 8e9, "bf16", "A100 80GB", context)
        s = serving.simulate([most, most + 1], 0.8, 4, 0.0, 8e9, "bf16", "A100 80GB", context)
        assert s.fits.tolist() == [True, False]
    assert serving.largest_batch(4, 70e9, "bf16", "A100 80GB") == 0  # 140 GB of weights
    unlimited = roofline.Machine("no limit", 1e11, 1e12, float("nan"), "made up")
    assert serving.largest_batch(4, 8e9, "bf16", unlimited) is None


@pytest.mark.parametrize("kwargs,match", [
    (dict(batch=0), "batch"), (dict(batch=2.5), "batch"), (dict(alpha=1.2), "alpha"),
    (dict(alpha=-0.1), "alpha"), (dict(k=0), "k"), (dict(c=-1), "c"), (dict(n_params=-5), "n_params"),
    (dict(dtype="fp12"), "dtype"), (dict(gpu="H9000"), "unknown GPU"), (dict(context=-1), "context"),
])
def test_bad_input_raises_clear_errors(kwargs, match):
    args = dict(batch=8, alpha=0.7, k=4, c=0.1, n_params=N8B, dtype="bf16", gpu=H100, context=0) | kwargs
    with pytest.raises(ValueError, match=match):
        serving.speedup(**args)


def test_crossover_takes_scalars():
    with pytest.raises(ValueError, match="one value"):
        serving.crossover_batch([0.5, 0.7], 4, 0.1, N8B, "bf16", H100)


def test_measured_speedup_uses_the_same_formula():
    times = {(1, 1): 0.010, (1, 5): 0.011, (8, 1): 0.02, (8, 5): 0.08}
    got = serving.measured_speedup(times, 0.7, 4, 0.1)
    e = theory.expected_tokens(0.7, 4)
    assert got[1] == pytest.approx(e * 0.010 / (4 * 0.1 * 0.010 + 0.011))
    assert got[8] == pytest.approx(e * 0.02 / (4 * 0.1 * 0.02 + 0.08)) and got[8] < 1 < got[1]


def test_measure_grid_on_a_tiny_model():
    from specnotes import models

    model = models.tiny_llama(seed=0, layers=2)
    grid = serving.measure_grid(model, batches=(1, 2), tokens=(1, 3), context=8, repeats=1, progress=False)
    assert set(grid) == {(1, 1), (1, 3), (2, 1), (2, 3)} and all(t > 0 for t in grid.values())
