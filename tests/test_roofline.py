"""The roofline: the seed article's H100 figures within 5%, the ridge point, the catalog, errors, and
the measurement functions on this machine (positive, finite, quick)."""

import math
import time

import numpy as np
import pytest

from specnotes import roofline


def test_seed_figures_for_a_7b_bf16_model_on_an_h100():
    assert roofline.model_bytes(7e9, "bf16") / 1e9 == pytest.approx(14, rel=0.05)
    assert roofline.step_time(7e9, "bf16", "H100 SXM") * 1e3 == pytest.approx(4, rel=0.05)
    assert roofline.tokens_per_s_ceiling(7e9, "bf16", "H100 SXM") == pytest.approx(240, rel=0.05)
    flops = roofline.forward_flops(7e9)
    assert flops / 1e9 == pytest.approx(14, rel=0.05)
    assert flops / roofline.machine("H100 SXM").peak_flops * 1e6 == pytest.approx(14, rel=0.05)


def test_ridge_tokens_is_where_memory_and_compute_times_meet():
    for gpu, dtype in (("H100 SXM", "bf16"), ("T4", "fp16"), ("A100 80GB", "int8")):
        m = roofline.machine(gpu)
        t = roofline.ridge_tokens(gpu, dtype)
        assert t == pytest.approx(m.peak_flops * roofline.dtype_bytes(dtype) / (2 * m.bandwidth))
        memory = roofline.model_bytes(1e9, dtype) / m.bandwidth
        compute = roofline.forward_flops(1e9, tokens=t) / m.peak_flops
        assert compute == pytest.approx(memory)


def test_below_the_ridge_extra_tokens_are_free_above_it_they_cost():
    ridge = roofline.ridge_tokens("H100 SXM", "bf16")
    t1 = roofline.step_time(7e9, "bf16", "H100 SXM", tokens=1)
    assert roofline.step_time(7e9, "bf16", "H100 SXM", tokens=8) == t1
    twice_ridge = roofline.step_time(7e9, "bf16", "H100 SXM", tokens=int(2 * ridge))
    assert twice_ridge == pytest.approx(2 * t1, rel=0.01)


def test_batch_shares_the_weight_read_and_kv_reads_add_per_sequence():
    shape = roofline.Shape(layers=32, kv_heads=8, head_dim=128)
    per_token = roofline.kv_cache_bytes(shape, context=1, dtype="bf16")
    assert per_token == 2 * 32 * 8 * 128 * 2  # K and V, every layer and KV head
    one = roofline.step_time(8e9, "bf16", "H100 SXM", batch=1, context=4096, shape=shape)
    many = roofline.step_time(8e9, "bf16", "H100 SXM", batch=16, context=4096, shape=shape)
    weights = roofline.model_bytes(8e9, "bf16")
    assert many - one == pytest.approx(15 * 4096 * per_token / roofline.machine("H100 SXM").bandwidth)
    assert many < 16 * one and weights > 0


def test_arithmetic_intensity_grows_with_tokens_and_batch():
    assert roofline.arithmetic_intensity(1, "bf16") == 1.0
    assert roofline.arithmetic_intensity(8, "bf16", batch=4) == 32.0


def test_catalog_has_the_accelerators_the_course_needs():
    names = set(roofline.catalog())
    for needed in ("H100 SXM", "H200", "A100 40GB", "A100 80GB", "L4", "T4", "A10G", "RTX 4090"):
        assert needed in names
    assert any(n.startswith("Apple") for n in names)
    assert all(m.source for m in roofline.catalog().values())


@pytest.mark.parametrize("call, match", [
    (lambda: roofline.step_time(7e9, "fp8e5", "H100 SXM"), "dtype"),
    (lambda: roofline.step_time(7e9, "bf16", "H1000"), "unknown GPU"),
    (lambda: roofline.step_time(7e9, "bf16", "H100 SXM", tokens=0), "tokens"),
    (lambda: roofline.step_time(7e9, "bf16", "H100 SXM", context=100), "shape"),
    (lambda: roofline.Machine("bad", bandwidth=0, peak_flops=1e12, memory_bytes=1, source=""), "bandwidth"),
    (lambda: roofline.Machine("bad", bandwidth=1e9, peak_flops=-1, memory_bytes=1, source=""), "peak"),
    (lambda: roofline.model_bytes(-5, "bf16"), "n_params"),
])
def test_bad_input_raises_clear_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_measurements_are_positive_finite_and_quick():
    start = time.perf_counter()
    bandwidth = roofline.measure_bandwidth("cpu", megabytes=64, repeats=3)
    flops = roofline.measure_matmul_flops("cpu", n=512, repeats=3)
    assert time.perf_counter() - start < 10  # generous: it usually takes well under a second
    for value in (bandwidth, flops):
        assert value > 0 and math.isfinite(value)
    m = roofline.Machine("here", bandwidth, flops, float("nan"), "test")
    assert np.isfinite(roofline.step_time(135e6, "fp32", m))


def test_shape_of_reads_a_transformers_config():
    from specnotes import models

    model = models.tiny_llama(hidden_size=64, heads=4, kv_heads=2, layers=3)
    assert roofline.shape_of(model) == roofline.Shape(layers=3, kv_heads=2, head_dim=16)
