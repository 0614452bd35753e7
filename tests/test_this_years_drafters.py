"""This year's drafters (issue #36): ParallelLite, a block of guesses from one pass of a head on the
target's states (DFlash-style), and Eagle3Lite, EagleLite with fused features from several layers and
training-time test. The registry tests (test_drafters.py) hold both to greedy identity, the KV cache and
the χ² test with a planted wrong q; these check what is particular to them: that the training passes
are the drafting passes, that a round costs one pass, the fused states, training, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specnotes import engine, models, verify
from specnotes.drafters import Eagle3Lite, ParallelLite
from specnotes.drafters.base import Recorder
from specnotes.training import eagle3, parallel
from tests.conftest import noisy


@pytest.fixture(scope="module")
def target64():
    return models.tiny_llama(seed=0, layers=4).double().eval()


def test_block_layout_lets_each_slot_see_the_text_up_to_its_anchor_and_its_own_block():
    positions, see = parallel.block_layout(4, [0, 2], 3)
    assert positions.tolist() == [0, 1, 2, 3, 1, 2, 3, 4]
    expected = np.array([
        [1, 0, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0, 0, 0],
        [1, 0, 0, 0, 1, 0, 0, 0],  # anchor 0, slot 1: the pair at 0 and itself
        [1, 0, 0, 0, 1, 1, 0, 0],  # anchor 0, slot 2
        [1, 1, 1, 0, 0, 0, 1, 0],  # anchor 2, slot 1: pairs 0..2, never anchor 0's slots
        [1, 1, 1, 0, 0, 0, 1, 1]], dtype=bool)
    assert np.array_equal(see, expected)
    with pytest.raises(ValueError, match="anchors"):
        parallel.block_layout(4, [4], 3)


def test_the_parallel_training_pass_is_the_drafting_pass(target64):
    """Every row of one training pass (pairs, then several anchors' slots) equals what drafting computes
    when the text is committed up to that anchor: a plain causal pass over the pairs up to t and t's
    slots. A wrong mask or wrong slot positions would part them."""
    model = noisy(parallel.new_model(target64, block=4)).double()
    gen = torch.Generator().manual_seed(0)
    length, d = 12, target64.config.hidden_size
    states = torch.randn(1, length, d, generator=gen, dtype=torch.float64)
    tokens = torch.randint(0, 256, (1, length + 1), generator=gen)
    anchors = np.array([0, 5, 8])
    positions, see = parallel.block_layout(length, anchors, 4)
    with torch.no_grad():
        trained, _ = model.block_forward(states, tokens[:, 1:], np.tile(np.arange(3), len(anchors)),
                                         position_ids=torch.as_tensor(positions)[None],
                                         attention_mask=parallel.additive(see, torch.float64, "cpu"))
        for i, t in enumerate(anchors):
            drafted, _ = model.block_forward(states[:, :t + 1], tokens[:, 1:t + 2], [0, 1, 2],
                                             position_ids=torch.arange(t + 4)[None])
            assert torch.allclose(trained[0, :t + 1], drafted[0, :t + 1], atol=1e-10)
            slots = trained[0, length + 3 * i:length + 3 * (i + 1)]
            assert torch.allclose(slots, drafted[0, t + 1:], atol=1e-10)


def test_ttt_layout_lets_each_step_see_the_target_fed_rows_and_its_own_chain():
    positions, see = eagle3.ttt_layout(3, 3)
    assert positions.tolist() == [0, 1, 2, 1, 2, 3, 2, 3, 4]
    row = see[2 * 3 + 1]  # step 3 at position 1: target-fed 0..1, its own step-2 and step-3 rows
    assert row.astype(int).tolist() == [1, 1, 0, 0, 1, 0, 0, 1, 0]


def test_the_training_time_test_pass_is_the_drafting_chain(target64):
    """Step j of the training pass at position t equals drafting after committing up to t: the layer fed
    the target's fused features up to t, then its own outputs, with the true tokens as guesses."""
    model = noisy(eagle3.new_model(target64)).double()
    gen = torch.Generator().manual_seed(1)
    n, steps, width = 6, 3, len(model.layers) * target64.config.hidden_size
    states = torch.randn(1, n + steps, width, generator=gen, dtype=torch.float64)
    tokens = torch.randint(0, 256, (1, n + steps + 1), generator=gen)
    positions, see = eagle3.ttt_layout(n, steps)
    attn = parallel.additive(see, torch.float64, "cpu")
    with torch.no_grad():
        feats, cache, trained = model.features_of(states[:, :n]), None, []
        for j in range(1, steps + 1):
            rows = slice((j - 1) * n, j * n)
            feats, _, cache = model(feats, tokens[:, j:j + n], cache, torch.as_tensor(positions[rows])[None],
                                    use_cache=True, with_logits=False, attention_mask=attn[..., rows, :j * n])
            trained.append(feats)
        for t in (0, 3, n - 1):
            feat, _, cache = model(model.features_of(states[:, :t + 1]), tokens[:, 1:t + 2], None,
                                   torch.arange(t + 1)[None], use_cache=True, with_logits=False)
            feat = feat[:, -1:]
            assert torch.allclose(feat[0, 0], trained[0][0, t], atol=1e-10)
            for j in range(2, steps + 1):  # chain the draft's own output, with the true token t + j
                feat, _, cache = model(feat, tokens[:, t + j:t + j + 1], cache, torch.tensor([[t + j - 1]]),
                                       use_cache=True, with_logits=False)
                assert torch.allclose(feat[0, 0], trained[j - 1][0, t], atol=1e-10)


def test_eagle3_started_from_eaglelite_drafts_as_eaglelite_did_until_it_trains(target64):
    """Eagle3Lite is EagleLite's successor: built from a trained EagleLite network, with the fusion at its
    start ([0 | 0 | I]: the last layer's state alone), it predicts what EagleLite predicts; fusion and
    training-time test are all it adds."""
    from specnotes.training import eagle

    start = noisy(eagle.new_model(target64)).double()
    model = eagle3.new_model(target64, start=start).double()
    gen = torch.Generator().manual_seed(2)
    d = target64.config.hidden_size
    states = torch.randn(1, 7, len(model.layers) * d, generator=gen, dtype=torch.float64)
    tokens = torch.randint(0, 256, (1, 7), generator=gen)
    with torch.no_grad():
        mine, _, _ = model(model.features_of(states), tokens, with_logits=False)
        theirs, _, _ = start(states[..., -d:], tokens, with_logits=False)
    assert torch.allclose(mine, theirs, atol=1e-10)
    # a fresh Eagle3Lite (a copy of the target's last layer) does not: the copy is what carried it
    fresh, _, _ = eagle3.new_model(target64).double()(model.features_of(states), tokens, with_logits=False)
    assert not torch.allclose(fresh, theirs, atol=1e-3)
    with pytest.raises(TypeError, match="EagleLite"):
        eagle3.new_model(target64, start=model)


def test_a_parallel_round_runs_its_network_once_whatever_k(tiny):
    model = noisy(parallel.new_model(tiny.target))
    calls = []
    model.body.model.register_forward_hook(lambda *_: calls.append(1))
    drafter = Recorder(ParallelLite(tiny.target, model=model))
    result = engine.generate(tiny.target, drafter, tiny.prompt, 20, eos_token_id=-1)
    assert max(r.size for r in result.trace) == parallel.BLOCK  # a whole block from one pass
    # one pass per proposal (the first round has no states yet; a round with no room left asks nothing)
    assert len(calls) == len(drafter.drafts) - 1 > 10


def test_the_engine_hands_a_fused_drafter_the_states_of_its_layers_side_by_side(tiny):
    ids = [5, 9, 2, 77, 5]
    layers = eagle3.fused_layers(tiny.target.config.num_hidden_layers)
    _, fused, _ = verify.verify_pass(tiny.target, None, ids, hidden=layers)
    with torch.no_grad():
        out = tiny.target(torch.tensor([ids]), output_hidden_states=True)
    assert torch.equal(fused, torch.cat([out.hidden_states[i][0] for i in layers], -1))
    drafter = Eagle3Lite(tiny.target, model=eagle3.new_model(tiny.target))
    assert verify.wanted_states(drafter) == layers
    assert drafter.state_layers == layers


def test_training_lowers_both_losses_and_leaves_the_target_alone(tiny, tmp_path, monkeypatch):
    from tests.test_drafters import _random_windows

    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))
    before = {n: p.clone() for n, p in tiny.target.state_dict().items()}
    data = _random_windows()
    _, log = parallel.train_parallel(tiny.target, steps=30, data=data, vocab=None, batch=4, lr=3e-3,
                                     anchors=4, progress=False)
    assert np.mean(log.losses[-5:]) < 0.9 * np.mean(log.losses[:5])
    _, log = eagle3.train_eagle3(tiny.target, steps=30, data=data, vocab=None, batch=4, lr=3e-3,
                                 step_weight=0.5, save_to=tmp_path / "e3.safetensors", progress=False)
    from specnotes import weights

    assert weights.load(eagle3.new_model(tiny.target), tmp_path / "e3.safetensors")["step_weight"] == "0.5"
    assert np.mean(log.losses[-5:]) < 0.9 * np.mean(log.losses[:5])
    assert all(torch.equal(p, before[n]) for n, p in tiny.target.state_dict().items())


def test_bad_settings_are_refused_by_name(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))
    model = parallel.new_model(tiny.target)
    with pytest.raises(ValueError, match="k"):
        ParallelLite(tiny.target, model=model, k=parallel.BLOCK + 1)
    with pytest.raises(ValueError, match="model"):
        ParallelLite(tiny.target, model="fresh")
    with pytest.raises(TypeError, match="sampled"):
        ParallelLite(tiny.target, model=model, sampled="yes")
    with pytest.raises(ValueError, match="block"):
        parallel.new_model(tiny.target, block=1)
    with pytest.raises(ValueError, match="too short"):
        parallel.train_parallel(tiny.target, steps=1, data=_short_windows(), vocab=None, progress=False)
    with pytest.raises(ValueError, match="step_weight"):
        eagle3.train_eagle3(tiny.target, steps=1, data=_short_windows(), vocab=None, step_weight=0.0,
                            progress=False)


def _short_windows():
    from specnotes import distill

    return distill.Windows(np.zeros((2, 4), dtype=np.int64), np.zeros((2, 4), dtype=np.int64),
                           np.ones((2, 4), dtype=bool))
