"""Tree verification (specnotes.tree): the mask and positions, one tree pass against chain passes, KV
compaction, greedy identity, and the calibrated sampling test that passes the exact multi-candidate rule
and flags typical acceptance."""

import numpy as np
import pytest
import torch

from specnotes import engine, stats, surgery, tree
from specnotes.decode import forward_pass
from tests.test_engine import (
    EXACT,
    LENGTH,
    PROMPT,
    SMALL_PROMPT,
    SMALL_TARGET,
    TARGET,
    TEMPERATURE,
    hf_greedy,
)


class TopKChain:
    """A tree drafter for tests: a small draft model's greedy chain, branching into its top-`width`
    tokens at each depth (Medusa's tree shape, built from a real model's guesses)."""

    def __init__(self, draft, depth=3, widths=(3, 2, 1)):
        self.draft, self.depth, self.widths = draft, depth, widths

    def reset(self, prompt):
        pass

    def propose(self, tokens, states):
        seq, candidates = list(tokens), []
        with torch.no_grad():
            for width in self.widths[: self.depth]:
                logits = self.draft(torch.tensor([seq])).logits[0, -1]
                top = torch.topk(logits, width).indices.tolist()
                candidates.append(top)
                seq.append(top[0])
        return tree.static_tree(candidates, tree.default_choices(self.widths[: self.depth]))

    def update(self, tokens, n_accepted):
        pass


RandomTree = tree.RandomTree


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


def test_one_tree_pass_equals_a_chain_pass_along_every_branch():
    model = TARGET
    prompt = PROMPT[0].tolist()
    t = tree.static_tree([[5, 9, 14], [2, 7], [11]], tree.default_choices((3, 2, 1)))
    _, cache = forward_pass(model, torch.tensor([prompt[:-1]]))
    logits, _, _ = tree.tree_pass(model, cache, prompt[-1], t)
    for node in range(len(t)):
        branch = [t.tokens[i] for i in t.path_to(node)]
        with torch.no_grad():
            ref = model(torch.tensor([prompt + branch])).logits[0, -1]
        torch.testing.assert_close(logits[node + 1], ref, rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        root_ref = model(torch.tensor([prompt])).logits[0, -1]
    torch.testing.assert_close(logits[0], root_ref, rtol=1e-4, atol=1e-4)


def test_compaction_leaves_the_cache_of_the_accepted_branch():
    prompt = PROMPT[0].tolist()
    t = tree.static_tree([[5, 9, 14], [2, 7], [11]], tree.default_choices((3, 2, 1)))
    _, cache = forward_pass(TARGET, torch.tensor([prompt[:-1]]))
    start = cache.get_seq_length()
    tree.tree_pass(TARGET, cache, prompt[-1], t)
    branch = t.path_to(5)  # 5 -> 2 -> 11
    tree.compact(cache, start, [0] + [i + 1 for i in branch])
    _, fresh = forward_pass(TARGET, torch.tensor([prompt + [t.tokens[i] for i in branch]]))
    assert cache.get_seq_length() == fresh.get_seq_length()
    for a, b in zip(cache.layers, fresh.layers, strict=True):
        torch.testing.assert_close(a.keys, b.keys, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(a.values, b.values, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("drafter", ["top-k chain of a truncated target", "random trees",
                                     "the target's own top-k"])
def test_tree_greedy_equals_the_targets_own_greedy(drafter):
    make = {"top-k chain of a truncated target": lambda: TopKChain(surgery.truncated(TARGET, 2)),
            "random trees": lambda: RandomTree(256, (4, 3, 2, 1)),
            "the target's own top-k": lambda: TopKChain(TARGET, depth=3, widths=(2, 2, 2))}[drafter]
    want = hf_greedy(TARGET, PROMPT, 40)
    res = tree.generate(TARGET, make(), PROMPT, 40, eos_token_id=-1)
    assert res.tokens == want
    if drafter == "the target's own top-k":
        assert res.tokens_per_call > 3.5  # every branch's first child is right: depth 3 + the bonus


def sampled(make, rule, n=2000, seed0=0):
    rows = [tree.generate(SMALL_TARGET, make(), SMALL_PROMPT, LENGTH, do_sample=True, temperature=TEMPERATURE,
                          seed=seed0 + i, eos_token_id=-1, rule=rule).tokens for i in range(n)]
    return np.array(rows)


def test_the_multi_candidate_rule_keeps_the_exact_distribution():
    _, p_value = stats.chi2_test(sampled(lambda: RandomTree(6, (3, 2, 1), seed=1), "exact"), EXACT)
    assert p_value > stats.FLAG_P  # false alarms: 1 in a million


def test_typical_acceptance_is_flagged_as_not_lossless():
    # candidates from a skewed guesser, as Medusa heads would be; typical acceptance takes any
    # "plausible enough" candidate, which over-represents the guesser's favourites
    _, p_value = stats.chi2_test(sampled(lambda: RandomTree(6, (3, 2, 1), seed=1), "typical"), EXACT)
    assert p_value < stats.FLAG_P


def test_walk_sampling_emits_p_for_one_node_with_three_candidates():
    # one node with three point-mass children: the emitted token's law must be p (40k draws; the
    # tolerance is 5 standard errors, so a false alarm is about 1 in 3 million per token)
    p = torch.tensor([0.1, 0.4, 0.3, 0.2], dtype=torch.float64)
    t = tree.Tree([1, 3, 0], [-1, -1, -1])
    probs = p[None].repeat(4, 1)
    rng = np.random.default_rng(0)
    n, counts = 40_000, np.zeros(4)
    for _ in range(n):
        path, nxt = tree.walk_sampling(t, probs, rng.random,
                                       lambda q: int(rng.choice(4, p=(q / q.sum()).numpy())))
        counts[t.tokens[path[0]] if path else nxt] += 1
    se = np.sqrt(p.numpy() * (1 - p.numpy()) / n)
    assert np.all(np.abs(counts / n - p.numpy()) < 5 * se), counts / n


def test_tree_generate_refuses_bad_input():
    with pytest.raises(ValueError, match="rule"):
        tree.generate(TARGET, RandomTree(256), PROMPT, 5, rule="relaxed")
    with pytest.raises(ValueError, match="shape"):
        tree.generate(TARGET, RandomTree(256), PROMPT.repeat(2, 1), 5)


def test_engine_and_tree_agree_on_a_chain():
    class Chain(TopKChain):
        def propose(self, tokens, states):
            return tree.chain([t for t in hf_greedy(TARGET, torch.tensor([tokens]), 2)])

    res = tree.generate(TARGET, Chain(None), PROMPT, 30, eos_token_id=-1)
    assert res.tokens == engine.generate(TARGET, _NoDraft(), PROMPT, 30, eos_token_id=-1).tokens
    assert res.target_calls == 1 + 10  # the prompt pass (no states to draft from yet), then 3 tokens a pass


class _NoDraft:
    def reset(self, prompt):
        pass

    def propose(self, tokens, k, sampler):
        from specnotes.drafters import Draft

        return Draft([], None)

    def update(self, tokens, n):
        pass


# --------------------------------------------------------------------------- Medusa heads and EagleLite

def _random_windows(n=12, length=24, seed=0):
    from specnotes import distill

    rng = np.random.default_rng(seed)
    return distill.Windows(rng.integers(0, 256, (n, length)), rng.integers(0, 256, (n, length)),
                           np.ones((n, length), dtype=bool))


def _noisy(module, seed=0):
    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed)
        for p in module.parameters():
            if p.requires_grad:
                p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    return module


@pytest.mark.parametrize("widths", [(1,), (3, 2, 2), (4, 1, 1)])
def test_medusa_tree_keeps_greedy_identity(widths):
    from specnotes.drafters.medusa import Medusa, new_heads

    heads = _noisy(new_heads(TARGET, 3))
    res = tree.generate(TARGET, Medusa(TARGET, heads=heads, widths=widths), PROMPT, 30, eos_token_id=-1)
    assert res.tokens == hf_greedy(TARGET, PROMPT, 30)


def test_eagle_lite_chain_keeps_greedy_identity():
    from specnotes.drafters.eagle import EagleLite, new_model

    model = _noisy(new_model(TARGET))
    for k in (1, 3):
        res = tree.generate(TARGET, EagleLite(TARGET, model=model, k=k), PROMPT, 30, eos_token_id=-1)
        assert res.tokens == hf_greedy(TARGET, PROMPT, 30)


def test_eagle_lite_confidence_gate_keeps_identity_and_drafts_only_when_sure():
    from specnotes.drafters.eagle import EagleLite, new_model

    model = _noisy(new_model(TARGET))
    reference = hf_greedy(TARGET, PROMPT, 30)
    counts = {}
    for gate in (0.0, 0.2, 0.99):
        for k in (1, 3):
            res = tree.generate(TARGET, EagleLite(TARGET, model=model, k=k, min_confidence=gate), PROMPT, 30,
                                eos_token_id=-1)
            assert res.tokens == reference, (gate, k)
            counts[gate, k] = int(res.drafted_counts.sum())
    # gate 0 never stops a draft; a gate near 1 leaves a random draft nothing it is sure of
    assert counts[0.0, 3] > counts[0.2, 3] >= counts[0.99, 3] == 0 and counts[0.99, 1] == 0
    with pytest.raises(ValueError, match="min_confidence"):
        EagleLite(TARGET, model=model, min_confidence=1.0)


def test_medusa_and_eagle_training_lower_their_loss_and_leave_the_target_alone(tmp_path, monkeypatch):
    from specnotes.drafters import eagle, medusa

    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))
    before = {n: p.clone() for n, p in TARGET.state_dict().items()}
    data = _random_windows()
    _, log = medusa.train_medusa(TARGET, 2, steps=40, data=data, teacher_k=4, positions=64, lr=3e-3,
                                 progress=False)
    assert np.mean(log.losses[-5:]) < 0.9 * np.mean(log.losses[:5])
    _, log = eagle.train_eagle(TARGET, steps=30, data=data, vocab=None, batch=4, lr=3e-3, progress=False)
    assert np.mean(log.losses[-5:]) < 0.9 * np.mean(log.losses[:5])
    assert all(torch.equal(p, before[n]) for n, p in TARGET.state_dict().items())


def test_medusa_refuses_a_tree_deeper_than_its_heads():
    from specnotes.drafters.medusa import Medusa, new_heads

    with pytest.raises(ValueError, match="widths"):
        Medusa(TARGET, heads=new_heads(TARGET, 2), widths=(2, 2, 2))
    with pytest.raises(ValueError, match="n_heads"):
        new_heads(TARGET, 0)


def test_mtp_module_learns_only_when_trained_with_the_model_and_then_drafts():
    from specnotes import mtp
    from specnotes.drafters import EagleLite

    table = mtp.toy_language(16, seed=1)
    assert np.allclose(table.sum(-1), 1) and ((table > 0).sum(-1) == 3).all()
    seqs = mtp.sample_language(table, 4, 10, seed=0)
    assert seqs.shape == (4, 10)
    assert all(table[s[t - 2], s[t - 1], s[t]] > 0 for s in seqs for t in range(2, 10))
    with_mtp = mtp.train(lam=0.3, steps=80, progress=False)
    without = mtp.train(lam=0.0, steps=80, progress=False)
    assert np.mean(with_mtp.mtp_losses[-10:]) < 0.8 * np.mean(without.mtp_losses[-10:])
    prompt = torch.as_tensor(mtp.sample_language(mtp.toy_language(), 1, 8, seed=99))
    drafter = EagleLite(with_mtp.model, model=with_mtp.module, k=1)
    res = tree.generate(with_mtp.model, drafter, prompt, 20, eos_token_id=-1)
    assert res.tokens == hf_greedy(with_mtp.model, prompt, 20)
    with pytest.raises(ValueError, match="vocab"):
        mtp.toy_language(2)
