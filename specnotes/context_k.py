"""Does a longer context want a shorter draft? Notebook 08, after llama.cpp's --spec-draft-ctx-step,
which shrinks k as the context grows because every verified position re-reads the KV cache.

- `padded(tokenizer, text, filler, tokens)`: the same prompt behind filler text, so one copy task runs
  at several context lengths.
- `decode_times(target, make_drafter, prompts, ks, ...)`: plain decoding and the drafter at each fixed k
  on every prompt, round-robin, timing the decode only: the prefill grows with the context for every
  mode alike and would hide the difference in the draft length.
- `Sweep.band(label, k)`, `Sweep.best_k(label)`: each k's speedup over plain with the spread of its
  repeats, and the fastest k at one context.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specnotes import checks, engine
from specnotes.decode import prompt_ids
from specnotes.drafters.base import Drafter
from specnotes.env import progress_bar


def padded(tokenizer, text: str, filler: list[str], tokens: int) -> list[int]:
    """The chat-template token ids of `text` with filler passages before it in the same message, added
    until the prompt holds at least `tokens` tokens (0: none), so the task stays the same and only the
    context before it grows."""
    tokens = checks.whole(tokens, "tokens", low=0, scalar=True)
    if tokens and not filler:
        raise ValueError("filler must hold at least one passage to pad with")
    body, i = text, 0
    ids = prompt_ids(tokenizer, body)[0].tolist()
    while len(ids) < tokens:
        body = filler[i % len(filler)] + "\n\n" + body
        ids, i = prompt_ids(tokenizer, body)[0].tolist(), i + 1
    return ids


@dataclass
class Sweep:
    ks: tuple
    contexts: dict  # label -> prompt length in tokens
    seconds: dict = field(default_factory=dict)  # (label, k) -> decode seconds per repeat; k = 0: plain

    def band(self, label: str, k: int) -> tuple[float, float, float]:
        """(median, lowest, highest) over the repeats of plain's decode time / k's, both from one repeat."""
        ratio = np.array(self.seconds[label, 0]) / np.array(self.seconds[label, k])
        return float(np.median(ratio)), float(ratio.min()), float(ratio.max())

    def best_k(self, label: str) -> int:
        """The k with the highest median speedup at this context."""
        return max(self.ks, key=lambda k: self.band(label, k)[0])


def decode_times(target, make_drafter, prompts: dict, ks=(2, 4, 8), max_new_tokens: int = 48,
                 repeats: int = 3, warmup: int = 1, progress: bool = True) -> Sweep:
    """prompts: label -> 1-D token ids (one per context length). For each repeat and each prompt, plain
    decoding (the engine with a drafter that drafts nothing) and make_drafter() at every k in turn, greedy;
    each run's decode time is from its first token to its last, so the prefill is left out. `warmup`
    untimed runs of every mode on the first prompt come first; the order of the modes rotates by repeat."""
    tqdm = progress_bar()
    ks = tuple(int(k) for k in np.atleast_1d(checks.whole(list(ks), "ks")))
    max_new_tokens = checks.whole(max_new_tokens, "max_new_tokens", low=2, scalar=True)
    repeats = checks.whole(repeats, "repeats", scalar=True)
    warmup = checks.whole(warmup, "warmup", low=0, scalar=True)
    if not isinstance(prompts, dict) or not prompts:
        raise ValueError(f"prompts must be a non-empty dict label -> token ids, got {prompts!r:.80}")
    if isinstance(make_drafter, Drafter) or not callable(make_drafter):
        raise TypeError(f"make_drafter must build a new drafter when called (PromptLookup, the class), got "
                        f"{make_drafter!r}")
    ids = {label: checks.token_ids(p, f"prompts[{label!r}]", target.config.vocab_size)
           for label, p in prompts.items()}
    modes = [(0, Drafter), *((k, make_drafter) for k in ks)]

    import torch

    def decode_seconds(p, k, make):
        res = engine.generate(target, make(), torch.tensor([p]), max_new_tokens, k=k or None, eos_token_id=-1)
        return float(res.arrival_times[-1] - res.arrival_times[0])

    first = next(iter(ids.values()))
    for _ in range(warmup):
        for k, make in modes:
            decode_seconds(first, k, make)
    sweep = Sweep(ks, {label: len(p) for label, p in ids.items()})
    # the modes take turns prompt by prompt, their order rotating each repeat
    steps = [(label, *modes[(j + r) % len(modes)]) for r in range(repeats) for label in ids
             for j in range(len(modes))]
    for label, k, make in tqdm(steps, desc="context x k", disable=not progress):
        sweep.seconds.setdefault((label, k), []).append(decode_seconds(ids[label], k, make))
    return sweep
