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

from specnotes import checks, metrics, verify
from specnotes.drafters.base import Draft, Drafter, Feedback
from specnotes.placement import device_of
from specnotes.sampling import Sampler
from specnotes.tree import Tree

# every rule name generate(rule=...) takes, and the lossy ones among them: the table is specnotes.verify's
RULES, LOSSY = tuple(verify.RULES), verify.LOSSY


@dataclass(frozen=True)
class Round:
    drafted: list[int]  # what the target judged: the drafted chain (a tree: the accepted branch, then the
    #                     first-ranked line below it), cut at an EOS it contained
    accepted: int  # how many of them the target kept (a prefix)
    next_token: int | None  # the target's own token: the correction, or the bonus when all were kept;
    #                         None when the round ended on an EOS among the accepted drafts
    cache_len: int  # target KV-cache length after the rollback
    at: float = 0.0  # seconds since the generation started when this round's tokens were ready
    size: int | None = None  # tokens the drafter proposed, after the cut to the cap (a tree: its nodes;
    #                         drafted, a tree's judged line, is shorter); None: len(drafted)

    def __post_init__(self):
        if self.size is None:
            object.__setattr__(self, "size", len(self.drafted))

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

    def acceptance(self) -> metrics.Acceptance:
        """This generation's acceptance record (specnotes.metrics): alpha, acceptance length, tokens per
        pass and acceptance by draft position are all computed there, once."""
        return metrics.Acceptance.from_trace(self.trace, len(self.tokens))

    @property
    def position_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(judged, kept), each (max drafted,): rounds whose scan reached draft position i, and of those
        the rounds that accepted it."""
        return self.acceptance().position_counts

    @property
    def per_position_acceptance(self) -> np.ndarray:
        """(max drafted,) acceptance at draft position i among rounds whose scan reached it."""
        return self.acceptance().per_position_acceptance

    @property
    def alpha(self) -> float:
        """Accepted drafts over drafts judged (the scan stops at the first rejection)."""
        return self.acceptance().alpha

    @property
    def arrival_times(self) -> np.ndarray:
        """(new tokens,) seconds from the start at which each token was ready: a round's tokens arrive
        together, so the gaps between them are bursts of zeros and then one round's wait."""
        return np.repeat([r.at for r in self.trace], [r.accepted + (r.next_token is not None)
                                                      for r in self.trace])[:len(self.tokens)]

    @property
    def tokens_per_call(self) -> float:
        """New tokens per target pass (every pass verifies; the first one also reads the prompt)."""
        return self.acceptance().tokens_per_pass


@dataclass
class Decoding:
    """One generation between rounds: what speculative_round reads and advances (start() makes one)."""

    tokens: list[int]  # the prompt and every token committed so far
    prompt_len: int
    max_new_tokens: int
    k: int | None  # the cap on drafted tokens (a tree: its depth) per round; None: the drafter's own policy
    sampler: Sampler
    eos: frozenset
    verifier: verify.Verifier  # the rule, chosen once by start()
    cache: object = None  # the target's KV cache (a transformers Cache): every committed token but the last
    uncached: list[int] = field(default_factory=list)  # before round 1: the prompt but its last token
    trace: list[Round] = field(default_factory=list)
    stopped_on_eos: bool = False
    started: float = field(default_factory=time.perf_counter)

    @property
    def new(self) -> list[int]:
        return self.tokens[self.prompt_len:]

    @property
    def room(self) -> int:
        """Tokens a round may still draft: the round's own token always comes on top."""
        return self.max_new_tokens - (len(self.tokens) - self.prompt_len) - 1

    @property
    def done(self) -> bool:
        return self.stopped_on_eos or len(self.tokens) - self.prompt_len >= self.max_new_tokens

    def result(self) -> Result:
        return Result(self.new, list(self.trace), self.stopped_on_eos)


def start(target, drafter, input_ids, max_new_tokens: int, k: int | None = None, do_sample: bool = False,
          temperature: float = 1.0, seed: int | None = None, top_k: int | None = None,
          top_p: float | None = None, eos_token_id=None, rule="exact") -> Decoding:
    """Check every setting, choose the verification rule, reset the drafter, and return the state before
    the first round.

    k: the most tokens a drafter may propose per round (a tree drafter: the deepest level); None sets no
    cap and leaves each drafter to its own length (PromptLookup's adaptive length; a DraftModel given no
    k of its own drafts 5).
    eos_token_id: an id or a list of them; None takes the model's generation config; -1 (or []) never
    stops. rule: a name in RULES ("exact", the default, is the rejection rule; for trees the multi-candidate
    rule), a specnotes.lossy knob with its own setting, such as lossy.Threshold(0.3), or a verify.Verifier."""
    vocab = target.config.vocab_size
    seq = checks.prompt_ids(input_ids, vocab)
    max_new_tokens = checks.whole(max_new_tokens, "max_new_tokens", scalar=True)
    if k is not None:
        k = checks.whole(k, "k (the most drafted tokens per round)", scalar=True)
    verifier = verify.choose(rule, do_sample)
    if not isinstance(drafter, Drafter):
        raise TypeError("drafter must be a drafter object, an instance of a specnotes.drafters.Drafter "
                        f"subclass such as PromptLookup() (not the class), got {drafter!r}")
    if not drafter.needs <= frozenset(("predictions", "states")):
        raise ValueError(f"{type(drafter).__name__}.needs may name 'predictions' and 'states', got "
                         f"{sorted(drafter.needs)}")
    if drafter.drafts_trees and not verifier.trees:
        raise ValueError(f"rule={rule!r} judges chain drafts, but {type(drafter).__name__} drafts trees; "
                         "trees take rule='exact' (the multi-candidate rule) or 'typical'")
    if drafter.vocab_size is not None and drafter.vocab_size != vocab:
        raise ValueError(f"the draft model's vocabulary ({drafter.vocab_size} tokens) differs "
                         f"from the target's ({vocab}); drafts must use the target's tokenizer")
    if eos_token_id is None:
        config = target.generation_config if hasattr(target, "generation_config") else None
        eos_token_id = config.eos_token_id if config is not None else None
    eos = checks.stop_tokens(eos_token_id, vocab)
    sampler = Sampler(do_sample, temperature, top_k, top_p, seed, device=device_of(target))
    drafter.reset(list(seq))
    return Decoding(list(seq), len(seq), max_new_tokens, k, sampler, eos, verifier, uncached=seq[:-1])


def _checked(draft, drafter, vocab: int, sampling: bool, room: int):
    """(tokens, q, tree or None) of a draft, cut to `room` tokens (a tree: to depth `room`). Nothing a
    drafter says is trusted: its ids must be tokens, its tree well formed, and (when sampling) its q the
    distribution it drew the tokens from, or the rejection rule silently stops being exact."""
    who = type(drafter).__name__
    if not isinstance(draft, Draft):
        raise TypeError(f"{who}.propose returned {type(draft).__name__}, not a Draft(tokens, q, parents)")
    tokens = checks.token_ids(draft.tokens, f"the tokens {who} drafted", vocab, empty=True)
    if draft.is_tree:
        if not drafter.drafts_trees:
            raise TypeError(f"{who} drafted a tree but does not declare drafts_trees = True, so start() "
                            "could not check that the rule judges trees")
        if draft.q is not None:
            raise ValueError(f"{who} drafted a tree with q: tree candidates are verified as point masses "
                             "here (the multi-candidate rule), so a tree draft passes q=None")
        tree = Tree(tokens, list(draft.parents))
        tree = tree.cut(room) if len(tree) and int(tree.depth.max()) > room else tree
        return tree.tokens, None, tree
    if sampling and draft.q is not None:
        checks.draft_q(draft.q, tokens, vocab, who)
    tokens = tokens[:room]
    return tokens, (draft.q[:len(tokens)] if draft.q is not None and sampling else None), None


def speculative_round(target, drafter, state: Decoding) -> Round:
    """One round of speculative decoding; advances `state` and returns the round's record.

    Greedy output equals the target's own greedy output; sampled output has the target's distribution
    (after the same temperature/top-k/top-p processing), except under the lossy rules (LOSSY)."""
    import torch

    if state.done:
        raise ValueError("this generation is finished (max_new_tokens reached or an EOS emitted); "
                         "start() a new one")
    seq, room, before, n_uncached = state.tokens, state.room, len(state.tokens), len(state.uncached)
    cap = None if state.k is None else min(state.k, room)  # None: the drafter's own length
    with torch.inference_mode():
        # 1. draft: the drafter guesses up to `cap` tokens (a tree: that many levels); seq is read-only
        draft = drafter.propose(seq, cap, state.sampler) if room else Draft([])
        # 2. trust nothing: check the ids (and q, and the tree) and cut the draft to the cap and the room
        drafted, q, tree = _checked(draft, drafter, target.config.vocab_size, state.sampler.do_sample,
                                    room if cap is None else cap)
        # 3. verify: ONE target pass over [last token, drafts or tree nodes] (round 1: the prompt first)
        start_len = (0 if state.cache is None else state.cache.get_seq_length()) + n_uncached
        ids = [*state.uncached, seq[-1], *drafted]
        logits, hidden, state.cache = verify.verify_pass(target, state.cache, ids, tree, n_uncached,
                                                         hidden="states" in drafter.needs)
        state.uncached = []
        # 4. accept: the rule keeps a prefix (a tree: a branch) and picks the target's own next token
        path, nxt = state.verifier.judge(logits, drafted, q, tree, state.sampler)
        # 5. keep the accepted keys and values: the root and the accepted nodes (a chain: a crop)
        verify.compact(state.cache, start_len, [0, *(i + 1 for i in path)])
        line = drafted if tree is None else [tree.tokens[i] for i in tree.line(path)]  # what was judged
        accepted, emitted = len(path), [*line[:len(path)], nxt]
        # 6. stop at EOS: an accepted draft that is an EOS ends the generation, nothing after it counts
        cut = next((i for i, t in enumerate(emitted) if t in state.eos), None)
        if cut is not None:
            state.stopped_on_eos = True
            if cut < accepted:  # keep the root and the drafts before the EOS (the EOS stays uncached)
                verify.compact(state.cache, start_len, list(range(cut + 1)))
                emitted, line, accepted, nxt = emitted[:cut + 1], line[:cut + 1], cut + 1, None
        seq += emitted
        # 7. tell the drafter what the pass taught (predictions and states only when it asks)
        predictions = logits.argmax(-1).tolist() if "predictions" in drafter.needs else None
        # the rows whose logits chose this round's tokens: the prompt, the root, the kept drafts (not an EOS)
        rows = [*range(n_uncached + 1), *(n_uncached + 1 + i for i in path[:len(emitted) - 1])]
        states = None if hidden is None else hidden[rows]
        drafter.update(Feedback(seq, before, list(line), accepted, predictions, states))
    # 8. record the round
    record = Round(line, accepted, nxt, state.cache.get_seq_length(), time.perf_counter() - state.started,
                   len(drafted))
    state.trace.append(record)
    return record


def generate(target, drafter, input_ids, max_new_tokens: int, k: int | None = None, do_sample: bool = False,
             temperature: float = 1.0, seed: int | None = None, top_k: int | None = None,
             top_p: float | None = None, eos_token_id=None, rule="exact") -> Result:
    """Speculative decoding of one prompt, with any drafter (chain or tree): start(), then rounds until
    max_new_tokens or an EOS. input_ids is (1, T), on any device. k caps the drafted tokens per round
    (None: each drafter's own length). Returns new tokens and the trace."""
    state = start(target, drafter, input_ids, max_new_tokens, k, do_sample, temperature, seed, top_k,
                  top_p, eos_token_id, rule)
    while not state.done:
        speculative_round(target, drafter, state)
    return state.result()
