"""Every drafter through the one loop, from the registry in tests/conftest.py: greedy identity on a tiny
model and on the real one, the calibrated sampling test, and a planted wrong-q bug that the same test must
flag; then each drafter's own mechanics (lookup lengths, the suffix trie, the lookahead pool, the EAGLE
confidence gate, Medusa's tree depth) and the trained drafters against their untrained starting points."""

from collections import Counter

import numpy as np
import pytest
import torch

from specnotes import engine, prompts, stats, verify
from specnotes.decode import prompt_ids
from specnotes.drafters import (
    Draft,
    Drafter,
    DraftModel,
    EagleLite,
    EarlyExit,
    Feedback,
    Lookahead,
    Medusa,
    PromptLookup,
    Suffix,
    Wrapper,
)
from specnotes.training.distilled import load_distilled_draft
from tests.conftest import TREES, WITH_Q, make_drafter

# --------------------------------------------------------------------------- the registry, every drafter


def test_the_registry_holds_every_drafter_the_package_exports():
    import specnotes.drafters as d
    from specnotes import adaptive
    from tests.conftest import DRAFTER_NAMES, _registry, make_drafter

    assert set(DRAFTER_NAMES) == set(_registry())
    from specnotes import models

    target = models.tiny_llama(seed=0, layers=4)
    built = {type(make_drafter(name, target)) for name in DRAFTER_NAMES}
    exported = {getattr(d, n) for n in d.__all__ if isinstance(getattr(d, n), type)
                and issubclass(getattr(d, n), Drafter) and getattr(d, n) not in (Drafter, Wrapper)}
    missing = exported - built - {EarlyExit} | ({adaptive.AdaptiveK} - built)
    assert not missing, f"drafters with no registry entry: {sorted(c.__name__ for c in missing)}"


@pytest.mark.parametrize("k", [1, 4])
def test_greedy_equals_the_targets_own_greedy_on_a_tiny_model(tiny, drafter_name, k):
    reference = tiny.greedy(tiny.target, tiny.prompt, 30)
    result = engine.generate(tiny.target, make_drafter(drafter_name, tiny.target), tiny.prompt, 30, k=k,
                             eos_token_id=-1)
    assert result.tokens == reference
    assert all(r.accepted <= len(r.drafted) for r in result.trace)
    # k means one thing for every drafter: at most k tokens (a tree: k levels; its judged line is one
    # branch, so no longer than its depth); the engine only cuts drafts to the tokens left, never to k
    assert all(len(r.drafted) <= k for r in result.trace), [len(r.drafted) for r in result.trace]


def test_every_propose_has_the_protocols_signature():
    import inspect

    from specnotes import adaptive, drafter_table  # noqa: F401  (their drafters count too)

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    want = [(p.name, p.default) for p in inspect.signature(Drafter.propose).parameters.values()]
    for cls in subclasses(Drafter):
        if cls.__module__.startswith("specnotes"):
            got = [(p.name, p.default) for p in inspect.signature(cls.propose).parameters.values()]
            assert got == want, f"{cls.__name__}.propose{inspect.signature(cls.propose)}"


@pytest.fixture(scope="module")
def float64_target():
    from specnotes import models

    return models.tiny_llama(seed=0, layers=4).double()  # compare the bookkeeping, not fp32 rounding


@pytest.mark.parametrize("do_sample", [False, True], ids=["greedy", "sampled"])
def test_after_every_round_the_kv_cache_equals_a_fresh_prefill(tiny, float64_target, drafter_name, do_sample):
    """Rollback (a chain's crop) and compaction (a tree's accepted branch) through the one loop, for every
    drafter: after each round the target's cache holds exactly the committed tokens but the last."""
    from specnotes.passes import forward_pass

    target = float64_target
    drafter = make_drafter(drafter_name, target)
    state = engine.start(target, drafter, tiny.prompt, 24, k=4, do_sample=do_sample, seed=0, eos_token_id=-1)
    while not state.done:
        engine.speculative_round(target, drafter, state)
        with torch.no_grad():
            _, fresh = forward_pass(target, torch.tensor([state.tokens[:-1]]))
        assert state.cache.get_seq_length() == fresh.get_seq_length() == len(state.tokens) - 1
        for a, b in zip(state.cache.layers, fresh.layers, strict=True):
            assert (a.keys - b.keys).abs().max() < 1e-6 and (a.values - b.values).abs().max() < 1e-6


REAL_TEXTS = {
    "copy": "Copy this exactly: the quick brown fox jumps over the lazy dog, and the lazy dog sleeps on.",
    "free": "Write two sentences about a lighthouse.",
}


@pytest.mark.parametrize("kind", list(REAL_TEXTS))
def test_greedy_equals_transformers_greedy_on_the_real_model(real, tiny, drafter_name, kind):
    model, tokenizer = real
    ids = prompt_ids(tokenizer, REAL_TEXTS[kind])
    reference = tiny.greedy(model, ids, 24, eos=model.generation_config.eos_token_id)
    result = engine.generate(model, make_drafter(drafter_name, model, real=True), ids, 24, k=3)
    assert result.tokens == reference


def test_sampled_tokens_follow_the_targets_exact_distribution(tiny, drafter_name):
    # 500 generations: an exact sampler passes at any size; the planted bug below gets 1,000 to show the
    # test has the power to fail (at 500 the weakest of them, prompt lookup's, already sits at p ~ 1e-8)
    rows = tiny.sampled(lambda: make_drafter(drafter_name, tiny.small_target), n=500)
    _, p_value = stats.chi2_test(rows, tiny.exact)
    assert p_value > stats.FLAG_P  # false alarms: 1 in a million


class ReportsUniformQ(Wrapper):
    """A planted bug: the wrapped drafter draws its tokens as it always does, then reports a flat q, so the
    rejection rule divides by the wrong probability."""

    def propose(self, tokens, k, sampler):
        draft = self.inner.propose(tokens, k, sampler)
        vocab = sampler.probs(torch.zeros(1, 6)).shape[-1]
        return Draft(draft.tokens, torch.full((len(draft.tokens), vocab), 1.0 / vocab))


def walk_with_a_flat_q(tree, probs, uniform, draw):
    """The same planted bug in the tree rule: each candidate is judged as if it had been drawn from a flat
    q (accept with min(1, p(x)/q(x)), then the residual max(0, p - q)), not from the point mass it is."""
    node, path = -1, []
    while True:
        p = probs[node + 1].clone()
        q = torch.full_like(p, 1.0 / p.shape[-1])
        for child in tree.children(node):
            x = tree.tokens[child]
            if uniform() < min(1.0, float(p[x] / q[x])):
                path.append(child)
                node = child
                break
            rest = torch.clamp(p - q, min=0)
            p = rest / rest.sum() if rest.sum() > 0 else p
        else:
            return path, draw(p)


def test_a_planted_wrong_q_fails_the_same_test(tiny, drafter_name, monkeypatch):
    if drafter_name in TREES:  # tree candidates are point masses and carry no q: the bug lives in the walk
        monkeypatch.setattr(verify.TokenWise, "tree", lambda self, tree, logits, sampler: walk_with_a_flat_q(
            tree, sampler.probs(logits), lambda: float(sampler.uniform(1)[0]), sampler.draw))
        make = lambda: make_drafter(drafter_name, tiny.small_target)  # noqa: E731
    else:
        make = lambda: ReportsUniformQ(make_drafter(drafter_name, tiny.small_target))  # noqa: E731
    _, p_value = stats.chi2_test(tiny.sampled(make, seed0=50_000), tiny.exact)
    assert p_value < stats.FLAG_P, f"{drafter_name}: the planted bug was not flagged (p = {p_value:.2g})"


def test_sampling_with_temperature_and_top_k_keeps_the_processed_distribution(tiny):
    """q must be the draft's *processed* distribution: temperature 0.7 and top-k 4 on both models."""
    exact = stats.exact_first_tokens(tiny.small_target, tiny.small_prompt, tiny.LENGTH, 0.7, top_k=4)
    rows = tiny.sampled(lambda: DraftModel(tiny.small_draft), seed0=10_000, temperature=0.7, top_k=4)
    assert stats.chi2_test(rows, exact)[1] > stats.FLAG_P


@pytest.mark.parametrize("name", WITH_Q)
def test_a_drafter_with_q_is_checked_only_when_sampling(tiny, name):
    drafter = make_drafter(name, tiny.target)
    assert engine.generate(tiny.target, drafter, tiny.prompt, 10, k=3).tokens == tiny.greedy(
        tiny.target, tiny.prompt, 10)


# --------------------------------------------------------------------------- each drafter's mechanics


def feedback(tokens, before, drafted, accepted, predictions=None):
    return Feedback(list(tokens), before, list(drafted), accepted, predictions)


def test_prompt_lookup_prefers_the_longest_tail_and_a_recent_full_match():
    lookup = PromptLookup(max_ngram=3)
    tokens = [1, 2, 3, 9, 9, 7, 2, 3, 4, 5, 6, 1, 2, 3]
    assert lookup.lookup(tokens, 3) == [9, 9, 7]  # tail [1, 2, 3] matched at the start
    assert lookup.lookup([4, 5, 6, 7, 4, 5, 8, 8, 8, 4, 5], 2) == [8, 8]  # the most recent [4, 5]
    assert lookup.lookup([1, 2, 3], 4) == []


def test_prompt_lookup_grows_after_full_acceptance_and_shrinks_after_a_miss():
    lookup = PromptLookup(num_tokens=4, grow=4, max_tokens=12)
    tokens = list(range(20)) * 3
    lookup.reset(tokens)
    draft = lookup.propose(tokens, k=50, sampler=None).tokens
    assert len(draft) == 4  # its own length, under the cap k
    assert lookup.propose(tokens, k=3, sampler=None).tokens == draft[:3]  # and never past the cap
    lookup.update(feedback(tokens, len(tokens), draft, 4))
    draft = lookup.propose(tokens, k=50, sampler=None).tokens
    assert len(draft) == 8
    lookup.update(feedback(tokens, len(tokens), draft, 1))
    assert len(lookup.propose(tokens, k=50, sampler=None).tokens) == 2


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
    assert s.propose([1, 2, 3, 4, 5, 6, 9, 9, 1, 2], 5, None).tokens == [3, 4, 5, 6]  # 2-token match
    s.update(feedback([1, 2, 3, 4, 5, 6, 9, 9, 1, 2, 3, 4], 10, [3, 4, 5, 6], 2))
    s.reset([7, 7])  # a new request: the last one's output [3, 4] is now history
    assert s.propose([7, 7, 3], 5, None).tokens == [4]
    assert Suffix(remember=False).history.root == [0, {}]


def test_lookahead_pool_holds_the_targets_predictions_and_chains_them():
    la = Lookahead(n=3, window=2)
    la.reset([1, 2, 3])
    # drafted 10, 11 after [1, 2, 3]; the target says 10 after (2, 3), 13 after (3, 10), 12 after (10, 11):
    # 10 kept, 11 corrected to 13
    la.update(feedback([1, 2, 3, 10, 13], 3, [10, 11], 1, predictions=[10, 13, 12]))
    assert la.pool == {(2, 3): 10, (3, 10): 13, (10, 11): 12}
    assert la.guess == [12]  # the prediction past the correction is the next Jacobi guess
    assert la.propose([1, 2, 3], 5, None).tokens == [10, 13]  # chained until the pool has no entry


def test_adaptive_k_keeps_the_wrapped_drafters_needs(tiny):
    from specnotes import adaptive

    wrapped = adaptive.AdaptiveK(Lookahead(), adaptive.Fixed(3))
    assert wrapped.needs == Lookahead.needs == {"predictions"}
    engine.generate(tiny.target, wrapped, tiny.prompt, 20, eos_token_id=-1)
    assert wrapped.drafter.pool  # the pool filled through the wrapper (it used to stay empty)


def test_the_eagle_confidence_gate_keeps_identity_and_drafts_only_when_sure(tiny):
    from tests.conftest import _eagle

    reference = tiny.greedy(tiny.target, tiny.prompt, 30)
    counts = {}
    for gate in (0.0, 0.2, 0.99):
        for k in (1, 3):
            res = engine.generate(tiny.target, _eagle(tiny.target, False, k=k, min_confidence=gate),
                                  tiny.prompt, 30, eos_token_id=-1)
            assert res.tokens == reference, (gate, k)
            counts[gate, k] = int(res.drafted_counts.sum())
    # gate 0 never stops a draft; a gate near 1 leaves a random draft nothing it is sure of
    assert counts[0.0, 3] > counts[0.2, 3] >= counts[0.99, 3] == 0 and counts[0.99, 1] == 0
    with pytest.raises(ValueError, match="min_confidence"):
        _eagle(tiny.target, False, min_confidence=1.0)


def test_k_caps_eagle_lite_and_medusas_tree_depth(tiny):
    from tests.conftest import _eagle, _heads

    medusa = Medusa(tiny.target, heads=_heads(tiny.target, False), widths=(3, 2, 2))
    for drafter in (medusa, _eagle(tiny.target, False, k=3)):
        res = engine.generate(tiny.target, drafter, tiny.prompt, 30, k=1, eos_token_id=-1)
        assert res.drafted_counts.max() == 1 and res.tokens == tiny.greedy(tiny.target, tiny.prompt, 30)


def test_medusa_refuses_a_tree_deeper_than_its_heads(tiny):
    from specnotes.training.medusa import new_heads

    with pytest.raises(ValueError, match="widths"):
        Medusa(tiny.target, heads=new_heads(tiny.target, 2), widths=(2, 2, 2))
    with pytest.raises(ValueError, match="n_heads"):
        new_heads(tiny.target, 0)


def test_draft_model_rolls_its_own_cache_back(tiny):
    from specnotes import models, surgery
    from specnotes.passes import forward_pass

    target = models.tiny_llama(seed=0, layers=4).double()  # float64: compare bookkeeping, not rounding
    drafter = DraftModel(surgery.truncated(target, 2))
    result = engine.generate(target, drafter, tiny.prompt, 30, k=6, eos_token_id=-1)
    full = tiny.prompt[0].tolist() + result.tokens
    assert drafter.cached <= len(full) - 1
    with torch.no_grad():
        _, fresh = forward_pass(drafter.model, torch.tensor([full[: drafter.cached]]))
    for a, b in zip(drafter.cache.layers, fresh.layers, strict=True):
        assert (a.keys - b.keys).abs().max() < 1e-5


def test_bad_arguments_are_refused_clearly():
    with pytest.raises(ValueError, match=r"n \(the n-gram length\) must be >= 2"):
        Lookahead(n=1)
    with pytest.raises(ValueError, match="max_match"):
        Suffix(max_match=0)


# --------------------------------------------------------------------------- the trained drafters, real model


def test_the_distilled_draft_works_as_a_transformers_assistant_model(real):
    model, tokenizer = real
    draft = load_distilled_draft(model)
    ids = prompt_ids(tokenizer, "Write a Python function that reverses a list.")
    kwargs = dict(attention_mask=torch.ones_like(ids), max_new_tokens=32, do_sample=False)
    plain = model.generate(ids, **kwargs)
    assisted = model.generate(ids, assistant_model=draft, **kwargs)
    assert assisted.tolist() == plain.tolist()


def _alpha(model, tokenizer, make, texts, n=32, k=3):
    accepted = judged = 0
    for text in texts:
        r = engine.generate(model, make(), prompt_ids(tokenizer, text), n, k=k)
        accepted += int(r.accepted_counts.sum())
        judged += sum(x.judged for x in r.trace)
    return accepted / judged


def test_the_trained_drafters_beat_their_untrained_starting_points(real):
    """Training did something: on held-out free-form prompts the trained exit accepts more than the raw
    exit, the distilled draft accepts a real share of its drafts, and the committed EagleLite's one guess
    per round is accepted far more often than an untrained one's (the confidence gate raises α further)."""
    from specnotes.training.eagle import new_model

    model, tokenizer = real
    heldout = prompts.prompt_set("heldout")
    stories = [p["text"] for p in heldout if p["kind"] == "story"][:2]
    free = [next(p["text"] for p in heldout if p["kind"] == kind) for kind in ("story", "qa")]
    alphas = {name: _alpha(model, tokenizer, make, stories) for name, make in {
        "raw exit": lambda: EarlyExit(model), "adapter": lambda: EarlyExit(model, adapter="trained"),
        "distilled": lambda: DraftModel(load_distilled_draft(model))}.items()}
    untrained = new_model(model).eval()
    alphas |= {name: _alpha(model, tokenizer, make, free, n=48, k=1) for name, make in {
        "untrained eagle": lambda: EagleLite(model, model=untrained, k=1),
        "eagle": lambda: EagleLite(model, k=1),
        "gated eagle": lambda: EagleLite(model, k=1, min_confidence=0.3)}.items()}
    assert alphas["adapter"] > alphas["raw exit"] + 0.1, alphas
    assert alphas["distilled"] > 0.2, alphas
    assert alphas["eagle"] > max(0.3, alphas["untrained eagle"] + 0.2), alphas
    assert alphas["gated eagle"] > alphas["eagle"] + 0.05, alphas


def _random_windows(n=12, length=24, seed=0):
    from specnotes import distill

    rng = np.random.default_rng(seed)
    return distill.Windows(rng.integers(0, 256, (n, length)), rng.integers(0, 256, (n, length)),
                           np.ones((n, length), dtype=bool))


def test_medusa_and_eagle_training_lower_their_loss_and_leave_the_target_alone(tiny, tmp_path, monkeypatch):
    from specnotes.training import eagle, medusa

    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))
    before = {n: p.clone() for n, p in tiny.target.state_dict().items()}
    data = _random_windows()
    _, log = medusa.train_medusa(tiny.target, 2, steps=40, data=data, teacher_k=4, positions=64, lr=3e-3,
                                 progress=False)
    assert np.mean(log.losses[-5:]) < 0.9 * np.mean(log.losses[:5])
    _, log = eagle.train_eagle(tiny.target, steps=30, data=data, vocab=None, batch=4, lr=3e-3, progress=False)
    assert np.mean(log.losses[-5:]) < 0.9 * np.mean(log.losses[:5])
    assert all(torch.equal(p, before[n]) for n, p in tiny.target.state_dict().items())
