"""Self-distillation: training windows count only the target's own text, the KD loss, a few steps that
learn, the committed sets, and the caches of what is computed from a target (teacher targets, and Medusa's
hidden states through the same helper): keyed by the target's weights, not its size, checked against the
checksum beside them and recomputed when damaged."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specnotes import distill, models
from specnotes.prompts import prompt_set
from specnotes.surgery import student

TARGET = models.tiny_llama(seed=0, layers=4)


def inputs(seed: int = 0, vocab: int = 256) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, (4, 16))


def teacher(target, ids):
    return distill.teacher_targets(target, ids, k=4, progress=False)


def hidden(target, ids):
    return distill.hidden_states(target, ids, progress=False)


def test_the_fingerprint_follows_the_weights_not_the_size():
    a, b = models.tiny_llama(seed=0), models.tiny_llama(seed=1)
    assert distill.fingerprint(a) != distill.fingerprint(b)
    twin = models.tiny_llama(seed=0)
    assert distill.fingerprint(twin) == distill.fingerprint(a)
    with torch.no_grad():
        twin.model.layers[1].mlp.up_proj.weight[3, 5] += 1e-3
    assert distill.fingerprint(twin) != distill.fingerprint(a)
    with pytest.raises(ValueError, match="meta"):
        distill.fingerprint(models.tiny_llama(seed=0).to("meta"))


def test_two_targets_of_the_same_size_get_their_own_teacher_targets(drafter_cache):
    a, b = models.tiny_llama(seed=0), models.tiny_llama(seed=1)
    ids = inputs()
    teacher(a, ids)
    served = teacher(b, ids)
    fresh = distill.teacher_topk(b, ids, k=4, progress=False)
    assert np.array_equal(served[0], fresh[0])


def test_two_targets_of_the_same_size_get_their_own_hidden_states(drafter_cache):
    a, b = models.tiny_llama(seed=0), models.tiny_llama(seed=1)
    ids = inputs()
    first = hidden(a, ids)
    assert not np.allclose(hidden(b, ids), first)
    assert np.array_equal(hidden(a, ids), first)  # and the first one is still served from its cache


@pytest.mark.parametrize("how", ["flipped byte", "truncated"])
@pytest.mark.parametrize("kind", ["teacher", "hidden"])
def test_a_damaged_cached_array_is_detected_and_recomputed(drafter_cache, damage, capsys, kind, how):
    compute = {"teacher": lambda t, x: teacher(t, x)[1], "hidden": hidden}[kind]
    target, ids = models.tiny_llama(seed=0), inputs()
    expected = compute(target, ids)
    (path,) = [p for p in drafter_cache.iterdir() if p.suffix == ".npz"]
    damage(path, how)
    capsys.readouterr()
    assert np.array_equal(compute(target, ids), expected)
    out = capsys.readouterr().out
    assert path.name in out and "damaged" in out and "recomputing" in out, out
    assert len(out.strip().splitlines()) == 1, out
    compute(target, ids)  # the recomputed file is whole again: no second message
    assert capsys.readouterr().out == ""


def test_windows_count_only_the_targets_own_text():
    seqs = [np.arange(10), np.arange(100, 105)]
    win = distill.windows(seqs, [4, 2], length=4)
    assert win.inputs.shape == (4, 4)
    # sequence 0: labels 1..9, counted from label index 3 (token 4) on
    assert win.mask[0].tolist() == [False, False, False, True]
    assert win.labels[1].tolist() == [5, 6, 7, 8]
    assert win.labels[2].tolist() == [9, 0, 0, 0] and win.mask[2].tolist() == [True, False, False, False]
    assert win.mask[3].tolist() == [False, True, True, True]  # sequence 1: its prompt is 2 tokens


def test_kd_loss_with_a_one_hot_teacher_is_cross_entropy():
    logits = torch.randn(2, 3, 7)
    labels = torch.randint(0, 7, (2, 3))
    mask = torch.ones(2, 3, dtype=torch.bool)
    one_hot_ids = torch.cat([labels[..., None], (labels[..., None] + 1) % 7], -1)
    one_hot_p = torch.tensor([1.0, 0.0]).expand(2, 3, 2)
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, 7), labels.reshape(-1))
    assert torch.allclose(distill.kd_loss(logits, labels, mask), ce)
    assert torch.allclose(distill.kd_loss(logits, labels, mask, one_hot_ids, one_hot_p), ce)


def test_a_few_training_steps_lower_the_loss_on_a_tiny_target(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))  # the teacher pass is cached: not in the real cache
    rng = np.random.default_rng(0)
    data = distill.Windows(rng.integers(0, 256, (16, 32)), rng.integers(0, 256, (16, 32)),
                           np.ones((16, 32), dtype=bool))
    before = {n: p.clone() for n, p in TARGET.state_dict().items()}
    draft = student(TARGET, (0,))
    log = distill.distill(draft, TARGET, steps=40, data=data, teacher_k=4, lr=3e-3, progress=False)
    assert np.mean(log.losses[-5:]) < 0.8 * np.mean(log.losses[:5])
    assert all(torch.equal(p, before[n]) for n, p in TARGET.state_dict().items())  # the target is untouched


def test_the_larger_free_form_set_is_committed_and_never_touches_a_held_out_subject():
    from tests.notebook_utils import tool

    make_prompts = tool("make_prompts")
    more = prompt_set("more")
    assert make_prompts.build()["more"] == more  # the file is what the tool writes
    seqs, prompt_lengths = distill.sequences("more")
    assert len(seqs) == len(prompt_lengths) == len(more) > 500
    with np.load(distill.DATA / distill.SETS["more"]) as z:
        assert z["kinds"].tolist() == [p["kind"] for p in more]  # answers in the prompts' order
    assert sum(len(s) - p for s, p in zip(seqs, prompt_lengths, strict=True)) > 100_000  # generated tokens
    forms = make_prompts.STORY_FORMS + make_prompts.QA_FORMS
    subjects = {text[len(head):len(text) - len(tail)]
                for p in prompt_set("heldout") if p["kind"] in ("story", "qa")
                for form in forms for head, tail in [form.split("{}")]
                for text in [p["text"]] if text.startswith(head) and text.endswith(tail)}
    assert len(subjects) == 16
    clashes = [(s, p["text"]) for s in subjects for p in more if s in p["text"]]
    assert not clashes, clashes[:3]
    with pytest.raises(ValueError, match="name"):
        distill.sequences("heldout")
