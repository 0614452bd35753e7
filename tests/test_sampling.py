"""The torch sampling rule (specnotes.sampling): top-k and top-p processing, and the target-residual bug
that the calibrated test must flag (the exact rule itself passes it for every drafter in
test_drafters.py)."""

import pytest
import torch

from specnotes import sampling, stats, verify
from specnotes.drafters import DraftModel


def test_top_k_and_top_p_processing_keep_the_right_tokens():
    sampler = sampling.Sampler(do_sample=True, temperature=1.0, top_k=2, seed=0)
    probs = sampler.probs(torch.tensor([3.0, 1.0, 2.0, 0.0]))
    assert torch.count_nonzero(probs) == 2 and probs[1] == 0 and probs[3] == 0
    sampler = sampling.Sampler(do_sample=True, top_p=0.5, seed=0)
    probs = sampler.probs(torch.log(torch.tensor([0.1, 0.6, 0.3])))
    assert probs.tolist() == pytest.approx([0.0, 1.0, 0.0])  # 0.6 alone crosses 0.5


def test_greedy_accepts_the_prefix_that_equals_the_argmax():
    logits = torch.tensor([[0.0, 5.0, 0.0], [4.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    greedy = verify.Greedy()
    assert greedy.chain(logits, [1, 0], None, None) == (2, 2)  # both kept, then the bonus
    assert greedy.chain(logits, [1, 2], None, None) == (1, 0)  # the second corrected to the argmax


def test_the_residual_is_what_acceptance_failed_to_deliver():
    p, q = torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.2, 0.6, 0.2])
    assert sampling.residual(p, q).tolist() == pytest.approx([1.0, 0.0, 0.0])
    assert sampling.residual(p, p).tolist() == pytest.approx(p.tolist())  # empty: p (never sampled)


def test_the_target_residual_bug_fails_the_same_test(tiny, monkeypatch):
    monkeypatch.setattr(sampling, "residual", lambda p, q: p)  # resample from p after a rejection
    rows = tiny.sampled(lambda: DraftModel(tiny.small_draft))
    assert stats.chi2_test(rows, tiny.exact).p_value < stats.FLAG_P
