"""Speculative decoding on real transformers models, one round at a time.

speculative_round(target, drafter, state) is one round: draft, verify every drafted token in ONE target
pass, keep the accepted prefix (or tree branch) and the target's own next token, drop the rejected keys
and values, tell the drafter what the pass taught. generate() is start() and a loop over it, for every
drafter, chains and trees alike. Notebook 02 runs it round by round; 06 and 07 plug drafters into it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from specnotes import checks, verify
from specnotes.drafters.base import Draft, Drafter, Feedback
from specnotes.passes import crop
from specnotes.placement import device_of
from specnotes.result import Result
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
    dropped: int = 0  # accepted drafts thrown away by a whole-batch rollback (generate_batch, "shortest")

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

    def cut_at_eos(self, emitted: list, line: list, accepted: int, nxt):
        """Step 6 of a round: an EOS among the emitted tokens ends the generation, and nothing after it
        counts. Returns (emitted, line, accepted, nxt) cut after the EOS; when the EOS was an accepted
        draft, accepted becomes the drafts kept up to it and nxt None (the caller drops the keys and
        values past them)."""
        cut = next((i for i, t in enumerate(emitted) if t in self.eos), None)
        if cut is None:
            return emitted, line, accepted, nxt
        self.stopped_on_eos = True
        if cut < accepted:
            return emitted[:cut + 1], line[:cut + 1], cut + 1, None
        return emitted, line, accepted, nxt


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
                                                         hidden=verify.wanted_states(drafter))
        state.uncached = []
        # 4. accept: the rule keeps a prefix (a tree: a branch) and picks the target's own next token
        path, nxt = state.verifier.judge(logits, drafted, q, tree, state.sampler)
        # 5. keep the accepted keys and values: the root and the accepted nodes (a chain: a crop)
        verify.compact(state.cache, start_len, [0, *(i + 1 for i in path)])
        line = drafted if tree is None else [tree.tokens[i] for i in tree.line(path)]  # what was judged
        accepted, emitted = len(path), [*line[:len(path)], nxt]
        # 6. stop at EOS: an accepted draft that is an EOS ends the generation, nothing after it counts
        emitted, line, accepted, nxt = state.cut_at_eos(emitted, line, accepted, nxt)
        if nxt is None:  # the EOS was an accepted draft: keep the root and the drafts before it
            verify.compact(state.cache, start_len, list(range(accepted)))
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


# --------------------------------------------------------------------------- a batch of prompts
# The batch is a second axis, not a second engine: every row is a Decoding of its own (its tokens, sampler,
# room, EOS and trace, made by start()), judged by the same verifier as a batch-1 round. What the batch
# adds is the bookkeeping of ONE cache for rows that accept different numbers of drafts: a mask over the
# cache's columns. A column a row did not fill (left padding of a shorter prompt, a rejected draft, padding
# after a shorter draft) is 0 in that row's mask, so the row never attends to it, and each row's position
# ids count only its own tokens. After a round the columns past the longest kept draft are cropped; the
# holes below it stay masked. (vLLM instead rolls each request's num_computed_tokens back by its rejected
# count and overwrites those KV slots in the next step: the same bookkeeping with a paged cache.)

ROLLBACKS = ("row", "shortest")  # each row keeps its own prefix; or the whole batch keeps the shortest


@dataclass
class Batch:
    """A batch between rounds: one Decoding and one drafter per prompt, and the shared cache."""

    rows: list[Decoding]
    drafters: list[Drafter]
    rollback: str = "row"
    live: list[int] = field(default_factory=list)  # the rows still generating, in the cache's row order
    cache: object = None
    mask: object = None  # (len(live), cached columns): 1 where the column holds one of that row's tokens
    passes: int = 0

    @property
    def done(self) -> bool:
        return not self.live

    def results(self) -> list[Result]:
        return [row.result() for row in self.rows]


def start_batch(target, make_drafter, prompts, max_new_tokens, k: int | None = None,
                do_sample: bool = False, temperature: float = 1.0, seed: int | None = None,
                top_k: int | None = None, top_p: float | None = None, eos_token_id=None, rule="exact",
                rollback: str = "row") -> Batch:
    """Check the batch and start() one row per prompt (row i samples with seed + i). prompts: a list of
    1-D token-id lists (or tensors) of any lengths; max_new_tokens: one for all rows or a list, one per
    row; make_drafter: called once per row, it must build a new
    drafter each time. rollback="shortest" is the naive alternative, greedy only: every row keeps only as
    many drafts as the row that kept fewest (lossless, and wasteful: Round.dropped counts the loss)."""
    import torch

    if isinstance(prompts, (str, bytes)) or not hasattr(prompts, "__len__") or len(prompts) == 0:
        raise ValueError(f"prompts must be a non-empty list of 1-D token-id lists, got {prompts!r:.80}")
    if isinstance(make_drafter, Drafter) or not callable(make_drafter):
        raise TypeError("make_drafter must build one drafter per row when called, such as PromptLookup (the "
                        f"class) or lambda: DraftModel(draft), got {make_drafter!r}")
    if rollback not in ROLLBACKS:
        raise ValueError(f"rollback must be one of {ROLLBACKS}, got {rollback!r}")
    if rollback == "shortest" and do_sample:
        raise ValueError("rollback='shortest' is lossless only under greedy decoding (cutting a row at "
                         "another row's rejection biases its sampled tokens); pass do_sample=False")
    ids = [checks.token_ids(p, f"prompts[{i}]", target.config.vocab_size) for i, p in enumerate(prompts)]
    drafters = [make_drafter() for _ in ids]
    if len({id(d) for d in drafters}) < len(drafters):
        raise ValueError("make_drafter returned the same drafter object for two rows: each row needs its "
                         "own (its cache, its index); pass a factory such as PromptLookup or "
                         "lambda: DraftModel(draft), not one drafter")
    if any(d.drafts_trees for d in drafters if isinstance(d, Drafter)):
        raise ValueError(f"generate_batch verifies chains; {type(drafters[0]).__name__} drafts trees. Use a "
                         "chain drafter (PromptLookup, DraftModel, ...) in a batch, or generate() per prompt")
    each = isinstance(max_new_tokens, (list, tuple))
    limits = list(max_new_tokens) if each else [max_new_tokens] * len(ids)
    if len(limits) != len(ids):
        raise ValueError(f"max_new_tokens: one per prompt ({len(ids)}), or one for all; got {len(limits)}")
    rows = [start(target, d, torch.tensor([p]), n, k, do_sample, temperature,
                  None if seed is None else seed + i, top_k, top_p, eos_token_id, rule)
            for i, (p, d, n) in enumerate(zip(ids, drafters, limits, strict=True))]
    for row in rows[1:]:
        row.started = rows[0].started
    return Batch(rows, drafters, rollback, live=list(range(len(rows))))


def batch_round(target, batch: Batch) -> None:
    """One round for every live row: each drafts on its own, ONE target pass verifies every row's draft,
    each row keeps its own accepted prefix (or, rollback='shortest', the batch's shortest), and rows that
    finished leave the batch (no pass is spent on them again)."""
    import torch

    rows, drafters = [batch.rows[i] for i in batch.live], [batch.drafters[i] for i in batch.live]
    vocab, device = target.config.vocab_size, device_of(target)
    with torch.inference_mode():
        drafts = []  # 1-2. draft and check, row by row, as a batch-1 round does
        for row, drafter in zip(rows, drafters, strict=True):
            cap = None if row.k is None else min(row.k, row.room)
            draft = drafter.propose(row.tokens, cap, row.sampler) if row.room else Draft([])
            drafts.append(_checked(draft, drafter, vocab, row.sampler.do_sample,
                                   row.room if cap is None else cap)[:2])
        # 3. verify: one (B, U + D) pass. Row i: its uncached tokens right-aligned at column U, its draft
        # after them, padding where it has none (0 in the mask)
        heads = [[*row.uncached, row.tokens[-1]] for row in rows]
        width_u, width_d = max(map(len, heads)), max(len(d) for d, _ in drafts)
        grid, new = [], []
        for head, (drafted, _) in zip(heads, drafts, strict=True):
            pad_left, pad_right = width_u - len(head), width_d - len(drafted)
            grid.append([0] * pad_left + head + drafted + [0] * pad_right)
            new.append([0] * pad_left + [1] * (len(head) + len(drafted)) + [0] * pad_right)
        new = torch.tensor(new, device=device)
        mask = new if batch.mask is None else torch.cat([batch.mask, new], 1)
        states = verify.wanted_states(drafters[0])  # one factory: every row the same kind
        grid = torch.tensor(grid, device=device)
        logits, hidden, batch.cache = verify.batch_pass(target, batch.cache, grid, mask, width_d + 1, states)
        batch.passes += 1
        # 4. accept: each row's own rule and sampler judge its own rows of the pass
        judged = [row.verifier.judge(logits[i, :len(d) + 1], d, q, None, row.sampler)
                  for i, (row, (d, q)) in enumerate(zip(rows, drafts, strict=True))]
        dropped = [0] * len(rows)
        if batch.rollback == "shortest":  # the naive alternative: everyone keeps the fewest anyone kept
            least = min(len(path) for path, _ in judged)
            for i, (path, _) in enumerate(judged):
                if len(path) > least:
                    dropped[i] = len(path) - least
                    judged[i] = path[:least], int(logits[i, least].argmax())
        kept, records = [], []
        for i, (row, drafter, (drafted, _), (path, nxt)) in enumerate(zip(rows, drafters, drafts, judged,
                                                                           strict=True)):
            accepted, emitted, line = len(path), [*drafted[:len(path)], nxt], list(drafted)
            emitted, line, accepted, nxt = row.cut_at_eos(emitted, line, accepted, nxt)  # 6. as in a round
            kept.append(min(accepted, len(emitted) - 1))
            records.append((line, accepted, nxt, len(drafted), dropped[i]))
            before = len(row.tokens)
            row.tokens += emitted
            row.uncached = []
            # 7. the drafter's feedback, from this row's own columns of the pass
            predictions = (logits[i, :len(drafted) + 1].argmax(-1).tolist() if "predictions" in drafter.needs
                           else None)
            cols = [*range(width_u - len(heads[i]), width_u), *(width_u + j for j in range(len(emitted) - 1))]
            states = hidden[i, cols] if "states" in drafter.needs else None
            drafter.update(Feedback(row.tokens, before, line, accepted, predictions, states, len(rows)))
        # 5. keep the accepted keys and values: 0 over each row's rejected columns, crop past the longest
        keep = width_u + max(kept)
        for i, n in enumerate(kept):
            new[i, width_u + n:] = 0
        crop(batch.cache, width_u + width_d - keep)
        batch.mask = torch.cat([mask[:, :mask.shape[1] - new.shape[1]], new[:, :keep]], 1)
        # 8. record the round, row by row (cache_len: the row's own cached tokens)
        at = time.perf_counter() - rows[0].started
        for row, length, (line, accepted, nxt, size, lost) in zip(rows, batch.mask.sum(-1).tolist(), records,
                                                                  strict=True):
            row.trace.append(Round(line, accepted, nxt, int(length), at, size, lost))
        # rows that finished leave the batch: their keys and values and their mask rows go
        still = [j for j, row in enumerate(rows) if not row.done]
        if len(still) < len(rows):
            index = torch.tensor(still, dtype=torch.long, device=device)
            if still:
                batch.cache.batch_select_indices(index)
            batch.mask = batch.mask[index]
            batch.live = [batch.live[j] for j in still]


def generate_batch(target, make_drafter, prompts, max_new_tokens, k: int | None = None,
                   do_sample: bool = False, temperature: float = 1.0, seed: int | None = None,
                   top_k: int | None = None, top_p: float | None = None, eos_token_id=None, rule="exact",
                   rollback: str = "row") -> list[Result]:
    """Speculative decoding of a batch of prompts (1-D token-id lists of any lengths), one drafter per row
    from make_drafter(): one Result per prompt, each as generate() would give it (greedy: token for token).
    One target pass per round verifies every live row's draft."""
    batch = start_batch(target, make_drafter, prompts, max_new_tokens, k, do_sample, temperature, seed, top_k,
                        top_p, eos_token_id, rule, rollback)
    while not batch.done:
        batch_round(target, batch)
    return batch.results()


def plain_batch(target, prompts, max_new_tokens, do_sample: bool = False, temperature: float = 1.0,
                seed: int | None = None, top_k: int | None = None, top_p: float | None = None,
                eos_token_id=None) -> list[Result]:
    """Plain batched decoding, the baseline every batched speedup divides by: generate_batch with a drafter
    that drafts nothing, so the padding, the sampler and the prefill are the speculative run's own."""
    return generate_batch(target, Drafter, prompts, max_new_tokens, None, do_sample, temperature, seed, top_k,
                          top_p, eos_token_id)
