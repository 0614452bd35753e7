"""The committed prompt sets that drafters are trained and measured on (data/drafters/prompts.json, written
by tools/make_prompts.py), and the live suite's prompts (LIVE): the package's one prompt source. Notebooks
06 and 08 and `make bench` measure on the held-out set; the training sets were answered by the target itself
(specnotes.distill). Callers import what they use (`from specnotes.prompts import prompt_set`): "prompts" is
everyone's name for a list of them.
"""

from __future__ import annotations

import json

from specnotes.paths import data_dir

FILE = data_dir() / "drafters" / "prompts.json"
SPLITS = ("train", "heldout", "more", "validation")
KINDS = ("copy", "code", "story", "qa")  # the kinds of the training and held-out prompts
FREE_FORM = ("story", "qa")  # the kinds with no text to copy from the prompt


_PASSAGE = ("The lighthouse keeper climbed the spiral stairs every evening at dusk. He trimmed the wick, "
            "polished the great lens, and wound the clockwork that turned the light. Ships far out at sea "
            "counted the flashes, five seconds apart, and knew exactly where the rocks lay.")
_CODE = '''def mean(values):
    total = 0
    for v in values:
        total += v
    return total / len(values)


def spread(values):
    low = min(values)
    high = max(values)
    return high - low
'''
LIVE = {  # notebook 07's suite and `make bench`: copy-heavy prompts and free-form ones

    "copy": [
        f"Rename the variable `values` to `xs` everywhere in this code and return the full code:\n\n{_CODE}",
        f"Quote the second and third sentences of this paragraph exactly:\n\n{_PASSAGE}",
        "Fix the typos and return the corrected text: The lighthuose keeper climbed the spiral stiars "
        "every evening at dusk. He trimmed the wick, polsihed the great lens, and wound the clockwork "
        "that turned the light.",
    ],
    "free": [
        "Write a short story about a robot who learns to paint.",
        "Write a short story about two friends who get lost in a forest.",
    ],
}


def prompt_set(split: str = "heldout") -> list[dict]:
    """A committed prompt set: [{"kind": "copy"|"code"|"story"|"qa"|"other", "text": ...}, ...]. Splits:
    "train", "heldout" (subjects no training set uses), "more" (the larger free-form training set) and
    "validation" (six free-form prompts for choosing settings, in none of the others)."""
    if split not in SPLITS:
        raise ValueError(f"split must be 'train', 'heldout', 'more' or 'validation', got {split!r}")
    return json.loads(FILE.read_text())[split]
