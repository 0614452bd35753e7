"""Speculative decoding on real transformers models, one round at a time.

speculative_round(target, drafter, state) is one round: draft, verify every drafted token in ONE target
pass, keep the accepted prefix (or tree branch) and the target's own next token, drop the rejected keys
and values, tell the drafter what the pass taught. generate() is start() and a loop over it, for every
drafter, chains and trees alike. Notebook 02 runs it round by round; 06 and 07 plug drafters into it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

# exact: the token-wise rejection rule (trees: the multi-candidate rule); block: block verification, also
# exact (chains only; specnotes.block); the rest are lossy, for sampling only: typical is Medusa-2's
# acceptance (specnotes.tree), the last three are specnotes.lossy's knobs at their default settings
RULES = ("exact", "block", "typical", "threshold", "synthetic", "top-k-residual")
LOSSY = ("typical", "threshold", "synthetic", "top-k-residual")


@dataclass(frozen=True)
class Round:
    drafted: list[int]  # what the drafter proposed this round (cut at an EOS it contained)
    accepted: int  # how many of them the target kept (a prefix)
    next_token: int | None  # the target's own token: the correction, or the bonus when all were kept;
    #                         None when the round ended on an EOS among the accepted drafts
    cache_len: int  # target KV-cache length after the rollback
    at: float = 0.0  # seconds since the generation started when this round's tokens were ready

    @property
    def judged(self) -> int:
        """Draft positions the target examined: the scan stops at the first rejection."""
        return min(self.accepted + 1, len(self.drafted))

    @property
    def kind(self) -> str:
        if self.next_token is None:
            return "eos"
        if not self.drafted:
            return "plain"  # nothing was drafted: an ordinary decode step
        return "bonus" if self.accepted == len(self.drafted) else "corrected"


@dataclass
class Result:
    tokens: list[int]  # new tokens only
    trace: list[Round] = field(default_factory=list)  # one round per target pass; the first reads the prompt
    stopped_on_eos: bool = False

    @property
    def drafted_counts(self) -> np.ndarray:
        return np.array([len(r.drafted) for r in self.trace], dtype=int)

    @property
    def accepted_counts(self) -> np.ndarray:
        return np.array([r.accepted for r in self.trace], dtype=int)

    @property
    def position_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(judged, kept), each (max drafted,): rounds whose scan reached draft position i, and of those
        the rounds that accepted it."""
        width = int(self.drafted_counts.max(initial=0))
        judged, kept = np.zeros(width, dtype=int), np.zeros(width, dtype=int)
        for r in self.trace:
            judged[:r.judged] += 1
            kept[:r.accepted] += 1
        return judged, kept

    @property
    def per_position_acceptance(self) -> np.ndarray:
        """(max drafted,) acceptance at draft position i among rounds whose scan reached it."""
        judged, kept = self.position_counts
        return kept / np.maximum(judged, 1)

    @property
    def alpha(self) -> float:
        """Accepted drafts over drafts judged (the scan stops at the first rejection)."""
        judged = sum(r.judged for r in self.trace)
        return float(self.accepted_counts.sum() / judged) if judged else float("nan")

    @property
    def arrival_times(self) -> np.ndarray:
        """(new tokens,) seconds from the start at which each token was ready: a round's tokens arrive
        together, so the gaps between them are bursts of zeros and then one round's wait."""
        return np.repeat([r.at for r in self.trace], [r.accepted + (r.next_token is not None)
                                                      for r in self.trace])[:len(self.tokens)]

    @property
    def tokens_per_call(self) -> float:
        """New tokens per target pass (every pass verifies; the first one also reads the prompt)."""
        return len(self.tokens) / max(len(self.trace), 1)


@dataclass
class Decoding:
    """One generation between rounds: what speculative_round reads and advances (start() makes one)."""

    tokens: list[int]  # the prompt and every token committed so far
    prompt_len: int
    max_new_tokens: int
    k: int  # the draft length the engine asks for (see Drafter for who honours it)
    sampler: object  # specnotes.sampling.Sampler
    eos: frozenset
    rule: object = "exact"  # a name in RULES, or a specnotes.lossy knob
    cache: object = None  # the target's KV cache: every committed token but the last
    uncached: list[int] = field(default_factory=list)  # before round 1: the prompt but its last token
    trace: list[Round] = field(default_factory=list)
    stopped_on_eos: bool = False
    started: float = field(default_factory=time.perf_counter)

    @property
    def new(self) -> list[int]:
        return self.tokens[self.prompt_len:]

    @property
    def done(self) -> bool:
        return self.stopped_on_eos or len(self.tokens) - self.prompt_len >= self.max_new_tokens

    def result(self) -> Result:
        return Result(self.new, list(self.trace), self.stopped_on_eos)


def start(target, drafter, input_ids, max_new_tokens: int, k: int = 5, do_sample: bool = False,
          temperature: float = 1.0, seed: int | None = None, top_k: int | None = None,
          top_p: float | None = None, eos_token_id=None, rule="exact") -> Decoding:
    """Check every setting, reset the drafter, and return the state before the first round.

    eos_token_id: an id or a list of them; None takes the model's generation config; -1 (or []) never
    stops. rule: a name in RULES ("exact", the default, is the rejection rule; for trees the multi-candidate
    rule), or a specnotes.lossy knob with its own setting, such as lossy.Threshold(0.3)."""
    from specnotes import checks, lossy
    from specnotes.drafters import Drafter
    from specnotes.placement import device_of
    from specnotes.sampling import Sampler

    vocab = target.config.vocab_size
    seq = checks.prompt_ids(input_ids, vocab)
    max_new_tokens = checks.whole(max_new_tokens, "max_new_tokens", scalar=True)
    k = checks.whole(k, "k (drafted tokens per round)", scalar=True)
    knob = lossy.knob(rule)
    if knob is None and rule not in RULES:
        raise ValueError(f"rule must be one of {RULES} or a specnotes.lossy knob, got {rule!r}")
    if (knob is not None or rule in LOSSY) and not do_sample:
        raise ValueError(f"rule={rule!r} is a lossy sampling rule (greedy verification is already exact); "
                         "pass do_sample=True, or leave rule='exact'")
    if not isinstance(drafter, Drafter):
        raise TypeError("drafter must be a drafter object, an instance of a specnotes.drafters.Drafter "
                        f"subclass such as PromptLookup() (not the class), got {drafter!r}")
    if not drafter.needs <= frozenset(("predictions", "states")):
        raise ValueError(f"{type(drafter).__name__}.needs may name 'predictions' and 'states', got "
                         f"{sorted(drafter.needs)}")
    if drafter.vocab_size is not None and drafter.vocab_size != vocab:
        raise ValueError(f"the draft model's vocabulary ({drafter.vocab_size} tokens) differs "
                         f"from the target's ({vocab}); drafts must use the target's tokenizer")
    if eos_token_id is None:
        config = target.generation_config if hasattr(target, "generation_config") else None
        eos_token_id = config.eos_token_id if config is not None else None
    eos = checks.stop_tokens(eos_token_id, vocab)
    sampler = Sampler(do_sample, temperature, top_k, top_p, seed, device=device_of(target))
    drafter.reset(list(seq))
    return Decoding(list(seq), len(seq), max_new_tokens, k, sampler, eos, rule, uncached=seq[:-1])


def _checked(draft, who: str, vocab: int, sampling: bool, room: int):
    """(tokens, q, tree or None) of a draft, cut to `room` tokens (a tree: to depth `room`). Nothing a
    drafter says is trusted: its ids must be tokens, its tree well formed, and (when sampling) its q the
    distribution it drew the tokens from, or the rejection rule silently stops being exact."""
    from specnotes import checks
    from specnotes.drafters import Draft
    from specnotes.tree import Tree

    if not isinstance(draft, Draft):
        raise TypeError(f"{who}.propose returned {type(draft).__name__}, not a Draft(tokens, q, parents)")
    tokens = checks.token_ids(draft.tokens, f"the tokens {who} drafted", vocab, empty=True)
    if draft.is_tree:
        if draft.q is not None:
            raise ValueError(f"{who} drafted a tree with q: tree candidates are verified as point masses "
                             "here (the multi-candidate rule), so a tree draft passes q=None")
        tree = Tree(tokens, list(draft.parents))
        return tree.tokens, None, (tree.cut(room) if len(tree) and int(tree.depth.max()) > room else tree)
    if sampling and draft.q is not None:
        checks.draft_q(draft.q, tokens, vocab, who)
    tokens = tokens[:room]
    return tokens, (draft.q[:len(tokens)] if draft.q is not None else None), None


def speculative_round(target, drafter, state: Decoding) -> Round:
    """One round of speculative decoding; advances `state` and returns the round's record.

    Greedy output equals the target's own greedy output; sampled output has the target's distribution
    (after the same temperature/top-k/top-p processing), except under the lossy rules (LOSSY)."""
    import torch

    from specnotes import lossy, passes, sampling
    from specnotes import tree as trees
    from specnotes.drafters import Draft, Feedback

    if state.done:
        raise ValueError("this generation is finished (max_new_tokens reached or an EOS emitted); "
                         "start() a new one")
    vocab, who, sampler = target.config.vocab_size, type(drafter).__name__, state.sampler
    seq = state.tokens
    before = len(seq)
    room = state.max_new_tokens - len(state.new) - 1  # the round's own token always comes on top
    with torch.inference_mode():
        # 1. draft: the drafter guesses a continuation (up to k tokens, for drafters that pay per token)
        draft = drafter.propose(list(seq), min(state.k, room), sampler) if room else Draft([])
        # 2. trust nothing: check the ids (and q, and the tree) and cut the draft to the tokens left
        drafted, q, tree = _checked(draft, who, vocab, sampler.do_sample, room)
        if tree is not None and sampler.do_sample and state.rule not in ("exact", "typical"):
            raise ValueError(f"rule={state.rule!r} judges a chain draft, but {who} drafted a tree; trees "
                             "take rule='exact' (the multi-candidate rule) or 'typical'")
        # 3. verify: ONE target pass over [last token, drafts]; a tree, or a drafter that reads the
        #    target's hidden states, goes through the tree pass (a chain is a tree with one branch)
        start_len = passes.cache_length(state.cache) + len(state.uncached)
        n_prompt = len(state.uncached)
        hidden = None
        if tree is None and "states" not in drafter.needs:
            logits, state.cache = passes.chain_pass(target, state.cache, seq[-1], drafted, state.uncached)
        else:
            logits, hidden, state.cache = passes.tree_pass(target, state.cache, seq[-1],
                                                           tree if tree is not None else trees.chain(drafted),
                                                           state.uncached)
        state.uncached = []
        if tree is None and state.rule == "typical":
            tree = trees.chain(drafted)  # typical acceptance is a walk; on a chain it walks one branch
        # 4. accept: the longest prefix (tree: branch) the rule keeps, then the target's own next token
        if tree is None:  # a chain: the token-wise rule, with the q the drafter reported
            if sampler.do_sample and state.rule == "block":
                n, nxt = sampling.accept_block(logits, drafted, q, sampler)
            elif sampler.do_sample:
                n, nxt = sampling.accept_sampled(logits, drafted, q, sampler, lossy.knob(state.rule))
            else:
                n, nxt = sampling.accept_greedy(logits, drafted)
            path = list(range(n))
        elif not sampler.do_sample:
            path, nxt = trees.walk_greedy(tree, logits)
        elif state.rule == "typical":
            path, nxt = trees.walk_typical(tree, sampler.probs(logits), sampler.draw)
        else:
            path, nxt = trees.walk_sampling(tree, sampler.probs(logits), lambda: float(sampler.uniform(1)[0]),
                                            sampler.draw)
        # 5. keep the accepted keys and values: the root and the accepted nodes (a chain: a crop)
        passes.compact(state.cache, start_len, [0] + [i + 1 for i in path])
        if tree is not None:  # what was judged: the accepted branch, then the first-ranked line below it
            below, line = (path[-1] if path else -1), list(path)
            while (kids := tree.children(below)):
                below = kids[0]
                line.append(below)
            drafted = [tree.tokens[i] for i in line]
        emitted = [*drafted[:len(path)], nxt]  # never more than the room left: drafts were cut to fit
        accepted = len(path)
        # 6. stop at EOS: an accepted draft that is an EOS ends the generation, nothing after it counts
        cut = next((i for i, t in enumerate(emitted) if t in state.eos), None)
        if cut is not None:
            state.stopped_on_eos = True
            if cut < accepted:
                passes.crop(state.cache, accepted - cut)
                emitted, drafted, accepted, nxt = emitted[:cut + 1], drafted[:cut + 1], cut + 1, None
        seq += emitted
        # 7. tell the drafter what the pass taught (predictions and states only when it asks)
        predictions = logits.argmax(-1).tolist() if "predictions" in drafter.needs else None
        states = None
        if "states" in drafter.needs:
            rows = list(range(n_prompt)) + [n_prompt + r for r in [0] + [i + 1 for i in path[:accepted]]]
            states = hidden[rows]
        drafter.update(Feedback(list(seq), before, list(drafted), accepted, predictions, states))
    # 8. record the round
    record = Round(list(drafted), accepted, nxt, state.cache.get_seq_length(),
                   time.perf_counter() - state.started)
    state.trace.append(record)
    return record


def generate(target, drafter, input_ids, max_new_tokens: int, k: int = 5, do_sample: bool = False,
             temperature: float = 1.0, seed: int | None = None, top_k: int | None = None,
             top_p: float | None = None, eos_token_id=None, rule="exact") -> Result:
    """Speculative decoding of one prompt, with any drafter (chain or tree): start(), then rounds until
    max_new_tokens or an EOS. input_ids is (1, T), on any device. Returns new tokens and the trace."""
    state = start(target, drafter, input_ids, max_new_tokens, k, do_sample, temperature, seed, top_k,
                  top_p, eos_token_id, rule)
    while not state.done:
        speculative_round(target, drafter, state)
    return state.result()
