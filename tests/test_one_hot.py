"""One-hot drafts: a drafter's guesses verified as point masses (q dropped, or greedy drafting), as engines
that pass no draft probabilities do. Exact still, with lower acceptance when the target samples; the toy
gives the exact figures."""

import numpy as np
import pytest

from specnotes import block, engine, stats, theory, toy
from specnotes.drafters import Draft, DraftModel, OneHot, PromptLookup
from specnotes.sampling import Sampler

PAIR = toy.seed_pair()


def test_at_k_1_one_hot_acceptance_is_p_of_the_guess_and_probabilistic_is_the_overlap():
    pi = toy.stationary(PAIR.P)
    P, Q = PAIR
    probabilistic = block.expected_accepted(P, Q, 1, "exact")
    sampled_one_hot = block.expected_accepted(P, Q, 1, "exact", one_hot=True)
    greedy = block.expected_accepted(P, block.argmax_table(Q), 1, "exact", one_hot=True)
    assert probabilistic == pytest.approx(pi @ theory.acceptance_rate(P, Q))
    assert sampled_one_hot == pytest.approx(pi @ theory.match_acceptance_rate(P, Q))
    assert greedy == pytest.approx(pi @ P[np.arange(4), Q.argmax(axis=1)])
    assert probabilistic > sampled_one_hot  # min(p, q) >= p q, strictly somewhere


@pytest.mark.parametrize("rule", block.RULES)
def test_one_hot_drafts_keep_fewer_tokens_for_every_k(rule):
    for k in (1, 3, 6):
        full = block.expected_accepted(*PAIR, k, rule)
        assert block.expected_accepted(*PAIR, k, rule, one_hot=True) < full


def test_sampled_one_hot_is_sample_and_match_on_the_toy():
    """Drafting from q and verifying a point mass keeps x with p(x), else draws p without x: that is the
    toy's sample-and-match rule, exact, which the calibrated test passes."""
    verdict_rows = [stats.chi2_test(toy.sample_speculative(*PAIR, 20_000, 4, 3, np.random.default_rng(s),
                                                           rule="match")[0],
                                    toy.exact_distribution(PAIR.P, 4)).p_value for s in range(5)]
    assert min(verdict_rows) > stats.FLAG_P


def test_one_hot_drops_q_and_greedy_drafts_the_argmax(tiny):
    sampler = Sampler(do_sample=True, seed=0)
    inner = DraftModel(tiny.small_draft)
    inner.reset(tiny.small_prompt[0].tolist())
    sampled = inner.propose(tiny.small_prompt[0].tolist(), 3, sampler)
    assert sampled.q is not None
    for greedy in (True, False):
        d = OneHot(DraftModel(tiny.small_draft), greedy=greedy)
        d.reset(tiny.small_prompt[0].tolist())
        draft = d.propose(tiny.small_prompt[0].tolist(), 3, sampler)
        assert isinstance(draft, Draft) and draft.q is None and len(draft.tokens) == 3
    greedy_inner = DraftModel(tiny.small_draft)
    greedy_inner.reset(tiny.small_prompt[0].tolist())
    argmax = greedy_inner.propose(tiny.small_prompt[0].tolist(), 3, Sampler(do_sample=False)).tokens
    d = OneHot(DraftModel(tiny.small_draft))
    d.reset(tiny.small_prompt[0].tolist())
    assert d.propose(tiny.small_prompt[0].tolist(), 3, sampler).tokens == argmax


def test_greedy_one_hot_drafts_keep_the_targets_distribution(tiny):
    rows = tiny.sampled(lambda: OneHot(DraftModel(tiny.small_draft)), seed0=80_000, n=500)
    assert stats.chi2_test(rows, tiny.exact).p_value > stats.FLAG_P


def test_one_hot_refuses_what_is_not_a_drafter():
    with pytest.raises(TypeError, match="wraps a drafter"):
        OneHot(PromptLookup)
    with pytest.raises(TypeError, match="greedy"):
        OneHot(PromptLookup(), greedy="yes")


def test_eagle_lite_sampled_reports_q_only_when_sampling(tiny):
    from tests.conftest import make_drafter

    d = make_drafter("eagle-lite, sampled", tiny.target)
    res = engine.generate(tiny.target, d, tiny.prompt, 12, k=3, do_sample=True, seed=0, eos_token_id=-1)
    assert len(res.tokens) == 12 and sum(len(r.drafted) for r in res.trace) > 0
    assert engine.generate(tiny.target, make_drafter("eagle-lite, sampled", tiny.target), tiny.prompt, 12,
                           k=3, eos_token_id=-1).tokens == tiny.greedy(tiny.target, tiny.prompt, 12)
