"""The trained drafters' caches and committed weights: teacher targets and hidden states are keyed by the
target's weights (not its size), every cached file is checked against the checksum beside it and is
recomputed when damaged, and weights trained for SmolLM2-135M are never loaded into another target."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specnotes import distill, models
from specnotes.drafters import EagleLite, EarlyExit, Medusa, early_exit, load_distilled_draft, medusa

VOCAB = 49152  # the committed self-distillation set's vocabulary (SmolLM2's tokenizer)


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """A throwaway cache root: nothing here touches the real ~/.cache/specnotes."""
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))
    return tmp_path / "drafters"


def inputs(seed: int = 0, vocab: int = 256) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, (4, 16))


def teacher(target, ids):
    return distill.teacher_targets(target, ids, k=4, progress=False)


def hidden(target, ids):
    return medusa.hidden_states(target, ids, progress=False)


def damage(path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "flipped byte":
        data[len(data) // 2] ^= 0x01
    else:
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))


def test_the_fingerprint_follows_the_weights_not_the_size():
    a, b = models.tiny_llama(seed=0), models.tiny_llama(seed=1)
    assert distill.fingerprint(a) != distill.fingerprint(b)
    twin = models.tiny_llama(seed=0)
    assert distill.fingerprint(twin) == distill.fingerprint(a)
    with torch.no_grad():
        twin.model.layers[1].mlp.up_proj.weight[3, 5] += 1e-3
    assert distill.fingerprint(twin) != distill.fingerprint(a)
    with pytest.raises(ValueError, match="meta"):
        distill.fingerprint(models.tiny_llama(seed=0).to("meta"))


def test_two_targets_of_the_same_size_get_their_own_teacher_targets(cache):
    a, b = models.tiny_llama(seed=0), models.tiny_llama(seed=1)
    ids = inputs()
    teacher(a, ids)
    served = teacher(b, ids)
    fresh = distill.teacher_topk(b, ids, k=4, progress=False)
    assert np.array_equal(served[0], fresh[0])


def test_two_targets_of_the_same_size_get_their_own_hidden_states(cache):
    a, b = models.tiny_llama(seed=0), models.tiny_llama(seed=1)
    ids = inputs()
    first = hidden(a, ids)
    assert not np.allclose(hidden(b, ids), first)
    assert np.array_equal(hidden(a, ids), first)  # and the first one is still served from its cache


@pytest.mark.parametrize("how", ["flipped byte", "truncated"])
@pytest.mark.parametrize("kind", ["teacher", "hidden"])
def test_a_damaged_cached_array_is_detected_and_recomputed(cache, capsys, kind, how):
    compute = {"teacher": lambda t, x: teacher(t, x)[1], "hidden": hidden}[kind]
    target, ids = models.tiny_llama(seed=0), inputs()
    expected = compute(target, ids)
    (path,) = [p for p in cache.iterdir() if p.suffix in (".npz", ".npy")]
    damage(path, how)
    capsys.readouterr()
    assert np.array_equal(compute(target, ids), expected)
    out = capsys.readouterr().out
    assert path.name in out and "damaged" in out and "recomputing" in out, out
    assert len(out.strip().splitlines()) == 1, out
    compute(target, ids)  # the recomputed file is whole again: no second message
    assert capsys.readouterr().out == ""


def wide(seed: int = 0):
    """A tiny target with the committed set's vocabulary, so quick training on it is allowed."""
    return models.tiny_llama(seed=seed, vocab_size=VOCAB, hidden_size=64, layers=4)


def count_quick_training(monkeypatch) -> list:
    calls = []
    real = early_exit.train_exit_adapter

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **{**kwargs, "progress": False})

    monkeypatch.setattr(early_exit, "train_exit_adapter", counted)
    return calls


def trained_exit(target):
    return EarlyExit(target, 2, adapter="trained", rank=8, quick_seconds=0.2)


@pytest.mark.parametrize("how", ["flipped byte", "truncated"])
def test_a_damaged_cached_drafter_is_detected_and_retrained(cache, capsys, monkeypatch, how):
    calls = count_quick_training(monkeypatch)
    target = wide()
    trained_exit(target)
    (path,) = cache.glob("exit-adapter-*.safetensors")
    damage(path, how)
    capsys.readouterr()
    trained_exit(target)
    out = capsys.readouterr().out
    assert len(calls) == 2
    assert path.name in out and "damaged" in out and "retraining" in out, out
    trained_exit(target)  # the retrained file is whole: loaded, not trained a third time
    assert len(calls) == 2


def test_a_cached_drafter_trained_for_another_target_is_not_loaded(cache, monkeypatch):
    calls = count_quick_training(monkeypatch)
    trained_exit(wide(seed=0))
    trained_exit(wide(seed=1))  # same size, other weights
    assert len(calls) == 2
    assert len(list(cache.glob("exit-adapter-*.safetensors"))) == 2


TINY = models.tiny_llama(seed=0, layers=4)  # vocabulary 256, hidden 64: nothing committed fits it
ADVICE = {
    "medusa": (lambda: Medusa(TINY), "heads="),
    "eagle-lite": (lambda: EagleLite(TINY), "model="),
    "early exit": (lambda: EarlyExit(TINY, adapter="trained"), "adapter="),
    "distilled draft": (lambda: load_distilled_draft(TINY), "train_distilled_draft"),
}


@pytest.mark.parametrize("drafter", list(ADVICE))
def test_a_trained_drafter_around_a_target_with_another_vocabulary_says_what_to_pass(cache, drafter):
    make, advice = ADVICE[drafter]
    with pytest.raises(ValueError, match="SmolLM2-135M") as err:
        make()
    message = str(err.value)
    assert advice in message and "vocab 256" in message and "hidden 64" in message, message
    assert not cache.exists() or not any(cache.iterdir())  # nothing was trained or cached


def test_the_committed_medusa_heads_are_not_loaded_into_a_target_that_only_shares_the_hidden_size(cache):
    target = models.tiny_llama(seed=0, vocab_size=256, hidden_size=576, layers=1, heads=9, kv_heads=3)
    with pytest.raises(ValueError, match="vocab 256"):
        Medusa(target)


def smollm2_shaped_on_meta():
    with torch.device("meta"):
        return models.tiny_llama(vocab_size=VOCAB, hidden_size=576, layers=30, heads=9, kv_heads=3)


def test_an_unreadable_committed_drafter_fails_with_a_message_that_says_how_to_restore_it(
        cache, monkeypatch, tmp_path):
    data = tmp_path / "committed"
    data.mkdir()
    good = (distill.DATA / medusa.FILE.format(n=3)).read_bytes()
    (data / medusa.FILE.format(n=3)).write_bytes(good[: len(good) // 2])
    monkeypatch.setattr(distill, "DATA", data)
    with pytest.raises(RuntimeError, match="git checkout"):
        Medusa(smollm2_shaped_on_meta())


def test_load_trainable_names_a_wrong_shaped_parameter(tmp_path):
    saved = early_exit.exit_model(TINY, 2, rank=8)
    path = distill.save_trainable(saved, tmp_path / "a.safetensors")
    with pytest.raises(ValueError, match="model.norm.down.weight"):
        distill.load_trainable(early_exit.exit_model(TINY, 2, rank=4), path)


def test_load_trainable_refuses_a_file_that_leaves_a_trainable_parameter_unloaded(tmp_path):
    from safetensors.torch import save_file

    module = early_exit.exit_model(TINY, 2, rank=8)
    path = tmp_path / "half.safetensors"
    save_file({"model.norm.down.weight": module.model.norm.down.weight.detach().clone()}, str(path))
    with pytest.raises(ValueError, match="model.norm.up.weight"):
        distill.load_trainable(module, path)
