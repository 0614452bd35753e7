"""How tokens are chosen, in torch: the Sampler (greedy, or temperature/top-k/top-p) that the engine and
the model drafters share, the token-wise acceptance rule of a chain draft with its residual (and the lossy
knobs of specnotes.lossy plugged into it), and block verification (accept_block).

The numpy twin of the rule, vectorised over many rounds for the toy, is specnotes.rules.
"""

from __future__ import annotations


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


def _draft_rows(drafted: list[int], q, p):
    """(x, q, rows) for a chain draft judged against p (k+1, V): the drafted ids, q on p's device and dtype
    (one-hot at the drafted tokens when the draft reported none), and the row index 0..k-1."""
    import torch

    x = torch.tensor(drafted, device=p.device)
    if q is None:  # deterministic draft: q is one-hot at the drafted token
        q = torch.nn.functional.one_hot(x, p.shape[-1]).to(p.dtype)
    q = q.to(device=p.device, dtype=p.dtype)  # a draft model may live elsewhere, or run in 16 bits
    return x, q, torch.arange(len(drafted), device=p.device)


def accept_greedy(logits, drafted: list[int]) -> tuple[int, int]:
    """(n accepted, next token): keep drafts while they equal the target's argmax."""
    best = logits.argmax(-1).tolist()  # the only host sync of the round
    n = 0
    while n < len(drafted) and drafted[n] == best[n]:
        n += 1
    return n, best[n]


def accept_sampled(logits, drafted: list[int], q, sampler: Sampler, knob=None) -> tuple[int, int]:
    """(n accepted, next token) by the rejection rule; q None means a point-mass draft.
    logits: (len(drafted) + 1, V), the target's rows after the last token and after each draft.
    knob: a lossy knob (specnotes.lossy) that replaces the accept probability and/or the residual."""

    k = len(drafted)
    p = sampler.probs(logits)  # (k+1, V)
    if k == 0:
        return 0, sampler.draw(p[0])
    x, q, rows = _draft_rows(drafted, q, p)
    p_x, q_x = p[rows, x], q[rows, x]
    # min(1, p/q); q(x) = 0 cannot happen for a token drawn from q, and p(x) = 0 always rejects
    ratio = p_x / q_x.clamp_min(1e-30)
    accept = sampler.uniform(k) < (ratio if knob is None else knob.acceptance(ratio))
    rejected = (~accept).nonzero()
    n = int(rejected[0, 0]) if len(rejected) else k
    if n == k:
        return n, sampler.draw(p[k])  # the bonus token, from the target's last row
    fix = None if knob is None else knob.residual(p[n], q[n])
    return n, sampler.draw(residual(p[n], q[n]) if fix is None else fix)


def accept_block(logits, drafted: list[int], q, sampler: Sampler,
                 longest: bool = True) -> tuple[int, int]:
    """(n accepted, next token) by block verification (Sun et al. 2025; the numpy twin and its
    derivation: specnotes.rules.verify_block). Same arguments as accept_sampled; q None: point masses.
    longest=False plants the mistake the tests must catch: stop at the first failing coin."""
    import torch

    k = len(drafted)
    p = sampler.probs(logits)  # (k+1, V)
    if k == 0:
        return 0, sampler.draw(p[0])
    x, q, rows = _draft_rows(drafted, q, p)
    # w_i = min(1, w_{i-1} p/q) as a walk in logs reflected at 0: S_i - max(0, S_1..S_i)
    s = torch.cumsum(torch.log(p[rows, x] / q[rows, x].clamp_min(1e-30)), 0)
    w = torch.exp(s - torch.cummax(s.clamp_min(0), 0).values)
    mass = torch.clamp(w[:-1, None] * p[1:k] - q[1:k], min=0).sum(-1)
    den = mass + 1 - w[:-1]
    h = torch.cat([torch.where(den > 0, mass / torch.where(den > 0, den, torch.ones_like(den)),
                               torch.zeros_like(den)), w[-1:]])
    passed = sampler.uniform(k) < h
    if longest:  # the longest prefix whose coin passed
        hits = passed.nonzero()
        n = int(hits[-1, 0]) + 1 if len(hits) else 0
    else:
        misses = (~passed).nonzero()
        n = int(misses[0, 0]) if len(misses) else k
    if n == k:
        return n, sampler.draw(p[k])
    weight = w[n - 1] if n else 1.0
    raw = torch.clamp(weight * p[n] - q[n], min=0)
    total = raw.sum()
    return n, sampler.draw(raw / total if total > 0 else p[n])
