"""Tree verification: many candidate continuations checked in one target pass, then the KV cache
compacted to the accepted path. Notebook 06 (part 2) uses it for Medusa heads; tests check it is exact.

A round's tree hangs from the root, the last committed token (not yet in the KV cache). Each node is one
candidate token whose parent is the token before it. The whole tree goes through the target as ONE pass:
- a tree attention mask lets each node see the cached context, the root and its own ancestors only;
- position ids are the root's position plus the node's depth, as if each branch were the only one.
So every row of the pass holds exactly what a chain pass along that node's branch would hold.

Acceptance walks down from the root:
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


@dataclass(frozen=True)
class Tree:
    """Candidate tokens and their parents (-1: the root). Nodes are listed parents-first."""

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)

    def __post_init__(self):
        from specnotes import checks

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


class RandomTree:
    """A tree drafter that guesses at random: distinct random tokens in a fixed static-tree shape. Useless
    for speed, ideal for testing a sampling rule, since it produces rejections of every kind."""

    def __init__(self, vocab: int, widths=(3, 2, 1), seed: int = 0):
        from specnotes import checks

        vocab = checks.whole(vocab, "vocab", scalar=True)
        widths = [checks.whole(w, "widths (each at most vocab)", high=vocab, scalar=True) for w in widths]
        self.vocab, self.widths = vocab, tuple(widths)
        self.rng = np.random.default_rng(checks.whole(seed, "seed", low=0, scalar=True))

    def reset(self, prompt: list[int]) -> None:
        pass

    def propose(self, tokens: list[int], states) -> Tree:
        candidates = [self.rng.permutation(self.vocab)[:w].tolist() for w in self.widths]
        return static_tree(candidates, default_choices(self.widths))

    def update(self, tokens: list[int], n_accepted: int) -> None:
        pass


def _tree_inputs(cache_len: int, n_uncached: int, tree: Tree, device, dtype):
    """Position ids (1, q) and the additive attention mask (1, 1, q, cache_len + q) of a tree pass whose
    input is [uncached prompt tokens, root, nodes]."""
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


def tree_pass(target, cache, root: int, tree: Tree, uncached: list[int] = (), features: bool = False):
    """One target pass over [uncached, root, tree nodes] on top of `cache`. Returns (logits (n+1, V) for
    the root and each node, hidden states (u+n+1, d) of every input row, the cache). The hidden states are
    the last ones after the final norm, or with features=True the ones before it (EAGLE's features)."""
    import torch

    from specnotes.decode import _cache_kwarg
    from specnotes.env import device_of, dtype_of

    device, dtype = device_of(target), dtype_of(target)
    cache_len = cache.get_seq_length() if cache is not None else 0
    ids = torch.tensor([[*uncached, root, *tree.tokens]], device=device)
    positions, mask = _tree_inputs(cache_len, len(uncached), tree, device, dtype)
    captured = {}
    hook = None
    if features:
        hook = target.model.norm.register_forward_pre_hook(lambda m, args: captured.update(pre=args[0]))
    try:
        out = target.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                           **{_cache_kwarg(type(target.model)): cache})
    finally:
        if hook is not None:
            hook.remove()
    hidden = out.last_hidden_state[0]
    new_cache = out.get("cache", out.get("past_key_values"))
    logits = target.lm_head(hidden[len(uncached):])
    return logits, (captured["pre"][0] if features else hidden), new_cache


def compact(cache, start: int, keep: list[int]) -> None:
    """Keep the first `start` cached positions and then only the listed positions after them (offsets
    from `start`), in order: the accepted branch of a tree pass, without the other branches."""
    import torch

    total = cache.get_seq_length()
    if list(keep) == list(range(len(keep))):  # already a prefix: an ordinary crop
        if total - start - len(keep) > 0:
            cache.crop(-(total - start - len(keep)))
        return
    index = torch.as_tensor(list(range(start)) + [start + k for k in keep])
    for layer in cache.layers:
        index = index.to(layer.keys.device)
        layer.keys = layer.keys.index_select(-2, index)
        layer.values = layer.values.index_select(-2, index)


def walk_greedy(tree: Tree, logits) -> tuple[list[int], int]:
    """(accepted nodes from the root down, next token): follow the child equal to the argmax."""
    best = logits.argmax(-1).tolist()
    node, path = -1, []
    while True:
        want = best[node + 1]
        nxt = next((c for c in tree.children(node) if tree.tokens[c] == want), None)
        if nxt is None:
            return path, want
        path.append(nxt)
        node = nxt


def walk_sampling(tree: Tree, probs, uniform, draw) -> tuple[list[int], int]:
    """The exact multi-candidate rule for point-mass candidates. probs: (n+1, V) target distributions
    at the root and each node; uniform(): one U(0, 1) float; draw(p): a token drawn from p."""
    node, path = -1, []
    while True:
        p = probs[node + 1].clone()
        for child in tree.children(node):
            x = tree.tokens[child]
            if uniform() < float(p[x]):  # p is renormalized, so p(x) is the acceptance probability
                path.append(child)
                node = child
                break
            # rejected: x cannot be the token any more; what is left of p, renormalized, is the
            # distribution of the token given that it is not x (the residual of a point-mass draft)
            p[x] = 0.0
            p = p / p.sum()
        else:
            return path, draw(p)


def walk_typical(tree: Tree, probs, draw, epsilon: float = 0.3, delta: float = 0.09) -> tuple[list[int], int]:
    """Medusa-2's typical acceptance: take the first child whose p(x) > min(ε, δ·exp(−H(p))). NOT exact."""
    import torch

    node, path = -1, []
    while True:
        p = probs[node + 1]
        entropy = float(-(p * torch.log(p.clamp_min(1e-30))).sum())
        threshold = min(epsilon, delta * float(np.exp(-entropy)))
        nxt = next((c for c in tree.children(node) if float(p[tree.tokens[c]]) > threshold), None)
        if nxt is None:
            return path, draw(p)
        path.append(nxt)
        node = nxt


def generate(target, drafter, input_ids, max_new_tokens: int, do_sample: bool = False,
             temperature: float = 1.0, seed: int | None = None, top_k: int | None = None,
             top_p: float | None = None, eos_token_id=None, rule: str = "exact"):
    """Speculative decoding with a tree drafter: `drafter.propose(tokens, states)` returns a Tree to
    hang from the last token. `states` (m, d) are the target's hidden states (after the final norm; with
    `features = True` on the drafter, before it) at the positions committed since the last call, the
    last of them the one whose logits produced the last token (on the first call: the whole prompt).
    rule: "exact" (the multi-candidate rule) or "typical" (lossy; sampling only).
    Returns an engine.Result whose trace's `drafted` is the accepted branch followed by the best-ranked
    continuation below it, so α by position reads as acceptance by tree depth."""
    import time

    import torch

    from specnotes import checks
    from specnotes.engine import Result, Round, Sampler, _eos_set
    from specnotes.env import device_of

    vocab = target.config.vocab_size
    seq = checks.prompt_ids(input_ids, vocab)
    max_new_tokens = checks.whole(max_new_tokens, "max_new_tokens", scalar=True)
    if rule not in ("exact", "typical"):
        raise ValueError(f"rule must be 'exact' or 'typical', got {rule!r}")
    if rule == "typical" and not do_sample:
        raise ValueError("rule='typical' is a sampling rule (greedy verification is already exact); pass "
                         "do_sample=True, or leave rule='exact'")
    start = time.perf_counter()
    sampler = Sampler(do_sample, temperature, top_k, top_p, seed, device=device_of(target))
    eos = _eos_set(target, eos_token_id)
    wants_features = getattr(drafter, "features", False)
    drafter.reset(list(seq))
    new, trace = [], []
    cache, uncached, states = None, seq[:-1], None
    with torch.inference_mode():
        while len(new) < max_new_tokens:
            room = max_new_tokens - len(new) - 1
            tree = drafter.propose(list(seq), states) if states is not None and room > 0 else Tree()
            if not isinstance(tree, Tree):
                raise TypeError(f"{type(drafter).__name__}.propose returned {type(tree).__name__}, "
                                "not a Tree")
            checks.token_ids(tree.tokens, f"the tokens {type(drafter).__name__} drafted", vocab, empty=True)
            if len(tree) and int(tree.depth.max()) > room:
                tree = tree.cut(room)
            cache_before = (cache.get_seq_length() if cache is not None else 0) + len(uncached)
            n_prompt = len(uncached)
            logits, hidden, cache = tree_pass(target, cache, seq[-1], tree, uncached, features=wants_features)
            uncached = []
            if not do_sample:
                path, nxt = walk_greedy(tree, logits)
            else:
                probs = sampler.probs(logits)
                if rule == "exact":
                    path, nxt = walk_sampling(tree, probs, lambda: float(sampler.uniform(1)[0]), sampler.draw)
                else:
                    path, nxt = walk_typical(tree, probs, sampler.draw)
            # keep the root and the accepted branch; drop every other node's keys and values
            compact(cache, cache_before, [0] + [i + 1 for i in path])
            emitted = [tree.tokens[i] for i in path] + [nxt]
            accepted = len(path)
            cut = next((i for i, t in enumerate(emitted) if t in eos), None)
            if cut is not None and cut < accepted:
                cache.crop(-(accepted - cut))
                emitted, accepted, nxt = emitted[:cut + 1], cut + 1, None
            rows = list(range(n_prompt)) + [n_prompt + r for r in [0] + [i + 1 for i in path[:accepted]]]
            states = hidden[rows]
            below = path[-1] if path else -1
            main_line = []
            while (kids := tree.children(below)):
                below = kids[0]
                main_line.append(below)
            drafted = [tree.tokens[i] for i in path[:accepted] + main_line]
            seq += emitted
            new += emitted
            drafter.update(list(seq), accepted)
            trace.append(Round(drafted, accepted, nxt, cache.get_seq_length(), time.perf_counter() - start))
            if cut is not None:
                break
    return Result(new, len(trace), trace, cut is not None if trace else False)
