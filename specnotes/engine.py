"""Speculative decoding on real transformers models: draft, verify k+1 positions in one pass, accept or
correct, roll the KV cache back. Notebook 02 traces it; 06 and 07 plug drafters into it and time it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Round:
    drafted: list[int]  # what the drafter proposed this round (cut at an EOS it contained)
    accepted: int  # how many of them the target kept (a prefix)
    next_token: int | None  # the target's own token: the correction, or the bonus when all were kept;
    #                         None when the round ended on an EOS among the accepted drafts
    cache_len: int  # target KV-cache length after the rollback
    at: float = 0.0  # seconds since generate() started when this round's tokens were ready

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
    target_calls: int  # target forward passes; the first one also reads the prompt
    trace: list[Round] = field(default_factory=list)
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


class Sampler:
    """How tokens are chosen: greedy, or sampling from the temperature/top-k/top-p processed
    distribution. Drafters use it too, so q is the distribution a draft was really drawn from."""

    def __init__(self, do_sample: bool = False, temperature: float = 1.0, top_k: int | None = None,
                 top_p: float | None = None, seed: int | None = None, device="cpu"):
        import torch

        from specnotes import checks

        checks.sampling(do_sample, temperature, top_k, top_p, seed)
        self.do_sample, self.temperature, self.top_k, self.top_p = do_sample, temperature, top_k, top_p
        self.generator = torch.Generator(device=device)
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(seed)

    def probs(self, logits):
        """(..., V) processed distribution; one-hot at the argmax when greedy."""
        import torch

        logits = logits.float()
        if not self.do_sample:
            return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
        logits = logits / self.temperature
        if self.top_k is not None and self.top_k < logits.shape[-1]:
            kth = torch.topk(logits, self.top_k, dim=-1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p is not None and self.top_p < 1:
            sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
            cum = torch.softmax(sorted_logits, -1).cumsum(-1)
            drop_sorted = cum - torch.softmax(sorted_logits, -1) >= self.top_p  # keep the token that crosses
            drop = drop_sorted.scatter(-1, order, drop_sorted)
            logits = logits.masked_fill(drop, float("-inf"))
        return torch.softmax(logits, -1)

    def draw(self, probs) -> int:
        import torch

        if not self.do_sample:
            return int(probs.argmax(-1))
        return int(torch.multinomial(probs, 1, generator=self.generator))

    def uniform(self, n: int):
        import torch

        return torch.rand(n, generator=self.generator, device=self.generator.device)


def residual(p, q):
    """max(0, p - q) renormalized (rows); where it is empty, p (never sampled then: acceptance was certain).
    The torch twin of specnotes.rules.residual."""
    import torch

    r = torch.clamp(p - q, min=0)
    mass = r.sum(-1, keepdim=True)
    return torch.where(mass > 0, r / torch.where(mass > 0, mass, torch.ones_like(mass)), p)


def verify_greedy(logits, drafted: list[int]) -> tuple[int, int]:
    """(n accepted, next token): keep drafts while they equal the target's argmax."""
    best = logits.argmax(-1).tolist()  # the only host sync of the round
    n = 0
    while n < len(drafted) and drafted[n] == best[n]:
        n += 1
    return n, best[n]


def verify_sampling(logits, drafted: list[int], q, sampler: Sampler) -> tuple[int, int]:
    """(n accepted, next token) by the rejection rule; q None means a point-mass draft."""
    import torch

    k = len(drafted)
    p = sampler.probs(logits)  # (k+1, V)
    if k == 0:
        return 0, sampler.draw(p[0])
    x = torch.tensor(drafted, device=p.device)
    if q is None:  # deterministic draft: q is one-hot at the drafted token
        q = torch.nn.functional.one_hot(x, p.shape[-1]).to(p.dtype)
    q = q.to(device=p.device, dtype=p.dtype)  # a draft model may live elsewhere, or run in 16 bits
    rows = torch.arange(k, device=p.device)
    p_x, q_x = p[rows, x], q[rows, x]
    # min(1, p/q); q(x) = 0 cannot happen for a token drawn from q, and p(x) = 0 always rejects
    accept = sampler.uniform(k) < p_x / q_x.clamp_min(1e-30)
    rejected = (~accept).nonzero()
    n = int(rejected[0, 0]) if len(rejected) else k
    if n == k:
        return n, sampler.draw(p[k])  # the bonus token, from the target's last row
    return n, sampler.draw(residual(p[n], q[n]))


def verify_pass(target, cache, last_token: int, drafted: list[int], uncached: list[int] = ()):
    """The single target pass of a round: [last token, drafts] on top of the cache, which holds every
    earlier token. Returns ((1, len(drafted)+1, V) logits, the cache now holding them all).

    The first round also carries the prompt (`uncached`: every prompt token but the last), so the
    prompt pass verifies the first draft too, as transformers' assisted generation does."""
    import torch

    from specnotes.decode import forward_pass
    from specnotes.env import device_of

    ids = torch.tensor([[*uncached, last_token, *drafted]], device=device_of(target))
    return forward_pass(target, ids, cache, keep=len(drafted) + 1)


def rollback(cache, n_drafted: int, n_accepted: int) -> None:
    """Drop the keys and values of the rejected drafts (transformers 5.x: crop(-n) removes n)."""
    if n_drafted > n_accepted:
        cache.crop(n_accepted - n_drafted)


def _eos_set(target, eos_token_id):
    """The set of stop tokens: eos_token_id (an id or a list of them, as Hugging Face configs hold), else
    the model's generation config. -1 (or []) means never stop; any other id must be in the vocabulary."""
    from specnotes import checks

    if eos_token_id is None:
        eos_token_id = getattr(getattr(target, "generation_config", None), "eos_token_id", None)
    return checks.stop_tokens(eos_token_id, target.config.vocab_size)


def generate(target, drafter, input_ids, max_new_tokens: int, k: int = 5, do_sample: bool = False,
             temperature: float = 1.0, seed: int | None = None, top_k: int | None = None,
             top_p: float | None = None, eos_token_id=None) -> Result:
    """Speculative decoding of one prompt. input_ids is (1, T); returns new tokens, calls and a trace.

    k is the draft length for drafters that pay per drafted token (a draft model); drafters whose
    guesses are free, such as PromptLookup, choose their own length.

    Greedy output equals the target's own greedy output; sampled output has the target's distribution
    (after the same temperature/top-k/top-p processing)."""
    import time

    import torch

    from specnotes import checks
    from specnotes.drafters import Draft
    from specnotes.env import device_of

    start = time.perf_counter()
    vocab = target.config.vocab_size
    seq = checks.prompt_ids(input_ids, vocab)
    max_new_tokens = checks.whole(max_new_tokens, "max_new_tokens", scalar=True)
    k = checks.whole(k, "k (drafted tokens per round)", scalar=True)
    who = type(drafter).__name__
    if isinstance(drafter, type) or not all(callable(getattr(drafter, m, None))
                                            for m in ("reset", "propose", "update")):
        raise TypeError("drafter must be a drafter object with reset, propose and update (an instance such "
                        f"as PromptLookup(), not the class), got {drafter!r}")
    if getattr(drafter, "tree", False):
        raise TypeError(f"{who} drafts trees: run it with specnotes.tree.generate, not engine.generate")
    draft_model = getattr(drafter, "model", None)
    if draft_model is not None and draft_model.config.vocab_size != target.config.vocab_size:
        raise ValueError(f"the draft model's vocabulary ({draft_model.config.vocab_size} tokens) differs "
                         f"from the target's ({target.config.vocab_size}); drafts must use the target's "
                         "tokenizer")
    device = device_of(target)  # every tensor of the round goes to the target's device
    sampler = Sampler(do_sample, temperature, top_k, top_p, seed, device=device)
    eos = _eos_set(target, eos_token_id)
    observe = getattr(drafter, "observe", None)  # drafters that learn from the target's predictions
    drafter.reset(list(seq))
    new: list[int] = []
    trace: list[Round] = []
    calls = 0
    stopped = False
    with torch.inference_mode():
        # the cache holds every token but the last, which opens each round's pass; before the first
        # round it is empty and the first pass carries the prompt too
        cache, uncached = None, seq[:-1]
        while len(new) < max_new_tokens:
            room = max_new_tokens - len(new) - 1  # the round's own token always comes on top
            draft = drafter.propose(list(seq), min(k, room), sampler) if room else Draft([], None)
            if not isinstance(draft, Draft):
                raise TypeError(f"{who}.propose returned {type(draft).__name__}, not a Draft(tokens, q)")
            # nothing a drafter says is trusted: its ids must be tokens, and (when sampling) its q must be
            # the distribution it drew them from, or the rejection rule below silently stops being exact
            drafted = checks.token_ids(draft.tokens, f"the tokens {who} drafted", vocab, empty=True)
            if do_sample and draft.q is not None:
                checks.draft_q(draft.q, drafted, vocab, who)
            drafted = drafted[:room]
            q = draft.q[: len(drafted)] if draft.q is not None else None
            logits, cache = verify_pass(target, cache, seq[-1], drafted, uncached)
            uncached = []
            calls += 1
            if observe is not None:
                observe(list(seq), [seq[-1], *drafted], logits[0].argmax(-1).tolist())
            if do_sample:
                n, nxt = verify_sampling(logits[0], drafted, q, sampler)
            else:
                n, nxt = verify_greedy(logits[0], drafted)
            rollback(cache, len(drafted), n)
            emitted = [*drafted[:n], nxt]  # never more than the room left: drafts were cut to fit
            cut = next((i for i, t in enumerate(emitted) if t in eos), None)
            if cut is not None:
                stopped = True
                if cut < n:  # an accepted draft was the EOS: nothing after it counts
                    rollback(cache, n, cut)
                    emitted, drafted, n, nxt = emitted[: cut + 1], drafted[: cut + 1], cut + 1, None
            seq += emitted
            new += emitted
            drafter.update(list(seq), n)
            trace.append(Round(drafted, n, nxt, cache.get_seq_length(), time.perf_counter() - start))
            if stopped:
                break
    return Result(new, calls, trace, stopped)


def exact_first_tokens(model, prompt, length: int, temperature: float = 1.0, top_k: int | None = None):
    """(V**length,) the exact probability of each possible first `length` sampled tokens, in
    lexicographic order, under plain sampling from the processed distribution: the reference that the
    calibrated χ² tests compare speculative samples against (specnotes.toy.compare). Tiny vocabularies
    only: it runs V**(length-1) prefixes."""
    import torch

    from specnotes import checks
    from specnotes.env import device_of, host

    checks.prompt_ids(prompt, model.config.vocab_size, "prompt")
    length = checks.whole(length, "length", scalar=True)
    if model.config.vocab_size ** length > 10_000_000:
        raise ValueError(f"length: V**length = {model.config.vocab_size}**{length} outcomes is too many to "
                         "enumerate; this reference is for tiny vocabularies and a few tokens")
    device = device_of(model)
    processing = Sampler(do_sample=True, temperature=temperature, top_k=top_k, seed=0, device=device)
    dist = np.ones(1)
    prefixes = [[]]
    for _ in range(length):
        batch = torch.tensor([prompt[0].tolist() + p for p in prefixes], device=device)
        with torch.no_grad():
            probs = host(processing.probs(model(batch).logits[:, -1].double())).double().numpy()
            probs /= probs.sum(axis=1, keepdims=True)
        dist = (dist[:, None] * probs).reshape(-1)
        prefixes = [p + [v] for p in prefixes for v in range(probs.shape[1])]
    return dist
