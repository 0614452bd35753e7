"""Suffix decoding: match the sequence's tail in a suffix trie built over this request (prompt and output
so far) and over earlier outputs, then follow the most frequent continuation for as long as it stays
likely. Model-free like prompt lookup, but it remembers across requests, and its length adapts to how
long the match is and how sure the trie is. After SuffixDecoding (Oliaro et al., 2024). Notebook 06.
"""

from __future__ import annotations

import math

from specnotes import checks
from specnotes.drafters.base import Draft, Drafter


class SuffixTrie:
    """Every substring of the inserted sequences up to `depth` tokens, with occurrence counts.
    A node is [count, {token: child}]."""

    def __init__(self, depth: int):
        self.depth = depth
        self.root: list = [0, {}]
        self.seen = 0  # tokens of the current sequence already inserted (see extend)

    def extend(self, tokens: list[int]) -> None:
        """tokens is the current sequence, grown since the last call: insert the substrings it gained."""
        n_old, n, depth = self.seen, len(tokens), self.depth
        for i in range(max(0, n_old - depth + 1), n):
            old = min(depth, n_old - i) if i < n_old else 0
            node = self.root
            for d, tok in enumerate(tokens[i:i + min(depth, n - i)]):
                child = node[1].get(tok)
                if child is None:
                    child = node[1][tok] = [0, {}]
                if d >= old:
                    child[0] += 1
                node = child
        self.seen = n

    def add(self, tokens: list[int]) -> None:
        """Insert a finished sequence on its own."""
        self.seen = 0
        self.extend(tokens)
        self.seen = 0

    def match(self, tail: list[int], max_match: int) -> tuple[int, list | None]:
        """The longest suffix of `tail` (up to max_match tokens) found with a continuation: (length, node)."""
        best = (0, None)
        for m in range(1, min(max_match, len(tail)) + 1):
            node = self.root
            for tok in tail[len(tail) - m:]:
                node = node[1].get(tok)
                if node is None:
                    return best
            if node[1]:
                best = (m, node)
        return best


class Suffix(Drafter):
    """Drafts from suffix tries: one for this request, one over earlier requests' outputs.

    The draft follows the most frequent child while its share of its parent's count is at least min_prob,
    and is at most min(max_tokens, factor x match length) long: a long match earns a long draft."""

    def __init__(self, max_match: int = 12, max_tokens: int = 24, factor: float = 2.0, min_prob: float = 0.3,
                 remember: bool = True):
        max_match = checks.whole(max_match, "max_match", scalar=True)
        max_tokens = checks.whole(max_tokens, "max_tokens", scalar=True)
        factor = checks.positive(factor, "factor", scalar=True)
        min_prob = checks.probability(min_prob, "min_prob", scalar=True)
        self.max_match, self.max_tokens, self.factor, self.min_prob = max_match, max_tokens, factor, min_prob
        self.remember = remember
        self.history = SuffixTrie(max_match + max_tokens)  # earlier outputs, kept across reset()
        self.local = SuffixTrie(max_match + max_tokens)
        self._prompt_len = None
        self._last: list[int] = []

    def reset(self, prompt: list[int]) -> None:
        if self.remember and self._prompt_len is not None and len(self._last) > self._prompt_len:
            self.history.add(self._last[self._prompt_len:])  # the previous request's output
        self.local = SuffixTrie(self.max_match + self.max_tokens)
        self.local.extend(list(prompt))
        self._prompt_len, self._last = len(prompt), list(prompt)

    def _walk(self, m: int, node) -> tuple[list[int], float]:
        out, score = [], 0.0
        limit = min(self.max_tokens, math.ceil(self.factor * m))
        while node[1] and len(out) < limit:
            tok, child = max(node[1].items(), key=lambda kv: kv[1][0])
            share = child[0] / max(sum(c[0] for c in node[1].values()), 1)
            if share < self.min_prob:
                break
            out.append(tok)
            score += share
            node = child
        return out, score

    def propose(self, tokens: list[int], k: int | None, sampler) -> Draft:
        # like prompt lookup, the length is our own choice below the cap k: these guesses cost nothing
        best: list[int] = []
        best_key = (0, 0.0)
        for trie in (self.local, self.history):
            m, node = trie.match(tokens, self.max_match)
            if node is None:
                continue
            draft, score = self._walk(m, node)
            if draft and (m, score) > best_key:
                best, best_key = draft, (m, score)
        return Draft(best[:k])

    def update(self, feedback) -> None:
        self.local.extend(feedback.tokens)
        self._last = list(feedback.tokens)
