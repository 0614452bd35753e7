"""Hidden cases for notebook 02: greedy verification of a draft, and a prompt-lookup draft."""

from __future__ import annotations

from specnotes.exercises import Exercise, register


def _verify_cases(fn):
    cases = [
        ("all accepted: the bonus comes from the last row", [4, 7, 1], [4, 7, 1, 9], (3, 9)),
        ("first draft rejected", [4, 7, 1], [5, 7, 1, 9], (0, 5)),
        ("rejected in the middle", [4, 7, 1], [4, 8, 1, 9], (1, 8)),
        ("a later match after a miss does not count", [4, 7, 1], [4, 2, 1, 9], (1, 2)),
        ("no drafts: a plain decode step", [], [6], (0, 6)),
    ]
    for name, drafted, argmax, want in cases:
        got = fn(list(drafted), list(argmax))
        ok = got is not None and tuple(int(g) for g in got) == want
        yield name, ok, f"expected (accepted, next token) = {want}, got {got!r}"


def _lookup_cases(fn):
    cases = [
        ("a repeated phrase", [1, 2, 3, 4, 5, 9, 2, 3], 2, 3, [4, 5, 9]),
        ("the most recent occurrence wins", [7, 1, 2, 8, 8, 1, 2, 6, 6, 1, 2], 2, 2, [6, 6]),
        ("fewer tokens left than asked for", [1, 2, 3, 1, 2], 2, 5, [3, 1, 2]),
        ("no earlier occurrence", [1, 2, 3, 4], 2, 3, []),
    ]
    for name, tokens, ngram, limit, want in cases:
        got = fn(list(tokens), ngram, limit)
        ok = got is not None and [int(t) for t in got] == want
        yield name, ok, f"expected {want}, got {got!r}"


register(Exercise(
    id="02.1",
    title="greedy verification",
    hint="Walk the drafts while each equals the target's argmax at its position; at the first mismatch "
         "(or after the last draft) the target's own argmax there is the next token.",
    cases=_verify_cases,
))

register(Exercise(
    id="02.2",
    title="a prompt-lookup draft",
    hint="Take the last `ngram` tokens; search backwards for an earlier occurrence (not the tail itself); "
         "return up to `limit` tokens that followed it, or [] if there is none.",
    cases=_lookup_cases,
))
