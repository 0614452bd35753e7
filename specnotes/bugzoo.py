"""The bug zoo: sampling mistakes (most seen in public projects) as one-change variants of the exact round,
every rule the toy runs by name (its own, block verification's and the zoo's), and the checks that run them.

Notebook 04 runs every one through the same checks as the exact rule and shows each one caught; 03 runs
the exact rules through them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from specnotes import block, checks, lossy, rules, stats, toy
from specnotes.toy import Table, exact_distribution, exact_round, rejection_round, target_residual_round


@dataclass(frozen=True)
class Bug:
    name: str
    what: str  # the mistake, in one sentence
    seen_in: str  # where something like it shipped or was reported
    check: str  # what catches it: "distribution" (chi-square against the exact answer), "invariant" (the
    #             round's bookkeeping), "acceptance" (kept drafts against the formula) or "zero-draw"
    #             (the accept test at u = 0 exactly)
    round: Callable  # (P, Q, prev, k, rng) -> (block, n_emit, n_acc), like toy.exact_round
    claims: str = "exact"  # the rule the code says it runs ("exact": token-wise; "block"): the acceptance
    #                        check holds it to that rule's formula


# Each bug is the exact round with one piece swapped; read them side by side with toy.rejection_round.


def _reseed_round(P, Q, prev, k, rng):
    # torch.manual_seed(seed) inside the acceptance loop: the same uniform at every position and round
    same = np.random.default_rng(1234).random()
    return rejection_round(P, Q, prev, k, rng, u_accept=lambda u: np.full((len(u), k), same))


def _argmax_draft_round(P, Q, prev, k, rng):
    # the draft takes its argmax, but the verifier is still handed the full softmax as q
    greedy = Q.argmax(axis=1)
    return rejection_round(P, Q, prev, k, rng, pick=lambda ctx, u: greedy[ctx])


def _shared_stream_round(P, Q, prev, k, rng):
    # the verifier reuses the uniforms that the draft consumed to sample its tokens
    return rejection_round(P, Q, prev, k, rng, u_accept=lambda u: u[:, :k])


LENIENCE = 0.5


def _lenience_round(P, Q, prev, k, rng):
    # accept with min(1, p / (lenience * q)) and take the residual against lenience * q
    lenient_q = LENIENCE * Q
    return rejection_round(P, Q, prev, k, rng, accept=rules.acceptance_probability(P, lenient_q),
                           fix=rules.residual(P, lenient_q))


def _typical_round(P, Q, prev, k, rng, epsilon=0.09, delta=0.3):
    # keep any draft the target finds "typical enough"; q is never consulted; replace from p
    entropy = -(P * np.log(np.clip(P, 1e-300, None))).sum(axis=1, keepdims=True)
    typical = (P > np.minimum(epsilon, delta * np.exp(-entropy))).astype(float)
    return rejection_round(P, Q, prev, k, rng, accept=typical, fix=P)


def _knob_round(name):
    # one of specnotes.lossy's knobs, at its default setting: its accept table and its residual rows
    def one_round(P, Q, prev, k, rng):
        accept, fix = lossy.toy_tables(name, P, Q)
        return rejection_round(P, Q, prev, k, rng, accept=accept, fix=fix)

    one_round.__name__ = f"_{name.replace('-', '_')}_round"
    return one_round


def _no_bonus_round(P, Q, prev, k, rng):
    # when every draft passes, drop the free token the target pass already computed
    block, n_emit, n_acc = exact_round(P, Q, prev, k, rng)
    return block, np.where(n_acc == k, k, n_emit), n_acc


def _unnormalized_residual_round(P, Q, prev, k, rng):
    # sample max(0, p - q) without dividing by its mass: leftover u falls on the last token
    raw = np.maximum(P - Q, 0.0)
    return rejection_round(P, Q, prev, k, rng, fix=Table(np.concatenate([raw, P]), normalized=False))


def _accept_on_equal_round(P, Q, prev, k, rng):
    # the accept test written u <= p/q instead of u < p/q; for floats, u <= a is u < (the next float above a)
    return rejection_round(P, Q, prev, k, rng, accept=np.nextafter(rules.acceptance_probability(P, Q), 2.0))


def _missing_q_round(P, Q, prev, k, rng):
    # the drafts are sampled from q, but no q reaches the verifier: each is judged as a point mass
    # (accept with p(x); after a rejection draw from p with x removed). Still exact; fewer drafts kept
    m = len(prev)
    u = rng.random((m, 2 * k + 1))
    drafted, ctx = toy.draft(Q, prev, k, u[:, :k])
    n_acc = toy.scan(P, ctx, drafted, u[:, k:2 * k])
    rows = np.arange(m)
    at, x = ctx[rows, n_acc], drafted[rows, np.minimum(n_acc, k - 1)]
    p = P[at].copy()
    rejected = n_acc < k
    p[rows[rejected], x[rejected]] = 0.0  # p without the rejected point mass, renormalized below
    nxt = Table(p / p.sum(axis=1, keepdims=True)).sample(rows, u[:, 2 * k])
    return (*toy.assemble(drafted, n_acc, nxt), n_acc)


def _block_as_tokenwise_round(P, Q, prev, k, rng):
    # "block verification" that applies the token-wise accept test and the token-wise residual: the
    # token-wise rule under block's name. Still exact; it keeps fewer drafts than block verification
    return exact_round(P, Q, prev, k, rng)


def _argmax_verify_round(P, Q, prev, k, rng):
    # the verifier takes the target's argmax on some backends, whatever the temperature
    return exact_round(block.argmax_table(P), Q, prev, k, rng)


ZOO: tuple[Bug, ...] = (
    Bug("reseed-per-position",
        "The RNG is reseeded with a fixed seed inside the acceptance loop, so every accept test "
        "uses the same uniform number.",
        "feifeibear/LLMSpeculativeSampling (torch.manual_seed inside the loop when random_seed is set)",
        "distribution", _reseed_round),
    Bug("argmax-draft-softmax-q",
        "Drafts are the draft model's argmax, but the accept test divides by its full softmax q: "
        "q is not the distribution the draft was sampled from.",
        "romsto/Speculative-Decoding (GreedyProcessor); transformers #32867 and #47932",
        "distribution", _argmax_draft_round),
    Bug("shared-random-stream",
        "The verifier's accept uniforms are the same numbers the draft used to sample its tokens.",
        "an RNG-coupling bug of the kind vLLM fixed in PR #54282, where (in an opt-in probabilistic "
        "draft path) the recovery draw reused the draft's noise; our toy couples the accept test instead",
        "distribution", _shared_stream_round),
    Bug("lenience",
        f"q is scaled by a lenience factor ({LENIENCE}) before the accept test: a deliberate, lossy "
        "trade of exactness for acceptance.",
        "lucidrains/speculative-decoding (lenience != 1)",
        "distribution", _lenience_round),
    Bug("typical-acceptance",
        "A draft is kept when p(x) exceeds min(0.09, 0.3 exp(-H(p))); q is never consulted. "
        "A deliberate, lossy trade of exactness for acceptance, not an accident.",
        "Medusa's typical acceptance (medusa_generate: posterior_threshold=0.09, posterior_alpha=0.3); "
        "vLLM #8639",
        "distribution", _typical_round),
    Bug("threshold",
        f"A draft is kept outright when p(x)/q(x) >= {lossy.KNOBS['threshold'].tau}, not only by the coin "
        "min(1, p/q): a deliberate, lossy trade of exactness for acceptance.",
        "SGLang's --speculative-accept-threshold-single / -acc (1.0 by default, exact; lower values accept "
        "more): a knob of the same kind, not the same formula",
        "distribution", _knob_round("threshold")),
    Bug("synthetic",
        f"Every draft is kept with probability {lossy.KNOBS['synthetic'].rate}, whatever p and q say: a "
        "stand-in acceptance for load tests, never for real text.",
        "vLLM's rejection_sample_method='synthetic' (a set acceptance rate, for performance testing)",
        "distribution", _knob_round("synthetic")),
    Bug("top-k-residual",
        f"After a rejection, p and q are cut to their top {lossy.KNOBS['top-k-residual'].top} entries "
        "before max(0, p - q): what p puts outside its top entries never comes back.",
        "no shipped instance found: a plausible shortcut for a fused kernel that keeps only top candidates",
        "distribution", _knob_round("top-k-residual")),
    Bug("missing-bonus-token",
        "When all k drafts pass, the round drops the extra token the target pass already computed. "
        "The text is still exact; the speed is not.",
        "no specific project: an easy off-by-one in a hand-written loop (vLLM samples the bonus token "
        "outside its rejection sampler, a separate step that is easy to forget)",
        "invariant", _no_bonus_round),
    Bug("unnormalized-residual",
        "The residual max(0, p - q) is sampled without dividing by its mass, so the leftover "
        "probability falls on the last token.",
        "no specific project: torch.multinomial renormalizes silently, so the slip only bites a "
        "hand-written sampler that assumes its input sums to 1",
        "distribution", _unnormalized_residual_round),
    Bug("target-residual",
        "After a rejection the replacement is sampled from p itself instead of the residual, "
        "giving over-proposed tokens a second chance.",
        "the seed article's 'naive' fallback; romsto's skip_sample_adjustment",
        "distribution", target_residual_round),
    Bug("accept-on-equal",
        "The accept test is written u <= p/q, not u < p/q: a draft the target gives probability 0 passes "
        "when the uniform is exactly 0, which torch.rand can return.",
        "sgl-project/sglang#35771 (2026-08; the target-only sampler's coin <= prob), fixed in #35788",
        "zero-draw", _accept_on_equal_round),
    Bug("missing-draft-probs",
        "The drafts are sampled from q, but q never reaches the verifier, so each is judged as a point "
        "mass. The text is still exact; acceptance falls from sum min(p, q) to sum p q.",
        "vllm-project/vllm#40149 (2026-04; the draft-model path passed draft_probs=None, so "
        "'probabilistic' verification fell back to the one-hot rule), fixed in #40269",
        "acceptance", _missing_q_round),
    Bug("block-as-tokenwise",
        "Block verification implemented with the token-wise accept test and residual: the token-wise "
        "rule under block's name. The text is still exact; it keeps fewer drafts than block verification.",
        "vllm-project/vllm-ascend#7807 (2026; a first NPU block-verification implementation), fixed in #7808",
        "acceptance", _block_as_tokenwise_round, claims="block"),
    Bug("argmax-verify",
        "The verifier takes the target's argmax on some backends, whatever the temperature: sampled "
        "requests silently get greedy verification.",
        "sgl-project/sglang#39253 and #37134 (2026-09; EAGLE verification used argmax whenever the backend "
        "was CPU, NPU, HIP or XPU)",
        "distribution", _argmax_verify_round),
)


def round_function(rule) -> Callable:
    """The round function for a rule name (the toy's own, block verification's, or any bug-zoo name) or a
    callable."""
    if callable(rule):
        return rule
    table = {**toy.ROUNDS, "block": block.toy_round, block.PLANTED: block.planted_round,
             **{b.name: b.round for b in ZOO}}
    if rule not in table:
        raise ValueError(f"unknown rule {rule!r}; choose one of: {', '.join(table)}")
    return table[rule]


def sample_speculative(P, Q, n: int, length: int, k: int, rng, rule="exact"):
    """toy.sample_speculative with any rule round_function names: (samples (n, length) int array,
    SpecStats)."""
    return toy.sample_speculative(P, Q, n, length, k, rng, rule=round_function(rule))


@dataclass(frozen=True)
class Verdict:
    rule: str
    check: str
    tv: float
    p_value: float
    invariant_ok: bool
    flagged: bool
    detail: str = ""  # what the named check saw, when it is not the chi-square test


class ZeroDraws:
    """A stand-in generator whose every uniform is exactly 0: the one draw a measure-zero bug needs."""

    def random(self, shape):
        return np.zeros(shape)


def zero_draw(rule, k: int = 3, m: int = 8) -> bool:
    """Does the rule emit a token the target gives probability 0 when every uniform is exactly 0? On a
    pair built for it: q's first token is the target's impossible one, so with u = 0 every draft is that
    token. Sampling never finds this (torch.rand returns 0 about once in 2**24 draws, and only matters
    at such a token); drawing u = 0 on purpose does."""
    P = np.tile([0.0, 0.5, 0.3, 0.2], (4, 1))
    Q = np.tile([0.4, 0.2, 0.2, 0.2], (4, 1))
    prev = np.full(m, 1)
    emitted, n_emit, _ = round_function(rule)(P, Q, prev, checks.whole(k, "k", scalar=True), ZeroDraws())
    ctx = np.concatenate([prev[:, None], emitted[:, :-1]], axis=1)
    counted = np.arange(emitted.shape[1]) < n_emit[:, None]
    return bool((P[ctx, emitted] == 0)[counted].any())


@dataclass(frozen=True)
class AcceptanceCheck:
    measured: float  # mean drafts kept per round
    expected: float  # the formula's (block.expected_accepted) for the rule the code claims
    p_value: float  # two-sided z-test of the mean against the formula

    @property
    def flagged(self) -> bool:
        return self.p_value < stats.FLAG_P


def acceptance_check(rule, P, Q, k: int, rounds: int, seed: int, claims: str = "exact") -> AcceptanceCheck:
    """Drafts kept per round, measured on `rounds` rounds whose contexts are drawn from the target's
    long-run token frequencies, against the exact expectation for the rule the code claims (token-wise
    "exact" or "block"). A lossless bug that only loses acceptance passes every distribution test and
    fails this one, as the zoo's speed-only bugs do."""
    rounds, k = checks.whole(rounds, "rounds", low=2, scalar=True), checks.whole(k, "k", scalar=True)
    if claims not in block.RULES:
        raise ValueError(f"claims must be one of {block.RULES} (the rule whose formula applies), got "
                         f"{claims!r}")
    rng = np.random.default_rng(checks.whole(seed, "seed", low=0, scalar=True))
    weights = toy.stationary(P)
    prev = rng.choice(len(weights), size=rounds, p=weights)
    kept = round_function(rule)(P, Q, prev, k, rng)[2]
    expected = block.expected_accepted(P, Q, k, rule=claims, context=weights)
    se = kept.std(ddof=1) / np.sqrt(rounds)
    z = (kept.mean() - expected) / se if se > 0 else (0.0 if kept.mean() == expected else np.inf)
    return AcceptanceCheck(float(kept.mean()), expected, float(2 * norm.sf(abs(z))))


def audit(rule, P, Q, n: int, length: int, k: int, seed: int, check: str = "distribution",
          claims: str = "exact") -> Verdict:
    """Run a rule through the checks: chi-square against the exact answer (stats.chi2_test, flagged below
    stats.FLAG_P), the round invariant (every round emits accepted + 1 tokens), and, when `check` names
    it, the acceptance check (n rounds against the formula of the rule the code claims) or the zero-draw
    check. Flagged when any fails."""
    if check not in CHECKS:
        raise ValueError(f"check must be one of {CHECKS} (what catches the bug), got {check!r}")
    rng = np.random.default_rng(checks.whole(seed, "seed", low=0, scalar=True))
    samples, st = sample_speculative(P, Q, n, length, k, rng, rule=rule)
    test = stats.chi2_test(samples, exact_distribution(P, length))
    invariant_ok = st.emitted == st.accepted + st.rounds
    name = rule if isinstance(rule, str) else getattr(rule, "__name__", "custom")
    named, detail = False, ""
    if check == "acceptance":
        kept = acceptance_check(rule, P, Q, k, n, seed, claims)
        named, detail = kept.flagged, (f"kept {kept.measured:.3f} drafts per round, {claims} rule's formula "
                                       f"{kept.expected:.3f} (p = {kept.p_value:.2g})")
    elif check == "zero-draw":
        named = zero_draw(rule, k)
        detail = f"at u = 0: {'a token of probability 0 emitted' if named else 'nothing impossible emitted'}"
    flagged = test.flagged or not invariant_ok or named
    return Verdict(name, check, test.tv, test.p_value, invariant_ok, flagged, detail)


CHECKS = ("distribution", "invariant", "acceptance", "zero-draw")


def convergence(P, Q, ns, length: int, k: int, samplers=("target", "exact", "target-residual"), seed=0):
    """{sampler: (len(ns), 2) array of (tv, p_value)} for each sample size on the toy language (P, Q),
    sampled afresh per N: the target itself, or sample_speculative with any rule name the zoo knows."""
    ns = [int(n) for n in np.atleast_1d(checks.whole(list(np.atleast_1d(ns)), "ns"))]
    if isinstance(samplers, str) or not samplers:
        raise TypeError(f"samplers must be a list of rule names such as ('target', 'exact'), got "
                        f"{samplers!r}")
    seed = checks.whole(seed, "seed", low=0, scalar=True)
    exact = toy.exact_distribution(P, length)
    out = {}
    for name in samplers:
        rows = []
        for n in ns:
            rng = np.random.default_rng([seed, int(n)])
            if name == "target":
                samples = toy.sample_target(P, int(n), length, rng)
            else:
                samples = sample_speculative(P, Q, int(n), length, k, rng, rule=name)[0]
            rows.append(stats.chi2_test(samples, exact))
        out[name] = np.array(rows)
    return out
