"""Synthetic acceptance against the formula (notebook 05): vLLM and llama.cpp ship a benchmarking mode
that keeps each draft position at a set rate whatever p and q say. Run with lossy.Synthetic(rates), the
toy and the engine must then deliver notebook 05's tokens per pass, 1 + a1 + a1 a2 + ... for those rates
(theory.expected_tokens_positional): the formula, checked against an engine knob.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specnotes import checks, engine, lossy, theory, toy
from specnotes.drafters.base import Draft, Drafter


class Echo(Drafter):
    """Always drafts k copies of the last token (k None: 4): a drafter that costs nothing and always
    proposes the full length, for runs where acceptance is set by a knob, not by the guesses."""

    def propose(self, tokens, k, sampler):
        return Draft([tokens[-1]] * (4 if k is None else k))


@dataclass(frozen=True)
class Check:
    rates: tuple  # the set acceptance rate of each draft position
    k: int
    measured: float  # tokens per pass over rounds that drafted all k positions
    rounds: int  # how many such rounds
    formula: float  # theory.expected_tokens_positional(rates[:k])

    @property
    def error(self) -> float:
        """measured / formula - 1."""
        return self.measured / self.formula - 1


def _formula(knob: lossy.Synthetic, k: int) -> float:
    return float(theory.expected_tokens_positional(knob.rates(k)))


def on_toy(rates, k: int, n: int = 20_000, length: int = 64, seed: int = 0) -> Check:
    """Tokens per pass of the toy with every position kept at its set rate (toy.sample_speculative)."""
    knob = lossy.Synthetic(rates)
    k = checks.whole(k, "k", scalar=True)
    P, Q = toy.seed_pair()
    _, st = toy.sample_speculative(P, Q, n, length, k, np.random.default_rng(seed), rule=knob.toy_round)
    return Check(tuple(knob.rates(k)), k, st.tokens_per_call, st.rounds, _formula(knob, k))


def on_engine(target, prompts: list, rates, k: int, max_new_tokens: int = 64, seed: int = 0) -> Check:
    """Tokens per pass of the engine's batched generation (one row per prompt, Echo drafting k every
    round) under rule=lossy.Synthetic(rates), sampled at temperature 1. Rounds cut short by
    max_new_tokens are left out: the formula is for rounds that drafted all k."""
    knob = lossy.Synthetic(rates)
    k = checks.whole(k, "k", scalar=True)
    results = engine.generate_batch(target, Echo, prompts, max_new_tokens, k=k, do_sample=True, seed=seed,
                                    eos_token_id=-1, rule=knob)
    full = [r.accepted + 1 for res in results for r in res.trace if r.size == k]
    if not full:
        raise ValueError("no round drafted all k tokens: raise max_new_tokens above k + 1")
    return Check(tuple(knob.rates(k)), k, float(np.mean(full)), len(full), _formula(knob, k))
