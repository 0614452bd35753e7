"""Trained-drafter weights (weights.load_or_train, save, load): a damaged cached drafter is retrained, one
trained for another target is not loaded, committed weights are used only for the target they were
trained for, and a drafter around a target with another vocabulary says what to pass instead."""

from __future__ import annotations

import pytest
import torch

from specnotes import models, weights
from specnotes.drafters import EagleLite, EarlyExit, Medusa
from specnotes.training import early_exit, medusa
from specnotes.training.distilled import load_distilled_draft
from specnotes.training.early_exit import exit_model

VOCAB = 49152  # the committed self-distillation set's vocabulary (SmolLM2's tokenizer)


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
def test_a_damaged_cached_drafter_is_detected_and_retrained(drafter_cache, damage, capsys, monkeypatch, how):
    calls = count_quick_training(monkeypatch)
    target = wide()
    trained_exit(target)
    (path,) = drafter_cache.glob("exit-adapter-*.safetensors")
    damage(path, how)
    capsys.readouterr()
    trained_exit(target)
    out = capsys.readouterr().out
    assert len(calls) == 2
    assert path.name in out and "damaged" in out and "retraining" in out, out
    trained_exit(target)  # the retrained file is whole: loaded, not trained a third time
    assert len(calls) == 2


def test_a_cached_drafter_trained_for_another_target_is_not_loaded(drafter_cache, monkeypatch):
    calls = count_quick_training(monkeypatch)
    trained_exit(wide(seed=0))
    trained_exit(wide(seed=1))  # same size, other weights
    assert len(calls) == 2
    assert len(list(drafter_cache.glob("exit-adapter-*.safetensors"))) == 2


TINY = models.tiny_llama(seed=0, layers=4)  # vocabulary 256, hidden 64: nothing committed fits it
ADVICE = {
    "medusa": (lambda: Medusa(TINY), "heads="),
    "eagle-lite": (lambda: EagleLite(TINY), "model="),
    "early exit": (lambda: EarlyExit(TINY, adapter="trained"), "adapter="),
    "distilled draft": (lambda: load_distilled_draft(TINY), "train_distilled_draft"),
}


@pytest.mark.parametrize("drafter", list(ADVICE))
def test_a_trained_drafter_around_a_target_with_another_vocabulary_says_what_to_pass(drafter_cache, drafter):
    make, advice = ADVICE[drafter]
    with pytest.raises(ValueError, match="SmolLM2-135M") as err:
        make()
    message = str(err.value)
    assert advice in message and "vocab 256" in message and "hidden 64" in message, message
    assert not drafter_cache.exists() or not any(drafter_cache.iterdir())  # nothing was trained or cached


def test_the_committed_medusa_heads_are_not_loaded_into_a_target_that_only_shares_the_hidden_size(
        drafter_cache):
    target = models.tiny_llama(seed=0, vocab_size=256, hidden_size=576, layers=1, heads=9, kv_heads=3)
    with pytest.raises(ValueError, match="vocab 256"):
        Medusa(target)


def smollm2_shaped_on_meta():
    with torch.device("meta"):
        return models.tiny_llama(vocab_size=VOCAB, hidden_size=576, layers=30, heads=9, kv_heads=3)


def test_an_unreadable_committed_drafter_fails_with_a_message_that_says_how_to_restore_it(
        drafter_cache, monkeypatch, tmp_path):
    data = tmp_path / "committed"
    data.mkdir()
    good = (weights.DATA / medusa.FILE.format(n=3)).read_bytes()
    (data / medusa.FILE.format(n=3)).write_bytes(good[: len(good) // 2])
    monkeypatch.setattr(weights, "DATA", data)
    with pytest.raises(RuntimeError, match="git checkout"):
        Medusa(smollm2_shaped_on_meta())


def test_load_names_a_wrong_shaped_parameter(tmp_path):
    saved = exit_model(TINY, 2, rank=8)
    path = weights.save(saved, tmp_path / "a.safetensors")
    with pytest.raises(ValueError, match="model.norm.down.weight"):
        weights.load(exit_model(TINY, 2, rank=4), path)


def test_load_refuses_a_file_that_leaves_a_trainable_parameter_unloaded(tmp_path):
    from safetensors.torch import save_file

    module = exit_model(TINY, 2, rank=8)
    path = tmp_path / "half.safetensors"
    save_file({"model.norm.down.weight": module.model.norm.down.weight.detach().clone()}, str(path))
    with pytest.raises(ValueError, match="model.norm.up.weight"):
        weights.load(module, path)


def test_trained_weights_round_trip_through_save_and_load(tmp_path):
    model = exit_model(TINY, 2, rank=8)
    with torch.no_grad():
        model.model.norm.up.weight.fill_(0.25)
    path = weights.save(model, tmp_path / "a.safetensors", {"n_layers": 2})
    fresh = exit_model(TINY, 2, rank=8)
    assert weights.load(fresh, path) == {"n_layers": "2"}
    assert torch.equal(fresh.model.norm.up.weight, model.model.norm.up.weight)
    with pytest.raises(ValueError, match="does not have"):
        weights.load(exit_model(TINY, 2, rank=None), path)
