"""Candidate trees (specnotes.tree): shapes, the ancestry mask and depth positions, and the tree walks: the
exact multi-candidate rule emits p, and typical acceptance is flagged by the calibrated test."""

import numpy as np
import pytest
import torch

from specnotes import stats, tree, verify
from specnotes.drafters import RandomTree


def test_static_tree_shape_mask_and_depths():
    t = tree.static_tree([[10, 11, 12], [20, 21], [30]], tree.default_choices((3, 2, 1)))
    assert t.tokens == [10, 11, 12, 20, 21, 30] and t.parents == [-1, -1, -1, 0, 0, 3]
    assert t.depth.tolist() == [1, 1, 1, 2, 2, 3]
    see = t.ancestry()
    assert see[6].tolist() == [True, True, False, False, True, False, True]  # root, 10, 20, 30
    assert see[2].tolist() == [True, False, True, False, False, False, False]  # root and itself
    assert t.path_to(5) == [0, 3, 5]
    assert t.cut(1).tokens == [10, 11, 12]
    with pytest.raises(ValueError, match="prefix"):
        tree.static_tree([[1, 2], [3]], [(0, 0)])
    with pytest.raises(ValueError, match="parent"):
        tree.Tree([1, 2], [-1, 5])


def test_the_mask_lets_each_node_see_the_cache_the_prompt_the_root_and_its_ancestors():
    t = tree.static_tree([[10, 11], [20]], tree.default_choices((2, 1)))  # 10, 11; 20 under 10
    positions, mask = tree.mask(cache_len=4, n_uncached=2, tree=t, device="cpu", dtype=torch.float32)
    assert positions.tolist() == [[4, 5, 6, 7, 7, 8]]  # prompt 4, 5; root 6; depth 1, 1, 2
    see = (mask[0, 0] == 0).numpy()
    assert see[:, :4].all()  # the cache: everyone
    assert see[3].tolist() == [True] * 4 + [True, True, True, True, False, False]  # node 10: root, itself
    assert see[5].tolist() == [True] * 4 + [True, True, True, True, False, True]  # 20: root, 10, itself
    assert not see[0, 5] and see[1, 4]  # the prompt rows are causal among themselves


def test_walk_sampling_emits_p_for_one_node_with_three_candidates():
    # one node with three point-mass children: the emitted token's law must be p (40k draws; the
    # tolerance is 5 standard errors, so a false alarm is about 1 in 3 million per token)
    p = torch.tensor([0.1, 0.4, 0.3, 0.2], dtype=torch.float64)
    t = tree.Tree([1, 3, 0], [-1, -1, -1])
    probs = p[None].repeat(4, 1)
    rng = np.random.default_rng(0)

    class NumpySampler:  # the rule's three calls on a sampler, served by a numpy generator
        def probs(self, logits):
            return logits

        def uniform(self, n):
            return rng.random(n)

        def draw(self, q):
            return int(rng.choice(4, p=(q / q.sum()).numpy()))

    n, counts, rule, sampler = 40_000, np.zeros(4), verify.TokenWise(), NumpySampler()
    for _ in range(n):
        path, nxt = rule.tree(t, probs, sampler)
        counts[t.tokens[path[0]] if path else nxt] += 1
    se = np.sqrt(p.numpy() * (1 - p.numpy()) / n)
    assert np.all(np.abs(counts / n - p.numpy()) < 5 * se), counts / n


def test_typical_acceptance_is_flagged_as_not_lossless(tiny):
    # candidates from a skewed guesser, as Medusa heads would be; typical acceptance takes any
    # "plausible enough" candidate, which over-represents the guesser's favourites
    rows = tiny.sampled(lambda: RandomTree(6, (3, 2, 1), seed=1), rule="typical", n=2000)
    assert stats.chi2_test(rows, tiny.exact).p_value < stats.FLAG_P
