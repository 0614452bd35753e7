"""Candidate trees: many continuations checked in one target pass (specnotes.engine runs the round,
specnotes.verify the pass, the walks and the KV compaction). Notebook 06 (part 2) uses them for Medusa heads.

A round's tree hangs from the root, the last committed token (not yet in the KV cache). Each node is one
candidate token whose parent is the token before it. The whole tree goes through the target as ONE pass:
- a tree attention mask lets each node see the cached context, the root and its own ancestors only;
- position ids are the root's position plus the node's depth, as if each branch were the only one.
So every row of the pass holds exactly what a chain pass along that node's branch would hold.

Acceptance walks down from the root; the walks are rules like any other and live in specnotes.verify:
- greedy: follow the child equal to the target's argmax, until none is;
- exact sampling with point-mass candidates (SpecInfer's multi-candidate rule): try the children in
  order, accepting child x with probability p(x) under the current p; on a rejection set p(x) = 0 and
  renormalize, then try the next child; if every child is rejected, sample from what is left of p.
  Each accepted token is then distributed exactly as p, and so is the final one;
- typical acceptance (Medusa-2): accept a child whose p(x) exceeds min(ε, δ·exp(−H(p))). Faster, and
  NOT lossless: it changes the output distribution (notebook 04's bug zoo shows why that matters).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specnotes import checks


@dataclass(frozen=True)
class Tree:
    """Candidate tokens and their parents (-1: the root). Nodes are listed parents-first."""

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)

    def __post_init__(self):
        if not isinstance(self.tokens, (list, tuple)) or not isinstance(self.parents, (list, tuple)):
            raise TypeError(f"a tree's tokens and parents must be lists, got {type(self.tokens).__name__} "
                            f"and {type(self.parents).__name__}")
        checks.token_ids(self.tokens, "tokens", None, empty=True)
        if len(self.tokens) != len(self.parents):
            raise ValueError(f"a tree needs one parent per token; got {len(self.tokens)} tokens and "
                             f"{len(self.parents)} parents")
        for i, parent in enumerate(self.parents):
            whole = isinstance(parent, (int, np.integer)) and not isinstance(parent, bool)
            if not (whole and -1 <= parent < i):
                raise ValueError(f"parents: node {i}'s parent must be -1 (the root) or an earlier node; "
                                 f"got {parent!r}")

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def depth(self) -> np.ndarray:
        """(n,) depth of each node: 1 for a child of the root."""
        d = np.zeros(len(self), dtype=int)
        for i, parent in enumerate(self.parents):
            d[i] = 1 if parent < 0 else d[parent] + 1
        return d

    def children(self, node: int) -> list[int]:
        """Children of a node (-1: the root), in tree order (the order they are tried)."""
        return [i for i, parent in enumerate(self.parents) if parent == node]

    def ancestry(self) -> np.ndarray:
        """(n+1, n+1) bool: row r may attend to column c (rows/columns: root, then the nodes), i.e. c is
        r itself or one of its ancestors."""
        n = len(self)
        see = np.zeros((n + 1, n + 1), dtype=bool)
        see[:, 0] = True
        for i, parent in enumerate(self.parents):
            see[i + 1] = see[parent + 1] if parent >= 0 else see[0]
            see[i + 1, i + 1] = True
        return see

    def path_to(self, node: int) -> list[int]:
        """Nodes from the root's child down to `node` (empty for the root, -1)."""
        path = []
        while node >= 0:
            path.append(node)
            node = self.parents[node]
        return path[::-1]

    def line(self, path: list[int]) -> list[int]:
        """The nodes a walk judged: the accepted branch `path`, then the first-ranked line below its end
        (the candidates tried first at each level), so a tree round reads like a chain draft."""
        line, below = list(path), (path[-1] if path else -1)
        while (kids := self.children(below)):
            below = kids[0]
            line.append(below)
        return line

    def cut(self, max_depth: int) -> Tree:
        """The nodes at depth <= max_depth (a round can emit at most the tokens left)."""
        keep = np.flatnonzero(self.depth <= max_depth)
        index = {int(old): new for new, old in enumerate(keep)}
        return Tree([self.tokens[i] for i in keep], [index.get(self.parents[i], -1) for i in keep])


def chain(tokens: list[int]) -> Tree:
    """A plain draft as a tree: each token the only child of the one before."""
    return Tree(list(tokens), list(range(-1, len(tokens) - 1)))


def static_tree(candidates: list[list[int]], choices: list[tuple[int, ...]]) -> Tree:
    """Medusa's static tree: candidates[h] are head h's tokens, best first, and each choice
    (r1, r2, ..., rd) is the branch taking rank r1 of head 0, then rank r2 of head 1, and so on.
    Choices must include every prefix of every choice."""
    nodes: dict[tuple[int, ...], int] = {}
    tokens, parents = [], []
    for choice in sorted(set(map(tuple, choices)), key=lambda c: (len(c), c)):
        if not choice or any(not isinstance(r, (int, np.integer)) or isinstance(r, bool) or r < 0
                             for r in choice):
            raise ValueError(f"choices: {choice} must be a non-empty tuple of ranks >= 0 (0: a head's best "
                             "candidate)")
        if len(choice) > len(candidates):
            raise ValueError(f"choice {choice} is deeper than the {len(candidates)} candidate lists")
        if choice[-1] >= len(candidates[len(choice) - 1]):
            raise ValueError(f"choice {choice} asks for rank {choice[-1]} of head {len(choice) - 1}, "
                             f"which has {len(candidates[len(choice) - 1])} candidates")
        parent = choice[:-1]
        if parent and parent not in nodes:
            raise ValueError(f"choice {choice} has no parent {parent}: list every prefix too")
        nodes[choice] = len(tokens)
        tokens.append(int(candidates[len(choice) - 1][choice[-1]]))
        parents.append(nodes[parent] if parent else -1)
    return Tree(tokens, parents)


def default_choices(widths=(3, 2, 2, 1)) -> list[tuple[int, ...]]:
    """A small static tree: the top widths[0] candidates of head 0; under the best of them the top
    widths[1] of head 1; under the best of those the top widths[2] of head 2, and so on."""
    choices, stem = [], ()
    for width in widths:
        choices += [(*stem, r) for r in range(width)]
        stem = (*stem, 0)
    return choices


def mask(cache_len: int, n_uncached: int, tree: Tree, device, dtype):
    """Position ids (1, q) and the additive attention mask (1, 1, q, cache_len + q) of a tree pass whose
    input is [uncached prompt tokens, root, nodes] (specnotes.verify.verify_pass runs it)."""
    import torch

    q = n_uncached + 1 + len(tree)
    root_pos = cache_len + n_uncached
    positions = np.concatenate([np.arange(cache_len, root_pos + 1), root_pos + tree.depth])
    see = np.zeros((q, cache_len + q), dtype=bool)
    see[:, :cache_len] = True
    see[:, cache_len:cache_len + n_uncached + 1] = np.tril(np.ones((q, n_uncached + 1), dtype=bool))
    see[n_uncached:, cache_len + n_uncached:] = tree.ancestry()
    mask = torch.zeros(see.shape, dtype=dtype)
    mask.masked_fill_(torch.from_numpy(~see), torch.finfo(dtype).min)
    return (torch.from_numpy(positions)[None].to(device), mask[None, None].to(device))
