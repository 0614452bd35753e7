"""The offline store on disk: written whole or not at all, readable by everyone, checked by size and CRC-32
on every load and by sha256 on request, and one fetch at a time. What goes wrong with it in a workshop is
tests/test_store_faults.py; where its model comes from is tests/test_wheel.py."""

import json
import os
import threading
import time
from pathlib import Path

import pytest

from specnotes import models, offline, store


def test_write_store_round_trips_and_verifies(tmp_path):
    model = models.tiny_llama(seed=1)
    dest = store.write_store(tmp_path / "tiny", model)
    assert store.verify_store(dest, tokenizer=False) == ""
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dirs left


def test_truncated_weights_are_reported_never_loaded(tmp_path):
    dest = store.write_store(tmp_path / "tiny", models.tiny_llama(seed=1))
    weights = dest / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    assert "truncated" in store.verify_store(dest, tokenizer=False)


def test_bit_rot_is_caught_even_with_size_and_mtime_unchanged(tmp_path):
    dest = store.write_store(tmp_path / "tiny", models.tiny_llama(seed=1))
    weights = dest / "model.safetensors"
    before = weights.stat()
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x10  # one flipped bit inside the tensor data
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert "CRC-32" in store.verify_store(dest, tokenizer=False)


def test_full_verification_recomputes_sha256(tmp_path):
    dest = store.write_store(tmp_path / "tiny", models.tiny_llama(seed=1))
    assert store.verify_store(dest, full=True, tokenizer=False) == ""
    manifest = json.loads((dest / store.MANIFEST).read_text())
    manifest["files"]["model.safetensors"]["sha256"] = "0" * 64
    (dest / store.MANIFEST).write_text(json.dumps(manifest))
    assert store.verify_store(dest, tokenizer=False) == ""  # the fast check cannot see a sha256 mismatch...
    assert "sha256" in store.verify_store(dest, full=True, tokenizer=False)  # ...the full one does


def test_stored_files_are_readable_by_everyone(tmp_path):
    dest = store.write_store(tmp_path / "tiny", models.tiny_llama(seed=1))
    assert all(f.stat().st_mode & 0o044 == 0o044 for f in dest.iterdir())


def test_an_interrupted_write_leaves_no_store(tmp_path, monkeypatch):
    model = models.tiny_llama(seed=1)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(model, "save_pretrained", crash)
    with pytest.raises(KeyboardInterrupt):
        store.write_store(tmp_path / "tiny", model)
    assert list(tmp_path.iterdir()) == []
    assert store.verify_store(tmp_path / "tiny") == "not fetched yet"


def test_rewriting_a_store_replaces_it_whole(tmp_path):
    dest = store.write_store(tmp_path / "tiny", models.tiny_llama(seed=1))
    store.write_store(dest, models.tiny_llama(seed=2, layers=1))
    assert store.verify_store(dest, tokenizer=False) == ""
    assert [p.name for p in tmp_path.iterdir()] == ["tiny"]


def test_one_fetch_at_a_time_through_a_cross_platform_file_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))
    order = []
    holding = threading.Event()

    def first():
        with offline._lock("m"):
            holding.set()
            time.sleep(0.3)
            order.append("first done")

    t = threading.Thread(target=first)
    t.start()
    holding.wait(5)
    with offline._lock("m"):
        order.append("second in")
    t.join()
    assert order == ["first done", "second in"]
    assert (tmp_path / ".lock-m").exists()
    assert "fcntl" not in Path(offline.__file__).read_text()  # filelock picks the OS's own mechanism
