"""Plain autoregressive decoding, one target pass per new token, with per-step timings and streaming.

The baseline every speculative method is compared against (notebook 00 streams it; 01 and 07 time it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from specnotes import checks
from specnotes.passes import forward_pass
from specnotes.placement import device_of
from specnotes.sampling import Sampler
from specnotes.timing import sync


@dataclass
class PlainResult:
    tokens: list[int]  # new tokens only, never the prompt
    prefill_seconds: float  # the pass over the prompt, which also yields the first new token
    step_seconds: np.ndarray  # (len(tokens) - 1,) one decode pass per further token
    stopped_on_eos: bool

    @property
    def decode_tokens_per_s(self) -> float:
        """Decode-only rate: tokens after the first, over the time of their passes."""
        total = float(self.step_seconds.sum())
        return len(self.step_seconds) / total if total > 0 else float("nan")


def prompt_ids(tokenizer, text: str, chat: bool = True, device=None):
    """(1, T) input ids for a user message, wrapped in the chat template when the model has one; on the
    CPU unless `device` is given (every generate function moves them to its model's device anyway)."""
    if chat and getattr(tokenizer, "chat_template", None):
        enc = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, return_tensors="pt"
        )
        ids = enc["input_ids"] if hasattr(enc, "keys") else enc
    else:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
    return ids.to(device) if device is not None else ids


class TextStream:
    """on_token callback that prints decoded text as it grows (decoding the whole tail each time
    keeps multi-token characters and leading spaces right)."""

    def __init__(self, tokenizer, end: str = "\n"):
        self.tokenizer, self.end = tokenizer, end
        self.tokens: list[int] = []
        self.printed = ""

    def __call__(self, token: int) -> None:
        self.tokens.append(int(token))
        text = self.tokenizer.decode(self.tokens, skip_special_tokens=True)
        if text.endswith("\ufffd"):
            return  # a character split across tokens: wait for the rest of its bytes
        if text.startswith(self.printed):
            print(text[len(self.printed):], end="", flush=True)
            self.printed = text

    def close(self) -> None:
        print(self.end, end="", flush=True)


def plain_generate(model, input_ids, max_new_tokens: int, do_sample: bool = False,
                   temperature: float = 1.0, seed: int | None = None,
                   eos_token_id: int | None = None,
                   on_token: Callable[[int], None] | None = None, top_k: int | None = None,
                   top_p: float | None = None) -> PlainResult:
    """Greedy or sampled decoding with a KV cache; input_ids is (1, T), on any device (they go to the
    model's). Returns new tokens and timings. The engine's twin: the same Sampler (temperature, top-k,
    top-p, seed) and, in the prompt pass, logits of the last position only, as the engine's first round."""
    import torch

    checks.prompt_ids(input_ids, model.config.vocab_size)
    max_new_tokens = checks.whole(max_new_tokens, "max_new_tokens", scalar=True)
    eos = checks.stop_tokens(eos_token_id, model.config.vocab_size)  # None: no stop token here
    if on_token is not None and not callable(on_token):
        raise TypeError(f"on_token must be a function of one token id (or None), got {on_token!r}")
    device = device_of(model)  # the model's device decides, not the ids': timers sync this one
    input_ids = input_ids.to(device)
    # the engine's own Sampler, seeded as the engine seeds it: the same seed draws the same tokens as
    # engine.generate with a drafter that drafts nothing
    sampler = Sampler(do_sample, temperature, top_k, top_p, seed, device=device)

    def pick(logits):  # greedy reads the argmax straight off the logits, as the engine's greedy rule does
        return sampler.draw(sampler.probs(logits)) if do_sample else int(logits.argmax(-1))

    tokens, steps = [], []
    stopped = False
    with torch.inference_mode():
        t0 = time.perf_counter()
        logits, cache = forward_pass(model, input_ids, keep=1)  # the LM head on the last position only
        token = pick(logits[0, -1])
        sync(device)
        prefill = time.perf_counter() - t0
        while True:
            tokens.append(token)
            if on_token is not None:
                on_token(token)
            if token in eos:
                stopped = True
                break
            if len(tokens) >= max_new_tokens:
                break
            t0 = time.perf_counter()
            logits, cache = forward_pass(model, torch.tensor([[token]], device=device), cache)
            token = pick(logits[0, -1])
            sync(device)
            steps.append(time.perf_counter() - t0)
    return PlainResult(tokens, prefill, np.asarray(steps, dtype=float), stopped)
