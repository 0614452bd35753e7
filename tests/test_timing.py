import numpy as np
import pytest
import torch

from specnotes import models, timing


def test_time_call_warms_up_then_times_each_repeat():
    calls = []
    t = timing.time_call(lambda: calls.append(1), repeats=5, warmup=2)
    assert len(calls) == 7 and t.seconds.shape == (5,)
    assert t.spread[0] <= t.median <= t.spread[1]


def test_time_forward_times_each_step_on_a_tiny_model():
    model = models.tiny_llama(seed=0)
    t = timing.time_forward(model, context=16, tokens=4, repeats=3, warmup=1)
    assert np.all(t.seconds > 0)


def test_time_call_rejects_nonsense():
    with pytest.raises(ValueError):
        timing.time_call(lambda: None, repeats=0)


NAN, INF = float("nan"), float("inf")
BAD_COUNTS = [0, -1, 2.5, True, NAN, INF, "3", None, [1, 2]]  # each must fail, naming its argument


def nothing():
    return None


@pytest.mark.parametrize("name, value", [("repeats", v) for v in BAD_COUNTS]
                         + [("warmup", v) for v in (-1, 0.5, True, NAN, INF, "1", None)])
def test_time_call_names_the_bad_argument(name, value):
    with pytest.raises((ValueError, TypeError), match=name):
        timing.time_call(nothing, **{"repeats": 1, "warmup": 0, name: value})


def test_time_call_needs_something_to_call():
    with pytest.raises(TypeError, match="fn"):
        timing.time_call(3, repeats=1, warmup=0)


TINY = models.tiny_llama(seed=0, layers=1)


@pytest.mark.parametrize("name, value", [("context", v) for v in (-1, 2.5, True, NAN, [4, 8])]
                         + [("tokens", v) for v in (0, -2, 1.5, True, INF)] + [("context", 10**9)])
def test_time_forward_names_the_bad_argument(name, value):
    with pytest.raises((ValueError, TypeError), match=name):
        timing.time_forward(TINY, **{"context": 4, "tokens": 1, "repeats": 1, "warmup": 0, name: value})


def test_time_forward_times_a_pass_with_no_cache_at_context_zero():
    """roofline.tokens_curve takes context=0 (nothing cached yet): the pass then runs with no cache."""
    assert timing.time_forward(TINY, context=0, tokens=3, repeats=2, warmup=0).median > 0


def one_token(ids, do_sample, seed):
    return timing.Output([0])


PROMPTS = {"copy": [torch.tensor([[5, 6, 7]])]}


@pytest.mark.parametrize("kwargs, name", [
    *[(dict(repeats=v), "repeats") for v in (0, 2.5, True, NAN, None)],
    *[(dict(warmup=v), "warmup") for v in (-1, 0.5, True, INF)],
    *[(dict(seed=v), "seed") for v in (1.5, -1, None, True)],
    (dict(samplings="greedy"), "samplings"), (dict(samplings=()), "samplings"),
    (dict(samplings=("beam",)), "sampling"),
    (dict(modes={}), "modes"), (dict(modes=[one_token]), "modes"), (dict(modes={"x": 3}), "modes"),
    (dict(prompts={}), "prompts"), (dict(prompts=[PROMPTS["copy"][0]]), "prompts"),
    (dict(prompts={"copy": []}), "prompts"), (dict(prompts={"copy": [[5, 6, 7]]}), "prompts"),
    (dict(prompts={"copy": [torch.tensor([5, 6, 7])]}), "prompts"),
    (dict(prompts={"copy": [torch.tensor([[5, 999]])]}), "prompts"),
])
def test_round_robin_names_the_bad_argument(kwargs, name):
    args = {"modes": {"one": one_token}, "prompts": PROMPTS, "samplings": ("greedy",), "repeats": 1,
            "warmup": 0, "progress": False, **kwargs}
    with pytest.raises((ValueError, TypeError), match=name):
        timing.round_robin(TINY, **args)


def test_round_robin_says_which_mode_returned_something_else_than_an_output():
    with pytest.raises(TypeError, match="'tokens' returned a list.*Output"):
        timing.round_robin(TINY, {"tokens": lambda ids, s, seed: [0]}, PROMPTS, ("greedy",), 1, 0,
                          progress=False)


# --------------------------------------------------------------------------- pass_times: one timer of passes


def test_pass_times_times_every_pass_each_round_and_crops_the_shared_cache_back():
    from specnotes.passes import cache_length

    gen = torch.Generator().manual_seed(0)
    cache = timing.cache_of(TINY, timing.random_ids(TINY, (1, 6), gen))
    passes = {"one": timing.Pass(timing.random_ids(TINY, (1, 1), gen), cache),
              "three": timing.Pass(timing.random_ids(TINY, (1, 3), gen), cache, keep=3),
              "fresh": timing.Pass(timing.random_ids(TINY, (1, 4), gen), keep=1)}  # no cache: a prompt pass
    times = timing.pass_times(TINY, passes, repeats=3, warmup=1)
    assert set(times) == set(passes) and all(t.seconds.shape == (3,) for t in times.values())
    assert cache_length(cache) == 6  # every pass on it was cropped back: each run saw the same context


def test_pass_times_runs_warm_up_rounds_untimed_then_interleaves_the_passes(monkeypatch):
    import specnotes.passes

    seen = []
    monkeypatch.setattr(specnotes.passes, "forward_pass", lambda model, ids, cache, keep: seen.append(
        int(ids.shape[1])))
    ids = {n: torch.zeros(1, n, dtype=torch.long) for n in (1, 2)}
    times = timing.pass_times(TINY, {n: timing.Pass(x) for n, x in ids.items()}, repeats=2, warmup=1)
    assert seen == [1, 2] * 3  # one warm-up round, then two timed rounds, the passes taking turns
    assert [t.seconds.shape for t in times.values()] == [(2,), (2,)]


@pytest.mark.parametrize("kwargs, name", [
    (dict(passes={}), "passes"), (dict(passes=[timing.Pass(torch.zeros(1, 1, dtype=torch.long))]), "passes"),
    (dict(passes={"x": torch.zeros(1, 1, dtype=torch.long)}), "passes"),
    *[(dict(repeats=v), "repeats") for v in (0, 1.5, True)], *[(dict(warmup=v), "warmup") for v in (-1, NAN)],
])
def test_pass_times_names_the_bad_argument(kwargs, name):
    args = {"passes": {"x": timing.Pass(torch.zeros(1, 1, dtype=torch.long))}, "repeats": 1, **kwargs}
    with pytest.raises((ValueError, TypeError), match=name):
        timing.pass_times(TINY, **args)


def test_round_robin_warms_every_mode_up_once_per_sampling_on_the_first_prompt_only():
    calls = []

    def mode(name):
        def run(ids, do_sample, seed):
            calls.append((name, int(ids[0, 0]), do_sample))
            return timing.Output([0])
        return run

    prompts = {"copy": [torch.tensor([[5, 6]]), torch.tensor([[7, 8]])], "free": [torch.tensor([[9]])]}
    samples = timing.round_robin(TINY, {"a": mode("a"), "b": mode("b")}, prompts, ("greedy", "sample"),
                                 repeats=2, warmup=1, progress=False)
    assert calls[:4] == [("a", 5, False), ("b", 5, False), ("a", 5, True), ("b", 5, True)]  # the warm-up
    assert len(calls) == 4 + 2 * 2 * 3 * 2 and len(samples) == 2 * 2 * 3 * 2  # it is not recorded
