"""The draft length against the context (specnotes.context_k), on a tiny model and the real tokenizer."""

import pytest
import torch

from specnotes import context_k, models
from specnotes.drafters import PromptLookup

TARGET = models.tiny_llama(seed=0, layers=1)


class _Words:
    """Each word's length is its token id; no chat template."""

    chat_template = None

    def __call__(self, text, return_tensors="pt"):
        return {"input_ids": torch.tensor([[len(w) for w in text.split()]])}


def test_padding_keeps_the_task_last_and_reaches_the_length():
    words = _Words()
    short = context_k.padded(words, "aaa bb c", ["dddd eeeee", "ffffff"], 0)
    assert short == [3, 2, 1]
    long = context_k.padded(words, "aaa bb c", ["dddd eeeee", "ffffff"], 9)
    assert len(long) >= 9 and long[-3:] == [3, 2, 1]  # the same task after more context
    with pytest.raises(ValueError, match="filler"):
        context_k.padded(words, "aaa", [], 5)


def test_decode_times_time_plain_and_every_k_at_every_context_and_rank_them():
    prompts = {"short": [5, 17, 42, 8] * 3, "long": [9, 3, 1, 7, 2] * 12 + [5, 17, 42, 8] * 3}
    sweep = context_k.decode_times(TARGET, PromptLookup, prompts, ks=(2, 4), max_new_tokens=6, repeats=2,
                                   warmup=1, progress=False)
    assert sweep.contexts == {"short": 12, "long": 72}
    assert set(sweep.seconds) == {(label, k) for label in prompts for k in (0, 2, 4)}
    assert all(len(v) == 2 and min(v) > 0 for v in sweep.seconds.values())
    sweep.seconds.update({("short", 0): [2.0, 2.0], ("short", 2): [1.0, 2.0], ("short", 4): [1.6, 1.6]})
    assert sweep.band("short", 2) == (1.5, 1.0, 2.0)
    assert sweep.best_k("short") == 2  # by median: 1.5 against 1.25
    with pytest.raises(TypeError, match="make_drafter"):
        context_k.decode_times(TARGET, PromptLookup(), prompts)
    with pytest.raises(ValueError, match="prompts"):
        context_k.decode_times(TARGET, PromptLookup, {})
