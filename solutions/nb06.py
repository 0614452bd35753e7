"""Solutions for notebook 06: prompt lookup's lookup and acceptance by draft position."""

import numpy as np


def lookup(tokens, max_ngram, limit):
    for n in range(min(max_ngram, len(tokens) - 1), 0, -1):
        tail = tokens[-n:]
        # every window that ends before the last token
        starts = [s for s in range(len(tokens) - n) if tokens[s:s + n] == tail]
        if starts:
            room = [s for s in starts if len(tokens) - (s + n) >= limit]
            best = room[-1] if room else max(starts, key=lambda s: (len(tokens) - s, -s))
            return tokens[best + n:best + n + limit]
    return []


def acceptance_by_position(rounds, k):
    judged, kept = np.zeros(k), np.zeros(k)
    for drafted, accepted in rounds:
        judged[: min(accepted + 1, drafted)] += 1
        kept[:accepted] += 1
    return np.where(judged > 0, kept / np.maximum(judged, 1), np.nan)


SOLUTIONS = {"06.1": lookup, "06.2": acceptance_by_position}
