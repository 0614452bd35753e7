"""The committed prompt sets that drafters are trained and measured on (data/drafters/prompts.json, written
by tools/make_prompts.py). Notebooks 06 and 08 and `make bench` measure on the held-out set; the training
sets were answered by the target itself (specnotes.distill). Callers import what they use
(`from specnotes.prompts import prompt_set`): "prompts" is everyone's name for a list of them.
"""

from __future__ import annotations

import json

from specnotes.paths import data_dir

FILE = data_dir() / "drafters" / "prompts.json"
SPLITS = ("train", "heldout", "more", "validation")
KINDS = ("copy", "code", "story", "qa")  # the kinds of the training and held-out prompts
FREE_FORM = ("story", "qa")  # the kinds with no text to copy from the prompt


def prompt_set(split: str = "heldout") -> list[dict]:
    """A committed prompt set: [{"kind": "copy"|"code"|"story"|"qa"|"other", "text": ...}, ...]. Splits:
    "train", "heldout" (subjects no training set uses), "more" (the larger free-form training set) and
    "validation" (six free-form prompts for choosing settings, in none of the others)."""
    if split not in SPLITS:
        raise ValueError(f"split must be 'train', 'heldout', 'more' or 'validation', got {split!r}")
    return json.loads(FILE.read_text())[split]
