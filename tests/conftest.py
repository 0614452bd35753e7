"""Shared fixtures: headless plotting, the real offline model (fetched once per session), tiny models."""

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
