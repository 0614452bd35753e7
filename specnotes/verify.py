"""Verification in one home: a round's one target pass (verify_pass), the rules that decide which drafted
tokens the target keeps, in torch, and keeping only their keys and values (compact).

A rule is a Verifier with one method per draft shape: chain(logits, drafted, q, sampler) -> (n kept, next
token) and tree(tree, logits, sampler) -> (kept nodes from the root down, next token). Each says which
shapes it judges and whether it is exact. RULES names every rule engine.generate(rule=...) takes, and
choose() is what engine.start calls, once per generation. The numpy twins for the toy are specnotes.rules
and specnotes.block; notebooks 02-06 run these through the engine.

To add a rule: write one Verifier subclass here and add one line to RULES. Its `exact` says whether the
output keeps the target's distribution (RULES' non-exact names are LOSSY, refused under greedy), its
`trees` whether it also judges tree drafts (then write tree() too). The engine calls judge(), which hands
a chain to chain() and a tree to tree(). Greedy decoding always runs Greedy: any exact rule reduces to it
when nothing is sampled. A Verifier object can also be passed as rule= directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from specnotes import lossy, sampling
from specnotes import tree as trees
from specnotes.passes import accepts_logits_to_keep, cache_kwarg, cache_length, crop, returned_cache
from specnotes.placement import device_of, dtype_of
from specnotes.tree import Tree


def wanted_states(drafter) -> bool | tuple[int, ...]:
    """Which hidden states a round's pass hands this drafter: False (none: it does not need "states"),
    True (the last, after the final norm) or its state_layers (indices into the model's hidden states,
    0 the embeddings, -1 the last after the norm; verify_pass concatenates them)."""
    if "states" not in drafter.needs:
        return False
    return tuple(drafter.state_layers) if drafter.state_layers else True


def verify_pass(target, cache, tokens: list[int], tree: Tree | None = None, n_uncached: int = 0,
                hidden: bool | tuple[int, ...] = False):
    """A round's ONE target pass: `tokens` = [uncached prompt tokens, last committed token, drafts (chain)
    or tree nodes] on top of the cache, which holds every earlier token. Returns (logits (len(tokens) -
    n_uncached, V) after the last token and after each draft/node, hidden states (len(tokens), d) after the
    final norm or None, the cache now holding them all).

    A chain is an ordinary causal pass through the model's own forward (so a hook on the target counts it,
    and with hidden=True the last of its hidden states, after the final norm, comes back: the rows a
    feature drafter reads); only a real tree gets the tree attention mask and depth positions
    (specnotes.tree.mask), so each node sees the cache, the prompt, the root and its own ancestors. The first
    round also carries the prompt (n_uncached: every prompt token but the last), so the prompt pass verifies
    the first draft too, as transformers' assisted generation does."""
    import torch

    ids = torch.tensor([tokens], device=device_of(target))
    positions = mask = None
    if tree is not None:
        positions, mask = trees.mask(cache_length(cache), n_uncached, tree, ids.device, dtype_of(target))
    logits, states, cache = _forward(target, cache, ids, len(tokens) - n_uncached, hidden, mask, positions)
    return logits[0], (states[0] if hidden else None), cache


def batch_pass(target, cache, ids, mask, keep: int, hidden: bool | tuple[int, ...] = False):
    """The same ONE pass for a batch of rows (specnotes.engine.batch_round): ids (B, T) new columns, mask
    (B, cached + T) 1 where a column holds one of that row's tokens, 0 for padding and rejected drafts.
    Each row's positions count only its own tokens, so a row reads exactly what its batch-1 pass would.
    Returns (logits (B, keep, V) after the last `keep` columns, hidden states (B, T, d) or None, cache)."""
    positions = (mask.cumsum(-1) - 1).clamp_min(0)[:, -ids.shape[1]:]
    return _forward(target, cache, ids, keep, hidden, mask, positions)


def _forward(target, cache, ids, keep: int, hidden, mask=None, positions=None):
    """The model's own forward over the cache: logits of the last `keep` columns (the LM head skips the
    rest), the hidden states when asked (hidden True: the last, after the final norm; a tuple of layer
    indices: those, concatenated on the feature axis), the cache now holding every column."""
    import torch

    kwargs = {cache_kwarg(type(target)): cache, "use_cache": True}
    if mask is not None:
        kwargs.update(attention_mask=mask, position_ids=positions)
    if accepts_logits_to_keep(type(target)):
        kwargs["logits_to_keep"] = keep
    out = target(ids, output_hidden_states=bool(hidden), **kwargs)
    states = None
    if hidden is True:
        states = out.hidden_states[-1]
    elif hidden:
        states = torch.cat([out.hidden_states[i] for i in hidden], -1)
    return out.logits[:, -keep:], states, returned_cache(out)


def _rows(logits, drafted: list[int], sampler):
    """(p (k+1, V), the processed target rows; x (k,), the drafted ids; 0..k-1), all on p's device."""
    import torch

    p = sampler.probs(logits)
    x = torch.tensor(drafted, dtype=torch.long, device=p.device)
    return p, x, torch.arange(len(drafted), device=p.device)


class Verifier:
    """A verification rule. logits: (len(drafted) + 1, V) target rows (chain) or (nodes + 1, V) (tree):
    after the last committed token, then after each drafted token (node)."""

    name: ClassVar[str] = "?"
    exact: ClassVar[bool] = True  # the output has the target's distribution
    trees: ClassVar[bool] = False  # also judges tree drafts

    def chain(self, logits, drafted: list[int], q, sampler) -> tuple[int, int]:
        raise NotImplementedError

    def judge(self, logits, drafted: list[int], q, tree: Tree | None, sampler) -> tuple[list[int], int]:
        """(kept nodes: a chain's accepted positions 0..n-1, or a tree's branch; next token)."""
        if tree is None:
            n, nxt = self.chain(logits, drafted, q, sampler)
            return list(range(n)), nxt
        return self.tree(tree, logits, sampler)

    def tree(self, tree: Tree, logits, sampler) -> tuple[list[int], int]:
        raise ValueError(f"rule={self.name!r} judges chains only; a tree drafter takes rule='exact' (the "
                         "multi-candidate rule) or 'typical'")


class Greedy(Verifier):
    """Greedy decoding: keep drafts while they equal the target's argmax (any exact rule reduces to this
    when nothing is sampled)."""

    name, trees = "greedy", True

    def chain(self, logits, drafted, q, sampler):
        best = logits.argmax(-1).tolist()  # the round's one host sync
        n = 0
        while n < len(drafted) and drafted[n] == best[n]:
            n += 1
        return n, best[n]

    def tree(self, tree, logits, sampler):
        best = logits.argmax(-1).tolist()
        node, path = -1, []
        while True:
            want = best[node + 1]
            nxt = next((c for c in tree.children(node) if tree.tokens[c] == want), None)
            if nxt is None:
                return path, want
            path.append(nxt)
            node = nxt


@dataclass(frozen=True)
class TokenWise(Verifier):
    """The rejection rule (Leviathan et al.): keep draft x with probability min(1, p(x)/q(x)); at the first
    rejection draw from the residual max(0, p - q). With a knob from specnotes.lossy, the knob's accept
    probability and residual instead (lossy). On a tree of point-mass candidates: the multi-candidate rule."""

    knob: object = None

    @property
    def name(self) -> str:
        return "exact" if self.knob is None else self.knob.name

    @property
    def exact(self) -> bool:
        return self.knob is None

    @property
    def trees(self) -> bool:
        return self.knob is None

    def chain(self, logits, drafted, q, sampler):
        import torch

        p, x, rows = _rows(logits, drafted, sampler)
        if not (k := len(drafted)):
            return 0, sampler.draw(p[0])
        # a point-mass draft (q None) has q(x) = 1: no (k, V) one-hot is built for it
        q_x = torch.ones(k, device=p.device) if q is None else q.to(p)[rows, x]
        ratio = p[rows, x] / q_x.clamp_min(1e-30)  # q(x) = 0 cannot happen for a token drawn from q
        accept = sampler.uniform(k) < (ratio if self.knob is None else self.knob.acceptance(ratio))
        rejected = (~accept).nonzero()
        n = int(rejected[0, 0]) if len(rejected) else k
        if n == k:
            return n, sampler.draw(p[k])  # the bonus token, from the target's last row
        q_n = torch.nn.functional.one_hot(x[n], p.shape[-1]).to(p) if q is None else q[n].to(p)
        fix = None if self.knob is None else self.knob.residual(p[n], q_n)
        return n, sampler.draw(sampling.residual(p[n], q_n) if fix is None else fix)

    def tree(self, tree, logits, sampler):
        if self.knob is not None:
            return Verifier.tree(self, tree, logits, sampler)
        probs = sampler.probs(logits)
        node, path = -1, []
        while True:
            p = probs[node + 1].clone()
            for child in tree.children(node):
                x = tree.tokens[child]
                if float(sampler.uniform(1)[0]) < float(p[x]):  # p is renormalized: p(x) is the chance
                    path.append(child)
                    node = child
                    break
                # rejected: x cannot be the token any more; what is left of p, renormalized, is the
                # distribution of the token given that it is not x (the residual of a point-mass draft)
                p[x] = 0.0
                p = p / p.sum()
            else:
                return path, sampler.draw(p)


@dataclass(frozen=True)
class Block(Verifier):
    """Block verification (Sun et al. 2025; the numpy twin and its derivation: specnotes.rules.verify_block):
    judges the draft jointly and keeps the longest prefix whose coin passed. Exact, chains only.
    longest=False plants the mistake the tests must catch: stop at the first failing coin (no longer exact,
    though it still says exact: a planted bug does not announce itself)."""

    longest: bool = True
    name: ClassVar[str] = "block"

    def chain(self, logits, drafted, q, sampler):
        import torch

        p, x, rows = _rows(logits, drafted, sampler)
        if not (k := len(drafted)):
            return 0, sampler.draw(p[0])
        q = torch.nn.functional.one_hot(x, p.shape[-1]).to(p) if q is None else q.to(p)
        # w_i = min(1, w_{i-1} p/q) as a walk in logs reflected at 0: S_i - max(0, S_1..S_i)
        s = torch.cumsum(torch.log(p[rows, x] / q[rows, x].clamp_min(1e-30)), 0)
        w = torch.exp(s - torch.cummax(s.clamp_min(0), 0).values)
        mass = torch.clamp(w[:-1, None] * p[1:k] - q[1:k], min=0).sum(-1)
        den = mass + 1 - w[:-1]
        h = torch.cat([torch.where(den > 0, mass / torch.where(den > 0, den, torch.ones_like(den)),
                                   torch.zeros_like(den)), w[-1:]])
        passed = sampler.uniform(k) < h
        hits = passed.nonzero() if self.longest else (~passed).nonzero()
        if self.longest:  # the longest prefix whose coin passed
            n = int(hits[-1, 0]) + 1 if len(hits) else 0
        else:
            n = int(hits[0, 0]) if len(hits) else k
        if n == k:
            return n, sampler.draw(p[k])
        raw = torch.clamp((w[n - 1] if n else 1.0) * p[n] - q[n], min=0)
        total = raw.sum()
        return n, sampler.draw(raw / total if total > 0 else p[n])


@dataclass(frozen=True)
class Typical(Verifier):
    """Medusa-2's typical acceptance: take the first child whose p(x) > min(epsilon, delta exp(-H(p))), then
    draw the next token from p. NOT exact. A chain is walked as a tree with one branch."""

    epsilon: float = 0.3
    delta: float = 0.09
    name: ClassVar[str] = "typical"
    exact: ClassVar[bool] = False
    trees: ClassVar[bool] = True

    def chain(self, logits, drafted, q, sampler):
        path, nxt = self.tree(trees.chain(drafted), logits, sampler)
        return len(path), nxt

    def tree(self, tree, logits, sampler):
        import torch

        probs = sampler.probs(logits)
        node, path = -1, []
        while True:
            p = probs[node + 1]
            entropy = float(-(p * torch.log(p.clamp_min(1e-30))).sum())
            threshold = min(self.epsilon, self.delta * float(np.exp(-entropy)))
            nxt = next((c for c in tree.children(node) if float(p[tree.tokens[c]]) > threshold), None)
            if nxt is None:
                return path, sampler.draw(p)
            path.append(nxt)
            node = nxt


# every rule engine.generate(rule=...) takes, by name; the lossy knobs at their default settings
RULES: dict[str, Verifier] = {
    "exact": TokenWise(),
    "block": Block(),
    "typical": Typical(),
    **{name: TokenWise(knob) for name, knob in lossy.KNOBS.items()},
}
LOSSY = tuple(name for name, rule in RULES.items() if not rule.exact)


def choose(rule, do_sample: bool) -> Verifier:
    """The verifier for a rule name, a specnotes.lossy knob (its own setting) or a Verifier; Greedy when
    nothing is sampled (greedy verification is already exact, so a lossy rule is refused there)."""
    if isinstance(rule, Verifier):
        verifier = rule
    elif lossy.knob(rule) is not None and not isinstance(rule, str):
        verifier = TokenWise(rule)
    elif isinstance(rule, str) and rule in RULES:
        verifier = RULES[rule]
    else:
        raise ValueError(f"rule must be one of {tuple(RULES)} or a specnotes.lossy knob, got {rule!r}")
    if not verifier.exact and not do_sample:
        raise ValueError(f"rule={rule!r} is a lossy sampling rule (greedy verification is already exact); "
                         "pass do_sample=True, or leave rule='exact'")
    return verifier if do_sample else Greedy()


def compact(cache, start: int, keep: list[int]) -> None:
    """Keep the first `start` cached positions and then only the listed positions after them (offsets from
    `start`, increasing): the accepted branch of a tree pass, without the other branches. The kept rows are
    moved down into place and the rest cropped; nothing else in the cache is copied. When `keep` is a prefix
    (a chain's accepted drafts) this is an ordinary crop. The move writes into the cache's tensors in place:
    call it where the pass ran (under the same inference_mode), on a cache whose layers hold every
    position (no sliding window)."""
    moved = [(start + i, start + k) for i, k in enumerate(keep) if k != i]
    if moved:
        import torch

        dst, src = (torch.tensor(side) for side in zip(*moved, strict=True))
        for layer in cache.layers:
            for name in ("keys", "values"):
                rows = getattr(layer, name)
                rows[..., dst.to(rows.device), :] = rows[..., src.to(rows.device), :]
    crop(cache, cache.get_seq_length() - start - len(keep))
