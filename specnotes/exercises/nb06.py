"""Hidden cases for notebook 06: an n-gram (prompt lookup) drafter, and acceptance by draft position."""

from __future__ import annotations

import numpy as np

from specnotes.exercises import Exercise, register


def _ngram_reference(tokens, n, k):
    tail = tokens[-n:]
    for start in range(len(tokens) - n - 1, -1, -1):  # latest earlier occurrence first
        if tokens[start:start + n] == tail:
            return tokens[start + n:start + n + k]
    return []


def _ngram_cases(fn):
    rng = np.random.default_rng(6)
    fixed = [
        ([1, 2, 3, 9, 1, 2, 3], 3, 4, "a 3-gram seen once: what followed it"),
        ([5, 6, 7, 5, 6, 8, 5, 6], 2, 2, "two earlier matches: the most recent wins"),
        ([1, 2, 3, 4], 2, 3, "no earlier occurrence: an empty draft"),
        ([4, 4, 4, 4], 2, 5, "overlapping matches in a repeated token"),
        ([7, 8], 2, 3, "too short to have an earlier occurrence"),
        ([1, 2, 1, 2, 9], 1, 3, "a 1-gram"),
    ]
    for tokens, n, k, label in fixed:
        want = _ngram_reference(tokens, n, k)
        got = fn(list(tokens), n, k)
        yield label, got is not None and list(got) == want, f"expected {want}, got {got!r}"
    for i in range(20):
        tokens = rng.integers(0, 4, rng.integers(5, 40)).tolist()
        n, k = int(rng.integers(1, 4)), int(rng.integers(1, 6))
        want = _ngram_reference(tokens, n, k)
        got = fn(list(tokens), n, k)
        if got is None or list(got) != want:
            yield f"random case {i}: tokens={tokens}, n={n}, k={k}", False, f"expected {want}, got {got!r}"
            return
    yield "20 random sequences", True, ""


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
    title="an n-gram drafter (prompt lookup in a few lines)",
    hint="Take the last n tokens as the pattern. Scan start positions from len(tokens)-n-1 down to 0 "
         "(never the tail itself) and return tokens[start+n : start+n+k] for the first match: the most "
         "recent one. No match: return [].",
    cases=_ngram_cases,
))

register(Exercise(
    id="06.2",
    title="acceptance rate by draft position",
    hint="A round that drafted d tokens and accepted a of them judged positions 1..min(a+1, d) (the "
         "scan stops at the first rejection) and kept positions 1..a. Count judged and kept per position "
         "across rounds, divide, and give NaN where a position was never judged.",
    cases=_position_cases,
))
