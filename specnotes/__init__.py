"""specnotes: learn speculative decoding for LLMs by running it.

Submodules load on first use, so `import specnotes` stays fast; torch and
transformers are imported only when a module that needs them is touched.
"""

from importlib import import_module

from specnotes.env import quick_mode, setup

__version__ = "0.1.0"
__all__ = ["quick_mode", "setup", "__version__"]

_SUBMODULES = {
    "bench", "bugzoo", "compare", "decode", "distill", "drafters", "engine", "env", "exercises", "models",
    "roofline", "rules", "theory", "timings", "toy", "viz", "widgets",
}


def __getattr__(name):
    if name in _SUBMODULES:
        return import_module(f"specnotes.{name}")
    raise AttributeError(f"module 'specnotes' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBMODULES)
