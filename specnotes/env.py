"""Where the code is running: quick mode, the device rule (device and dtype), versions, the environment check.

Used by every notebook's first cells (00 prints it in full), by every module that makes a tensor for a
model, and by the bench reports.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass
from importlib import metadata

from specnotes.placement import device_of, dtype_of
from specnotes.store import cache_problem, cache_state

_TRUE = {"1", "true", "yes", "on"}


def quick_mode() -> bool:
    """True when SPECNOTES_QUICK asks for the small, CI-sized run (same code, smaller sizes)."""
    return os.environ.get("SPECNOTES_QUICK", "").strip().lower() in _TRUE


def progress_bar():
    """tqdm's class for this session: the notebook widget in a live frontend, or text bars when
    SPECNOTES_TEXT_PROGRESS is set. tools/run_notebooks.py sets it, so a committed notebook keeps each bar's
    final text instead of a widget whose state GitHub drops (it would show the bar at 0%)."""
    if os.environ.get("SPECNOTES_TEXT_PROGRESS"):
        from tqdm.std import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm


def in_colab() -> bool:
    """True inside a Google Colab runtime."""
    return "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ


def default_device() -> str:
    """'cuda' when a CUDA GPU is visible, else 'cpu' (MPS is opt-in: its kernels differ)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def default_dtype(device: str):
    """bf16 on GPUs with native bf16 (Ampere and newer), fp16 on older ones such as Colab's T4,
    fp32 on CPU (CPU half-precision matmuls are slow)."""
    import torch

    if str(device).startswith("cuda"):
        try:
            native = torch.cuda.is_bf16_supported(including_emulation=False)
        except TypeError:  # torch < 2.4 has no emulation flag; ask the hardware generation instead
            native = torch.cuda.get_device_capability()[0] >= 8
        return torch.bfloat16 if native else torch.float16
    return torch.float32


def half_dtype(device):
    """The 16-bit dtype this device runs natively: fp16 on CUDA GPUs without native bf16 (a T4), bf16 on
    Ampere and newer and on the CPU. Notebook 08 compares it against fp32."""
    import torch

    dtype = default_dtype(device)
    return dtype if dtype != torch.float32 else torch.bfloat16


_FLOAT_NAMES = {"fp32": "float32", "float": "float32", "bf16": "bfloat16", "fp16": "float16",
                "half": "float16", "float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def torch_dtype(dtype):
    """A torch floating dtype from itself or a name: 'fp32', 'bf16', 'fp16' (the names the roofline uses)
    or 'float32', 'bfloat16', 'float16'. Anything else is a ValueError naming dtype."""
    import torch

    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        return dtype
    known = isinstance(dtype, (str, torch.dtype))
    name = _FLOAT_NAMES.get(str(dtype).removeprefix("torch.").lower()) if known else None
    if name is None:
        raise ValueError(f"dtype must be a floating-point torch dtype or one of {', '.join(_FLOAT_NAMES)}, "
                         f"got {dtype!r}")
    return getattr(torch, name)


def dtype_name(dtype) -> str:
    """'float32', 'bfloat16', 'float16': the label every report and prediction prints."""
    return str(dtype).removeprefix("torch.")


def model_facts(model) -> dict:
    """{device, device_name, dtype} of the model as it runs: the labels a report must carry (the default
    device is not necessarily the one a model was put on)."""
    device = device_of(model)
    return {"device": device.type, "device_name": device_name(device), "dtype": dtype_name(dtype_of(model))}


def device_name(device) -> str:
    """The GPU's name on CUDA; on every other device the CPU's model (cpu_name), which on a Mac is also
    the chip that runs MPS."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_name()


def cpu_name() -> str:
    """The processor's model as the OS names it: the "model name" of /proc/cpuinfo on Linux (where
    platform.processor() is empty), sysctl's brand string on macOS, platform.processor() elsewhere (on
    Windows, "Intel64 Family 6 Model 158 ..."), and the architecture (platform.machine()) when none of
    them says. Never the word "cpu": reference runs are named after it (references.fingerprint), and a name
    every CPU shares let one machine's --save-reference replace another machine's committed run."""
    name = ""
    if platform.system() == "Linux":
        fields = (line.partition(":") for line in _read_cpuinfo().splitlines())
        name = next((value.strip() for key, _, value in fields if key.strip() == "model name"), "")
    elif platform.system() == "Darwin":
        name = _sysctl_brand()
    return " ".join((name or platform.processor() or platform.machine() or "unknown processor").split())


def _read_cpuinfo() -> str:
    """/proc/cpuinfo, or "" where it cannot be read (a sandbox without /proc)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _sysctl_brand() -> str:
    """macOS's name for its CPU ("Apple M2 Pro", "Intel(R) Core(TM) i7-9750H ..."), or "" if sysctl fails."""
    try:
        out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
                             timeout=5)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def version_of(package: str) -> str | None:
    """Installed version of a distribution, or None when it is missing."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Environment:
    python: str
    platform: str
    torch: str | None
    transformers: str | None
    numpy: str | None
    device: str
    device_name: str
    dtype: str
    threads: int
    quick: bool
    colab: bool
    model_cache: str
    model_cached: bool

    def as_dict(self) -> dict:
        return asdict(self)


def environment() -> Environment:
    """Collect the facts every figure in the course is printed beside."""
    import torch

    device = default_device()
    store = cache_state()
    return Environment(
        python=platform.python_version(),
        platform=platform.platform(terse=True),
        torch=version_of("torch"),
        transformers=version_of("transformers"),
        numpy=version_of("numpy"),
        device=device,
        device_name=device_name(device),
        dtype=dtype_name(default_dtype(device)),
        threads=torch.get_num_threads(),
        quick=quick_mode(),
        colab=in_colab(),
        model_cache=str(store.path),
        model_cached=store.ok,
    )


def setup(verbose: bool = True) -> Environment:
    """Print the environment check (versions, device, dtype, threads, quick mode, model cache)."""
    env = environment()
    if verbose:
        state = cache_problem() or "not fetched yet"  # a cache that cannot be a folder says why
        rows = [
            ("python", f"{env.python} on {env.platform}"),
            ("torch / transformers / numpy", f"{env.torch} / {env.transformers} / {env.numpy}"),
            ("device", f"{env.device} ({env.device_name})"),
            ("dtype", env.dtype),
            ("CPU threads used by torch", str(env.threads)),
            ("quick mode (SPECNOTES_QUICK)", "on" if env.quick else "off"),
            ("model cache", f"{env.model_cache} [{'ready' if env.model_cached else state}]"),
        ]
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            print(f"{key:<{width}}  {value}")
        if env.colab and env.device != "cuda":
            print(
                "\nYou are on Colab without a GPU. Everything here runs on CPU, but for the timing "
                "notebooks choose Runtime > Change runtime type > T4 GPU, then rerun from the top."
            )
    return env
