"""Models to decode with: the offline default (from specnotes.store) or a model-hub name, and tiny
random-weight Llamas for tests.

Notebook 00 loads the default model; every later notebook and the tests start here.
"""

from __future__ import annotations

import contextlib
import threading
import urllib.error
import urllib.request
from typing import NamedTuple

from huggingface_hub import constants

from specnotes import checks, offline, store
from specnotes.env import default_device, default_dtype, torch_dtype
from specnotes.store import DEFAULT


class OfflineError(ConnectionError):
    """A model-hub name was asked for and the hub cannot be reached."""



class TinyPair(NamedTuple):
    target: object
    draft: object


def load(name: str = DEFAULT, device: str | None = None, dtype=None):
    """(model, tokenizer) for an offline catalog name, or for a model-hub name when online.

    `name` is "smollm2-135m" (works offline, fetched on first use) or an "owner/model" hub id.
    `device` defaults to "cuda" when a CUDA GPU is visible, else "cpu". `dtype` defaults to what
    specnotes.env.default_dtype gives that device: fp32 on the CPU (and any non-CUDA device), fp16 on
    GPUs without native bf16 (Colab's T4), bf16 on Ampere and newer GPUs.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a model name string, got {name!r}")
    import torch

    device = device or default_device()
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device {device!r} is not a device torch knows ({exc})") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: torch sees no CUDA GPU here (use device='cpu', or leave it "
                         "out)")
    dtype = torch_dtype(dtype) if dtype is not None else default_dtype(device)
    if "/" in name:
        return _load_hub(name, device, dtype)
    src = store.source(name)
    path = store.model_dir(name)
    problem = store.verify_store(path)
    if problem and path.exists():
        print(f"The cached {src.name} at {path} is damaged ({problem}); rebuilding it.")
        try:
            offline.fetch(name)
        except store.CorruptCacheError as exc:
            raise store.CorruptCacheError(
                f"the cached model at {path} is unusable ({problem}) and rebuilding failed: {exc}"
            ) from exc
    elif problem:
        offline.fetch(name)  # first use; a FetchError explains itself
    with quiet_transformers():  # a 0.1 s "Loading weights" bar on every warm load is noise
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
    return model, tokenizer


@contextlib.contextmanager
def quiet_transformers():
    from transformers.utils import logging as hf_logging

    bars, level = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def _hub_url() -> str:
    """The hub that transformers would download from: huggingface_hub's own setting (HF_ENDPOINT)."""
    return constants.ENDPOINT


def hub_reachable(timeout: float = 3.0) -> bool:
    """Does the hub answer HTTP (through any HTTPS_PROXY) within the timeout? Any HTTP status counts.

    Runs in a daemon thread so a resolver or firewall that never answers cannot block the caller."""
    result = []
    url = _hub_url()

    def probe():
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout)
            result.append(True)
        except urllib.error.HTTPError:
            result.append(True)  # it answered, even if not with 200
        except (OSError, ValueError):
            result.append(False)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout)
    return bool(result and result[0])


def _offline_env() -> bool:
    """huggingface_hub's offline switch (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE, read as it reads them)."""
    return bool(constants.HF_HUB_OFFLINE)


def _load_hub(name: str, device: str, dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    def get(local_only: bool):
        model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype, local_files_only=local_only)
        tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=local_only)
        return model.to(device).eval(), tokenizer

    with contextlib.suppress(OSError, ValueError):
        return get(local_only=True)  # already in the Hugging Face cache
    switched_off = _offline_env()
    why = ("HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set" if switched_off
           else f"the hub ({_hub_url()}) cannot be reached from here")
    offline = OfflineError(
        f"{name!r} is a model-hub name, {why}, and the model is not in the local Hugging Face cache. "
        f"Offline, use the default: specnotes.models.load({DEFAULT!r}). On Colab or with network "
        "access, hub names work."
    )
    if switched_off or not hub_reachable():
        raise offline
    try:
        return get(local_only=False)
    except OSError as exc:  # the hub answered the probe but the download failed part-way
        if "not a valid model identifier" in str(exc) or "does not appear to have" in str(exc):
            raise
        raise offline from exc



# --------------------------------------------------------------------------- tiny random pairs


def tiny_llama(seed: int = 0, vocab_size: int = 256, hidden_size: int = 64, layers: int = 2,
               heads: int = 4, kv_heads: int = 2, max_positions: int = 512):
    """A random-weight LlamaForCausalLM from a config: no download, builds in milliseconds."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    vocab_size, hidden_size, layers, heads, kv_heads, max_positions = (
        checks.whole(v, name, low=low, high=high, scalar=True) for v, name, low, high in (
            (vocab_size, "vocab_size", 2, 10_000_000), (hidden_size, "hidden_size", 1, 65_536),
            (layers, "layers", 1, 1024), (heads, "heads", 1, None), (kv_heads, "kv_heads", 1, None),
            (max_positions, "max_positions", 1, None)))
    if hidden_size % heads or heads % kv_heads:
        raise ValueError(f"hidden_size ({hidden_size}) must divide by heads ({heads}), "
                         f"and heads by kv_heads ({kv_heads})")
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions, bos_token_id=0, eos_token_id=1, pad_token_id=1,
        tie_word_embeddings=True,
        # wider than the usual 0.02 so a random model's next-token distributions are peaked and varied;
        # at 0.02 greedy decoding collapses to one repeated token, which makes tests too easy to pass
        initializer_range=0.3,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.eval()


def tiny_pair(seed: int = 0, vocab_size: int = 256, target_layers: int = 4, draft_layers: int = 1,
              hidden_size: int = 64) -> TinyPair:
    """A random tiny Llama target and a smaller draft with the same vocabulary, for tests."""
    target = tiny_llama(seed, vocab_size, hidden_size, target_layers)
    draft = tiny_llama(seed + 1, vocab_size, hidden_size // 2, draft_layers)
    return TinyPair(target, draft)
