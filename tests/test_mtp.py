"""Multi-token prediction on a toy language (specnotes.mtp): the extra head learns only when trained
with the model, and then drafts through the engine with greedy identity."""

import numpy as np
import pytest
import torch

from specnotes import engine


def test_mtp_module_learns_only_when_trained_with_the_model_and_then_drafts(tiny):
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
    res = engine.generate(with_mtp.model, drafter, prompt, 20, eos_token_id=-1)
    assert res.tokens == tiny.greedy(with_mtp.model, prompt, 20)
    with pytest.raises(ValueError, match="vocab"):
        mtp.toy_language(2)

