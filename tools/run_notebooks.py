"""Execute notebooks top to bottom and write their outputs in place, with cleaned metadata.

`make notebooks` runs this in full mode to produce the committed outputs readers see on GitHub.
Usage: python tools/run_notebooks.py [notebooks/NN_name.ipynb ...]  (default: all of notebooks/)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
# "accelerator" and "colab" are Colab's runtime request (tools/notebook_nav.py writes them for 06-08):
# without them Colab opens the notebook on a CPU runtime
KEEP_NOTEBOOK_META = {"kernelspec", "language_info", "accelerator", "colab"}
KEEP_COLAB_META = {"gpuType"}  # of Colab's own block; its provenance (who edited when) is emptied


def clean(nb) -> None:
    """Drop per-run noise (timestamps, widget state, collapsed flags) so diffs show content only."""
    nb.metadata = {k: v for k, v in nb.metadata.items() if k in KEEP_NOTEBOOK_META}
    if "colab" in nb.metadata:
        colab = {k: v for k, v in nb.metadata["colab"].items() if k in KEEP_COLAB_META}
        nb.metadata["colab"] = {**colab, "provenance": []}
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python",
                                 "name": "python3"}
    for cell in nb.cells:
        # tags, and the justifications tools/prose_claims.py reads from markdown cells
        cell.metadata = {key: cell.metadata[key] for key in ("tags", "claims") if cell.metadata.get(key)}
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                out["text"] = final_text(out["text"])


def final_text(text: str) -> str:
    """What a terminal shows of text with carriage returns: each line's last rewrite (a text progress
    bar's final state)."""
    return "\n".join(line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r")
                     for line in text.split("\n"))


def run(path: Path, timeout: int = 1800) -> float:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", coalesce_streams=True,
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    clean(nb)
    nbformat.write(nb, path)
    return seconds


def main(argv: list[str]) -> int:
    # the kernels inherit it: text progress bars, kept at their final state
    os.environ["SPECNOTES_TEXT_PROGRESS"] = "1"
    # transformers' and huggingface_hub's own bars (save_pretrained's "Writing model shards") are widgets that
    # env.progress_bar cannot reach; a committed widget shows 0% on GitHub, so those bars are switched off
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    paths = [Path(a) for a in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    failed = 0
    for path in paths:
        try:
            seconds = run(path)
            print(f"{path.name}: {seconds:.0f} s")
        except CellExecutionError as exc:
            failed += 1
            print(f"{path.name}: FAILED\n{str(exc)[:2000]}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
