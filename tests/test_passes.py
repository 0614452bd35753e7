"""Target passes and cache edits (specnotes.passes, and specnotes.verify's verify_pass and compact): a tree
pass equals chain passes along every branch, and after crop or compaction the KV cache equals a fresh
prefill of the accepted tokens."""

import numpy as np
import torch

from specnotes import models, passes, tree, verify


def test_one_tree_pass_equals_a_chain_pass_along_every_branch(tiny):
    prompt = tiny.prompt[0].tolist()
    t = tree.static_tree([[5, 9, 14], [2, 7], [11]], tree.default_choices((3, 2, 1)))
    _, cache = passes.forward_pass(tiny.target, torch.tensor([prompt[:-1]]))
    logits, _, _ = verify.verify_pass(tiny.target, cache, [prompt[-1], *t.tokens], t)
    for node in range(len(t)):
        branch = [t.tokens[i] for i in t.path_to(node)]
        with torch.no_grad():
            ref = tiny.target(torch.tensor([prompt + branch])).logits[0, -1]
        torch.testing.assert_close(logits[node + 1], ref, rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        root_ref = tiny.target(torch.tensor([prompt])).logits[0, -1]
    torch.testing.assert_close(logits[0], root_ref, rtol=1e-4, atol=1e-4)


def assert_same_cache(cache, fresh, atol=1e-5):
    assert cache.get_seq_length() == fresh.get_seq_length()
    for a, b in zip(cache.layers, fresh.layers, strict=True):
        assert (a.keys - b.keys).abs().max() < atol and (a.values - b.values).abs().max() < atol


def test_compaction_leaves_the_cache_of_the_accepted_branch(tiny):
    prompt = tiny.prompt[0].tolist()
    t = tree.static_tree([[5, 9, 14], [2, 7], [11]], tree.default_choices((3, 2, 1)))
    _, cache = passes.forward_pass(tiny.target, torch.tensor([prompt[:-1]]))
    start = cache.get_seq_length()
    verify.verify_pass(tiny.target, cache, [prompt[-1], *t.tokens], t)
    branch = t.path_to(5)  # 5 -> 2 -> 11
    verify.compact(cache, start, [0] + [i + 1 for i in branch])
    _, fresh = passes.forward_pass(tiny.target, torch.tensor([prompt + [t.tokens[i] for i in branch]]))
    assert_same_cache(cache, fresh)


def test_a_chain_rollback_leaves_the_cache_equal_to_a_fresh_prefill():
    # float64, so that what is compared is the bookkeeping, not fp32 rounding of differently shaped matmuls
    target = models.tiny_llama(seed=0, layers=4).double()
    rng = np.random.default_rng(0)
    vocab = target.config.vocab_size
    for _ in range(200):
        prompt = rng.integers(vocab, size=int(rng.integers(2, 24))).tolist()
        drafted = rng.integers(vocab, size=int(rng.integers(1, 9))).tolist()
        n = int(rng.integers(0, len(drafted) + 1))  # any accept pattern: a prefix of the drafts
        with torch.no_grad():
            _, cache = passes.forward_pass(target, torch.tensor([prompt[:-1]]))
            start = cache.get_seq_length()
            _, _, cache = verify.verify_pass(target, cache, [prompt[-1], *drafted])
            verify.compact(cache, start, list(range(n + 1)))  # the root and n accepted drafts
            _, fresh = passes.forward_pass(target, torch.tensor([prompt + drafted[:n]]))
        assert cache.get_seq_length() == len(prompt) + n
        assert_same_cache(cache, fresh)


def test_keep_returns_only_the_last_rows(tiny):
    logits, _ = passes.forward_pass(tiny.target, tiny.prompt, keep=3)
    full, _ = passes.forward_pass(tiny.target, tiny.prompt)
    assert logits.shape[1] == 3
    torch.testing.assert_close(logits, full[:, -3:], rtol=1e-5, atol=1e-5)
