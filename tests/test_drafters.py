"""Notebook 06's drafters: greedy identity (tiny models and the real one), the calibrated sampling test for
every drafter with a real q (and a planted wrong-q bug that fails it), the suffix trie against brute-force
counts, the lookahead pool, and the distilled draft inside transformers' own assisted generation."""

from collections import Counter

import numpy as np
import pytest
import torch

from specnotes import engine, stats
from specnotes.decode import prompt_ids
from specnotes.drafters import DraftModel, EarlyExit, Lookahead, Suffix, load_distilled_draft
from specnotes.drafters.early_exit import exit_model
from specnotes.prompts import prompt_set
from specnotes.surgery import student
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
    prompts = [p for p in prompt_set("heldout") if p["kind"] == "story"][:2]
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


def test_the_trained_eaglelite_guesses_the_target_on_held_out_free_form_text(real):
    """The committed EagleLite is a trained one: on held-out story and qa prompts its one guess per round
    is accepted far more often than an untrained EagleLite's, and the confidence gate raises α further."""
    from specnotes import tree
    from specnotes.drafters import EagleLite
    from specnotes.drafters.eagle import new_model

    model, tokenizer = real
    heldout = prompt_set("heldout")
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


def test_bad_arguments_are_refused_clearly():
    with pytest.raises(ValueError, match=r"n \(the n-gram length\) must be >= 2"):
        Lookahead(n=1)
    with pytest.raises(ValueError, match="max_match"):
        Suffix(max_match=0)
