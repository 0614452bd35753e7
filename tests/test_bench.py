import numpy as np
import pytest

from specnotes import bench, models


def test_time_call_warms_up_then_times_each_repeat():
    calls = []
    timing = bench.time_call(lambda: calls.append(1), repeats=5, warmup=2)
    assert len(calls) == 7 and timing.seconds.shape == (5,)
    assert timing.spread[0] <= timing.median <= timing.spread[1]


def test_time_forward_times_each_step_on_a_tiny_model():
    model = models.tiny_llama(seed=0)
    timing = bench.time_forward(model, context=16, tokens=4, repeats=3, warmup=1)
    assert np.all(timing.seconds > 0)


def test_time_call_rejects_nonsense():
    with pytest.raises(ValueError):
        bench.time_call(lambda: None, repeats=0)
