"""Notebook 06's drafters: greedy identity (tiny models and the real one), the calibrated sampling test for
every drafter with a real q (and a planted wrong-q bug that fails it), the suffix trie against brute-force
counts, the lookahead pool, and the distilled draft inside transformers' own assisted generation."""

from collections import Counter

import numpy as np
import pytest
import torch

from specnotes import distill, engine, stats
from specnotes.decode import prompt_ids
from specnotes.drafters import DraftModel, EarlyExit, Lookahead, Suffix, load_distilled_draft
from specnotes.drafters.distilled import student
from specnotes.drafters.early_exit import exit_model
from tests.test_engine import EXACT, PROMPT, SMALL_TARGET, TARGET, hf_greedy, sampled


def noisy_exit(target, n_layers):
    """An exit model whose adapter is not the identity, as after training."""
    model = exit_model(target, n_layers, rank=8)
    with torch.no_grad():
        model.model.norm.up.weight.normal_(0, 0.5, generator=torch.Generator().manual_seed(0))
    return model


TINY = {
    "suffix": Suffix,
    "suffix, short drafts": lambda: Suffix(max_tokens=2, min_prob=0.0),
    "lookahead": Lookahead,
    "lookahead, 2-grams, no window": lambda: Lookahead(n=2, window=0),
    "early exit": lambda: EarlyExit(TARGET, 2),
    "early exit + adapter": lambda: EarlyExit(TARGET, 2, adapter=noisy_exit(TARGET, 2)),
    "distilled-style student": lambda: DraftModel(student(TARGET, (0, 3))),
}


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("drafter", list(TINY))
def test_greedy_equals_the_targets_own_greedy_on_tiny_models(drafter, k):
    reference = hf_greedy(TARGET, PROMPT, 40)
    result = engine.generate(TARGET, TINY[drafter](), PROMPT, 40, k=k, eos_token_id=-1)
    assert result.tokens == reference


REAL_TEXTS = {
    "copy": "Copy this exactly: the quick brown fox jumps over the lazy dog, and the lazy dog sleeps on.",
    "free": "Write two sentences about a lighthouse.",
}


@pytest.fixture(scope="module")
def real_drafters(real):
    model, _ = real
    distilled = load_distilled_draft(model)
    return {
        "suffix": Suffix, "lookahead": Lookahead,
        "early exit": lambda: EarlyExit(model),
        "early exit + trained adapter": lambda: EarlyExit(model, adapter="trained"),
        "distilled draft": lambda: DraftModel(distilled),
    }


@pytest.mark.parametrize("kind", list(REAL_TEXTS))
def test_every_drafter_keeps_greedy_identity_on_the_real_model(real, real_drafters, kind):
    model, tokenizer = real
    ids = prompt_ids(tokenizer, REAL_TEXTS[kind])
    reference = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=24, do_sample=False)
    reference = reference[0, ids.shape[1]:].tolist()
    for name, make in real_drafters.items():
        result = engine.generate(model, make(), ids, 24, k=3)
        assert result.tokens == reference, name


@pytest.mark.parametrize("kind", list(REAL_TEXTS))
def test_tree_drafters_keep_greedy_identity_on_the_real_model(real, kind):
    """Medusa's trees (several shapes, tree attention mask, KV compaction) and EagleLite's chains, with
    the committed weights, against transformers' own greedy output."""
    from specnotes import tree
    from specnotes.drafters import EagleLite, Medusa
    from specnotes.drafters.medusa import load_medusa_heads

    model, tokenizer = real
    ids = prompt_ids(tokenizer, REAL_TEXTS[kind])
    reference = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=24, do_sample=False)
    reference = reference[0, ids.shape[1]:].tolist()
    heads = load_medusa_heads(model)
    for widths in ((1,), (3, 2, 2), (4, 1, 1)):
        result = tree.generate(model, Medusa(model, heads=heads, widths=widths), ids, 24)
        assert result.tokens == reference, widths
    assert tree.generate(model, EagleLite(model, k=3), ids, 24).tokens == reference
    assert tree.generate(model, EagleLite(model, k=2, vocab=4096), ids, 24).tokens == reference


def test_the_distilled_draft_works_as_a_transformers_assistant_model(real):
    model, tokenizer = real
    draft = load_distilled_draft(model)
    ids = prompt_ids(tokenizer, "Write a Python function that reverses a list.")
    kwargs = dict(attention_mask=torch.ones_like(ids), max_new_tokens=32, do_sample=False)
    plain = model.generate(ids, **kwargs)
    assisted = model.generate(ids, assistant_model=draft, **kwargs)
    assert assisted.tolist() == plain.tolist()


def test_the_trained_drafters_beat_their_untrained_starting_points(real):
    """Training did something: on held-out free-form prompts the trained exit accepts more than the raw
    exit, and the distilled draft accepts a real share of its drafts."""
    model, tokenizer = real
    prompts = [p for p in distill.prompts("heldout") if p["kind"] == "story"][:2]
    alphas = {}
    makers = {"raw": lambda: EarlyExit(model), "adapter": lambda: EarlyExit(model, adapter="trained"),
              "distilled": lambda: DraftModel(load_distilled_draft(model))}
    for name, make in makers.items():
        accepted = judged = 0
        for p in prompts:
            r = engine.generate(model, make(), prompt_ids(tokenizer, p["text"]), 32, k=3)
            accepted += int(r.accepted_counts.sum())
            judged += sum(x.judged for x in r.trace)
        alphas[name] = accepted / judged
    assert alphas["adapter"] > alphas["raw"] + 0.1, alphas
    assert alphas["distilled"] > 0.2, alphas


# --------------------------------------------------------------------------- sampling: q must be honest

SMALL_EXIT = noisy_exit(SMALL_TARGET, 1)  # built once: the factories below run 2,000 times
SMALL_STUDENT = student(SMALL_TARGET, (1,))
SAMPLING = {
    "early exit + adapter": lambda: EarlyExit(SMALL_TARGET, 1, adapter=SMALL_EXIT),
    "distilled-style student": lambda: DraftModel(SMALL_STUDENT),
    "lookahead": Lookahead,
    "suffix": Suffix,
}


@pytest.mark.parametrize("drafter", list(SAMPLING))
def test_sampled_tokens_follow_the_targets_exact_distribution(drafter):
    _, p_value = stats.chi2_test(sampled(SAMPLING[drafter], seed0=50_000), EXACT)
    assert p_value > stats.FLAG_P


class WrongQ(DraftModel):
    """A planted bug: the draft samples from q but reports a flattened q to the verifier."""

    def propose(self, tokens, k, sampler):
        draft = super().propose(tokens, k, sampler)
        return draft._replace(q=torch.full_like(draft.q, 1.0 / draft.q.shape[-1]))


def test_a_drafter_that_misreports_q_fails_the_same_test():
    _, p_value = stats.chi2_test(sampled(lambda: WrongQ(SMALL_EXIT), seed0=50_000), EXACT)
    assert p_value < stats.FLAG_P


# --------------------------------------------------------------------------- suffix trie and lookahead


def test_suffix_trie_counts_every_substring_like_brute_force():
    rng = np.random.default_rng(0)
    seq = rng.integers(0, 4, 60).tolist()
    trie = Suffix(max_match=3, max_tokens=2).local  # depth 5
    for cut in (7, 8, 30, 60):  # grown in steps, as the engine grows it
        trie.extend(seq[:cut])
    brute = Counter(tuple(seq[i:i + d]) for d in range(1, 6) for i in range(len(seq) - d + 1))

    def walk(node, prefix):
        for tok, child in node[1].items():
            path = (*prefix, tok)
            yield path, child[0]
            yield from walk(child, path)

    assert dict(walk(trie.root, ())) == dict(brute)


def test_suffix_follows_the_longest_match_and_remembers_earlier_outputs():
    s = Suffix(max_match=4, max_tokens=8, factor=2.0, min_prob=0.0)
    s.reset([1, 2, 3, 4, 5, 6, 9, 9, 1, 2])
    assert s.propose([1, 2, 3, 4, 5, 6, 9, 9, 1, 2], 5).tokens == [3, 4, 5, 6]  # 2-token match: 4 tokens
    s.update([1, 2, 3, 4, 5, 6, 9, 9, 1, 2, 3, 4], 2)
    s.reset([7, 7])  # a new request: the last one's output [3, 4] is now history
    assert s.propose([7, 7, 3], 5).tokens == [4]
    assert Suffix(remember=False).history.root == [0, {}]


def test_lookahead_pool_holds_the_targets_predictions_and_chains_them():
    la = Lookahead(n=3, window=2)
    la.reset([1, 2, 3])
    # drafts 10, 11; the target says 10 after (2, 3), 13 after (3, 10) and 12 after (10, 11)
    la.observe([1, 2, 3], [3, 10, 11], [10, 13, 12])
    assert la.pool == {(2, 3): 10, (3, 10): 13, (10, 11): 12}
    assert la.propose([1, 2, 3], 5).tokens == [10, 13]  # chained until the pool has no entry
    la.update([1, 2, 3, 10, 13], 1)  # 10 kept, 11 corrected to 13; the prediction past it is the guess
    assert la.guess == [12]


def test_trained_weights_round_trip_through_save_and_load(tmp_path):
    model = exit_model(TARGET, 2, rank=8)
    with torch.no_grad():
        model.model.norm.up.weight.fill_(0.25)
    path = distill.save_trainable(model, tmp_path / "a.safetensors", {"n_layers": 2})
    fresh = exit_model(TARGET, 2, rank=8)
    assert distill.load_trainable(fresh, path) == {"n_layers": "2"}
    assert torch.equal(fresh.model.norm.up.weight, model.model.norm.up.weight)
    with pytest.raises(ValueError, match="does not have"):
        distill.load_trainable(exit_model(TARGET, 2, rank=None), path)


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


def test_the_trained_eaglelite_guesses_the_target_on_held_out_free_form_text(real):
    """The committed EagleLite is a trained one: on held-out story and qa prompts its one guess per round
    is accepted far more often than an untrained EagleLite's, and the confidence gate raises α further."""
    from specnotes import tree
    from specnotes.drafters import EagleLite
    from specnotes.drafters.eagle import new_model

    model, tokenizer = real
    heldout = distill.prompts("heldout")
    prompts = [next(p for p in heldout if p["kind"] == kind) for kind in ("story", "qa")]

    def alpha(make):
        accepted = judged = 0
        for p in prompts:
            r = tree.generate(model, make(), prompt_ids(tokenizer, p["text"]), 48)
            accepted += int(r.accepted_counts.sum())
            judged += int(r.position_counts[0].sum())
        return accepted / judged

    untrained = new_model(model).eval()
    alphas = {"untrained": alpha(lambda: EagleLite(model, model=untrained, k=1)),
              "trained": alpha(lambda: EagleLite(model, k=1)),
              "gated": alpha(lambda: EagleLite(model, k=1, min_confidence=0.3))}
    assert alphas["trained"] > max(0.3, alphas["untrained"] + 0.2), alphas
    assert alphas["gated"] > alphas["trained"] + 0.05, alphas


def test_the_larger_free_form_set_is_committed_and_never_touches_a_held_out_subject():
    from tests.notebook_utils import tool

    make_prompts = tool("make_prompts")
    more = distill.prompts("more")
    assert make_prompts.build()["more"] == more  # the file is what the tool writes
    seqs, prompt_lengths = distill.sequences("more")
    assert len(seqs) == len(prompt_lengths) == len(more) > 500
    with np.load(distill.DATA / distill.SETS["more"]) as z:
        assert z["kinds"].tolist() == [p["kind"] for p in more]  # answers in the prompts' order
    assert sum(len(s) - p for s, p in zip(seqs, prompt_lengths, strict=True)) > 100_000  # generated tokens
    forms = make_prompts.STORY_FORMS + make_prompts.QA_FORMS
    subjects = {text[len(head):len(text) - len(tail)]
                for p in distill.prompts("heldout") if p["kind"] in ("story", "qa")
                for form in forms for head, tail in [form.split("{}")]
                for text in [p["text"]] if text.startswith(head) and text.endswith(tail)}
    assert len(subjects) == 16
    clashes = [(s, p["text"]) for s in subjects for p in more if s in p["text"]]
    assert not clashes, clashes[:3]
    with pytest.raises(ValueError, match="name"):
        distill.sequences("heldout")


def test_bad_arguments_are_refused_clearly():
    with pytest.raises(ValueError, match="layers"):
        student(TARGET, (0, 9))
    with pytest.raises(ValueError, match=r"n \(the n-gram length\) must be >= 2"):
        Lookahead(n=1)
    with pytest.raises(ValueError, match="max_match"):
        Suffix(max_match=0)
    with pytest.raises(ValueError, match="split"):
        distill.prompts("test")
