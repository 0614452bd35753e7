"""The committed prompt sets: every split is there, the held-out and training sets hold the four kinds the
drafter table reports on, and an unknown split is refused by name."""

import pytest

from specnotes.prompts import FREE_FORM, KINDS, SPLITS, prompt_set


def test_every_split_is_committed_and_the_measured_sets_hold_the_four_kinds():
    sets = {split: prompt_set(split) for split in SPLITS}
    assert all(sets.values())
    assert all(isinstance(p["text"], str) and p["text"] for ps in sets.values() for p in ps)
    for split in ("train", "heldout"):
        assert sorted({p["kind"] for p in sets[split]}) == sorted(KINDS)
    assert {p["kind"] for p in sets["validation"]} <= set(FREE_FORM)
    held_out = {p["text"] for p in sets["heldout"]}
    assert not held_out & {p["text"] for split in ("train", "more", "validation") for p in sets[split]}


def test_an_unknown_split_is_refused():
    with pytest.raises(ValueError, match="split"):
        prompt_set("test")
