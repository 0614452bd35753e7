"""Every planted bug is caught by the same checks that pass the exact rule (the checks can fail)."""

import numpy as np
import pytest

from specnotes import bugzoo, stats, toy

P, Q = toy.seed_pair()
N = 100_000  # power: the weakest distribution bug below is ~0.1 TV away; see the noncentrality test


def test_the_zoo_holds_at_least_six_documented_bugs():
    assert len(bugzoo.ZOO) >= 6
    for bug in bugzoo.ZOO:
        assert bug.what and bug.seen_in and bug.check in bugzoo.CHECKS


@pytest.mark.parametrize("bug", bugzoo.ZOO, ids=lambda b: b.name)
def test_every_bug_is_flagged(bug):
    verdict = bugzoo.audit(bug.name, P, Q, N, 4, 3, seed=11, check=bug.check, claims=bug.claims)
    assert verdict.flagged
    if bug.check == "distribution":
        assert verdict.p_value < stats.FLAG_P
    elif bug.check == "invariant":
        assert not verdict.invariant_ok
    else:  # a lossless bug or a measure-zero one: the distribution test cannot see it, the named check does
        assert verdict.p_value > stats.FLAG_P and verdict.invariant_ok


# --------------------------------------------------------------------------- the 2026 entries' own checks

ROUNDS = 100_000
NEW = {b.name: b for b in bugzoo.ZOO if b.check in ("acceptance", "zero-draw")}


@pytest.mark.parametrize("name", [n for n, b in NEW.items() if b.check == "acceptance"])
def test_a_speed_only_bug_is_flagged_by_acceptance_in_30_of_30_seeds(name):
    bug = NEW[name]
    verdicts = [bugzoo.acceptance_check(name, P, Q, 3, ROUNDS, seed=s, claims=bug.claims) for s in range(30)]
    assert all(v.flagged and v.measured < v.expected for v in verdicts)


@pytest.mark.parametrize("rule, claims", [("exact", "exact"), ("block", "block")])
def test_the_exact_rules_meet_their_own_acceptance_formula_in_30_of_30_seeds(rule, claims):
    verdicts = [bugzoo.acceptance_check(rule, P, Q, 3, ROUNDS, seed=s, claims=claims) for s in range(30)]
    assert not any(v.flagged for v in verdicts)
    assert abs(verdicts[0].measured - verdicts[0].expected) < 0.02


def test_the_missing_draft_probs_rule_keeps_sum_p_q_not_sum_min_p_q():
    """One line of algebra: a draft x ~ q judged as a point mass is kept with probability p(x), so the first
    position keeps sum_x q(x) p(x) drafts, where the rule with q keeps sum_x min(p(x), q(x))."""
    k1 = bugzoo.acceptance_check("missing-draft-probs", P, Q, 1, ROUNDS, seed=0)
    weights = toy.stationary(P)
    assert abs(k1.measured - weights @ (P * Q).sum(1)) < 0.01
    assert weights @ (P * Q).sum(1) < weights @ np.minimum(P, Q).sum(1)


def test_accept_on_equal_is_invisible_to_sampling_and_caught_at_u_zero():
    assert bugzoo.zero_draw("accept-on-equal") and not bugzoo.zero_draw("exact")
    assert not bugzoo.zero_draw("block")
    for seed in range(30):  # a sampled run never draws u = 0: the chi-square test passes it
        assert not stats.chi2_test(bugzoo.sample_speculative(P, Q, 20_000, 4, 3, np.random.default_rng(seed),
                                                             rule="accept-on-equal")[0],
                                   toy.exact_distribution(P, 4)).flagged


def test_argmax_verify_is_flagged_by_the_distribution_test_in_30_of_30_seeds():
    exact = toy.exact_distribution(P, 4)
    for seed in range(30):
        rng = np.random.default_rng(seed)
        samples = bugzoo.sample_speculative(P, Q, 2_000, 4, 3, rng, rule="argmax-verify")[0]
        assert stats.chi2_test(samples, exact).flagged


def test_the_exact_rule_is_never_flagged_across_30_seeds():
    verdicts = [bugzoo.audit("exact", P, Q, N, 4, 3, seed=s) for s in range(30)]
    assert not any(v.flagged for v in verdicts)


def test_sample_size_gives_the_weakest_bug_overwhelming_power():
    """Noncentrality of the chi-square test for target-residual at N, from the exact enumeration:
    lambda = N * sum((b - p)^2 / p). With lambda in the thousands, missing it is not a realistic event."""
    exact = toy.exact_distribution(P, 4)
    buggy = toy.speculative_distribution(P, Q, 4, 3, rule="target-residual")
    lam = N * ((buggy - exact) ** 2 / exact).sum()
    assert lam > 1000


def test_a_missing_bonus_token_keeps_the_text_exact_but_loses_speed():
    rng = np.random.default_rng(2)
    samples, st = bugzoo.sample_speculative(P, Q, N, 4, 3, rng, rule="missing-bonus-token")
    _, exact_stats = toy.sample_speculative(P, Q, N, 4, 3, rng)
    assert not stats.chi2_test(samples, toy.exact_distribution(P, 4)).flagged  # distribution is fine
    assert st.tokens_per_call < exact_stats.tokens_per_call  # fewer tokens per target pass
