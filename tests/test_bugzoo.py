"""Every planted bug is caught by the same checks that pass the exact rule (the checks can fail)."""

import numpy as np
import pytest

from specnotes import bugzoo, stats, toy

P, Q = toy.seed_pair()
N = 100_000  # power: the weakest distribution bug below is ~0.1 TV away; see the noncentrality test


def test_the_zoo_holds_at_least_six_documented_bugs():
    assert len(bugzoo.ZOO) >= 6
    for bug in bugzoo.ZOO:
        assert bug.what and bug.seen_in and bug.check in {"distribution", "invariant"}


@pytest.mark.parametrize("bug", bugzoo.ZOO, ids=lambda b: b.name)
def test_every_bug_is_flagged(bug):
    verdict = bugzoo.audit(bug.name, P, Q, N, 4, 3, seed=11, check=bug.check)
    assert verdict.flagged
    if bug.check == "distribution":
        assert verdict.p_value < stats.FLAG_P
    else:
        assert not verdict.invariant_ok


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
