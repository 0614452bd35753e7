"""Model surgery: a truncated target shares its weights; a student copies the layers it is given."""

import pytest
import torch

from specnotes import models, surgery


def test_truncated_model_shares_weights_and_full_depth_is_the_model():
    target = models.tiny_llama(seed=0, layers=4)
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    with torch.no_grad():
        assert torch.equal(surgery.truncated(target, 4)(ids).logits, target(ids).logits)
        shallow = surgery.truncated(target, 1)
        assert shallow.model.layers[0] is target.model.layers[0] and shallow.lm_head is target.lm_head
        assert not torch.equal(shallow(ids).logits, target(ids).logits)
    with pytest.raises(ValueError, match="1..4"):
        surgery.truncated(target, 5)


def test_a_student_copies_the_layers_it_is_given_and_trains_only_those():
    target = models.tiny_llama(seed=0, layers=4)
    small = surgery.student(target, (1, 3))
    assert small.config.num_hidden_layers == 2
    assert [layer.self_attn.layer_idx for layer in small.model.layers] == [0, 1]  # renumbered for the cache
    assert torch.equal(small.model.layers[1].mlp.up_proj.weight, target.model.layers[3].mlp.up_proj.weight)
    assert small.model.layers[1] is not target.model.layers[3]  # a copy, trained without touching the target
    assert small.lm_head is target.lm_head and small.model.embed_tokens is target.model.embed_tokens
    trainable = {n for n, p in small.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith(("model.layers.", "model.norm.")) for n in trainable)
    with pytest.raises(ValueError, match="layers"):
        surgery.student(target, (0, 9))
