"""specnotes: learn speculative decoding for LLMs by running it.

Submodules load on first use, so `import specnotes` stays fast; torch and
transformers are imported only when a module that needs them is touched.
"""

import pkgutil
from importlib import import_module

from specnotes.env import quick_mode, setup

__version__ = "0.1.0"
__all__ = ["quick_mode", "setup", "__version__"]

# every module and subpackage in this folder, so a new file is reachable as specnotes.<name> at once
_SUBMODULES = frozenset(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def __getattr__(name):
    if name in _SUBMODULES:
        return import_module(f"specnotes.{name}")
    raise AttributeError(f"module 'specnotes' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBMODULES)
