"""Solutions for notebook 06: an n-gram drafter and acceptance by draft position."""

import numpy as np


def ngram_draft(tokens, n, k):
    tail = tokens[-n:]
    for start in range(len(tokens) - n - 1, -1, -1):
        if tokens[start:start + n] == tail:
            return tokens[start + n:start + n + k]
    return []


def acceptance_by_position(rounds, k):
    judged, kept = np.zeros(k), np.zeros(k)
    for drafted, accepted in rounds:
        judged[: min(accepted + 1, drafted)] += 1
        kept[:accepted] += 1
    return np.where(judged > 0, kept / np.maximum(judged, 1), np.nan)


SOLUTIONS = {"06.1": ngram_draft, "06.2": acceptance_by_position}
