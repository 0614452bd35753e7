"""Hidden cases for notebook 06: prompt lookup's lookup (PromptLookup.lookup), and acceptance by draft
position."""

from __future__ import annotations

import numpy as np

from specnotes.drafters import PromptLookup
from specnotes.exercises import Exercise, register


def _lookup_reference(tokens, max_ngram, limit):
    """The package's own lookup: the exercise is to write PromptLookup.lookup."""
    drafter = PromptLookup(max_ngram=max_ngram, num_tokens=limit, max_tokens=max(limit, 32), adaptive=False,
                           min_tokens=1)
    return drafter.lookup(list(tokens), limit)


def _lookup_cases(fn):
    rng = np.random.default_rng(6)
    fixed = [
        ([1, 2, 3, 9, 1, 2, 3], 3, 4, "a 3-gram seen once: what followed it"),
        ([5, 6, 7, 5, 6, 8, 5, 6], 2, 2, "two earlier matches: the most recent wins"),
        ([1, 2, 3, 4], 2, 3, "no earlier occurrence of any tail: an empty draft"),
        ([9, 4, 5, 8, 7, 4, 5], 3, 2, "no 3-gram match: back off to the 2-gram"),
        ([1, 2, 3, 4, 9, 3, 5, 1, 2, 3], 3, 2, "the longest matching tail wins over a more recent 1-gram"),
        ([1, 2, 7, 7, 7, 1, 2], 2, 3, "one match, at the start"),
        ([1, 2, 5, 5, 5, 1, 2, 1, 2], 2, 3, "the most recent match runs into the end: take one with room"),
        ([7, 8], 2, 3, "too short to have an earlier occurrence"),
    ]
    for tokens, m, limit, label in fixed:
        want = _lookup_reference(tokens, m, limit)
        got = fn(list(tokens), m, limit)
        yield label, got is not None and list(got) == want, f"expected {want}, got {got!r}"
    for i in range(30):
        tokens = rng.integers(0, 4, rng.integers(5, 40)).tolist()
        m, limit = int(rng.integers(1, 5)), int(rng.integers(1, 6))
        want = _lookup_reference(tokens, m, limit)
        got = fn(list(tokens), m, limit)
        if got is None or list(got) != want:
            yield f"random case {i}: tokens={tokens}, max_ngram={m}, limit={limit}", False, \
                f"expected {want}, got {got!r}"
            return
    yield "30 random sequences", True, ""


def _position_reference(rounds, k):
    judged, kept = np.zeros(k), np.zeros(k)
    for drafted, accepted in rounds:
        judged[: min(accepted + 1, drafted)] += 1
        kept[:accepted] += 1
    return np.where(judged > 0, kept / np.maximum(judged, 1), np.nan)


def _position_cases(fn):
    rng = np.random.default_rng(7)
    fixed = [
        ([(4, 4), (4, 0), (4, 2)], 4, "three rounds of four drafts"),
        ([(3, 1), (2, 2)], 3, "a short draft that was fully accepted"),
        ([(4, 0)] * 5, 4, "every first draft rejected: later positions never judged"),
    ]
    cases = [*fixed]
    for i in range(10):
        k = int(rng.integers(1, 7))
        rounds = []
        for _ in range(int(rng.integers(1, 30))):
            d = int(rng.integers(0, k + 1))
            rounds.append((d, int(rng.integers(0, d + 1))))
        cases.append((rounds, k, f"random trace {i} (k={k})"))
    for rounds, k, label in cases:
        want = _position_reference(rounds, k)
        got = fn(list(rounds), k)
        ok = got is not None and np.shape(got) == (k,) and np.allclose(
            np.asarray(got, dtype=float), want, equal_nan=True)
        yield label, ok, f"expected {np.round(want, 3).tolist()}, got {got!r}"


register(Exercise(
    id="06.1",
    title="prompt lookup's lookup, with back-off",
    hint="For n from max_ngram down to 1 (and at most len(tokens) - 1), take the last n tokens as the "
         "pattern and find its earlier occurrences (any window that ends before the last token). The "
         "first n with a match decides: take the most recent match that has `limit` tokens after it, or, "
         "if none has, the match with the most tokens after it, and return up to `limit` of them. No "
         "match at any n: return [].",
    cases=_lookup_cases,
))

register(Exercise(
    id="06.2",
    title="acceptance rate by draft position",
    hint="A round that drafted d tokens and accepted a of them judged positions 1..min(a+1, d) (the "
         "scan stops at the first rejection) and kept positions 1..a. Count judged and kept per position "
         "across rounds, divide, and give NaN where a position was never judged.",
    cases=_position_cases,
))
