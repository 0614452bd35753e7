"""The engine: greedy identity with the target's own generate, the sampled distribution against an exact
enumeration (and a planted bug that fails it), KV rollback, and clear errors."""


import numpy as np
import pytest
import torch

from specnotes import engine, models, stats, surgery
from specnotes.decode import forward_pass, plain_generate, prompt_ids
from specnotes.drafters import Draft, DraftModel, PromptLookup

TARGET = models.tiny_llama(seed=0, layers=4)
PROMPT = torch.tensor([[5, 9, 2, 77, 5, 9, 2, 31, 5, 9]])


def hf_greedy(model, ids, n, eos=None):
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                         pad_token_id=model.config.pad_token_id, eos_token_id=eos)
    return out[0, ids.shape[1]:].tolist()


DRAFTERS = {
    "independent draft model": lambda: DraftModel(models.tiny_llama(seed=1, layers=1, hidden_size=32)),
    "first 2 layers of the target": lambda: DraftModel(surgery.truncated(TARGET, 2)),
    "the target itself": lambda: DraftModel(TARGET),
    "prompt lookup": lambda: PromptLookup(),
    "prompt lookup, fixed length": lambda: PromptLookup(adaptive=False, num_tokens=4),
}


@pytest.mark.parametrize("k", [1, 3, 8])
@pytest.mark.parametrize("drafter", list(DRAFTERS))
def test_greedy_equals_the_targets_own_greedy_on_tiny_models(drafter, k):
    reference = hf_greedy(TARGET, PROMPT, 40)
    result = engine.generate(TARGET, DRAFTERS[drafter](), PROMPT, 40, k=k, eos_token_id=-1)
    assert result.tokens == reference
    assert result.target_calls == len(result.trace)  # one pass per round; the first reads the prompt too


def test_acceptance_bookkeeping_is_consistent():
    drafter = DRAFTERS["first 2 layers of the target"]()
    result = engine.generate(TARGET, drafter, PROMPT, 40, k=4, eos_token_id=-1)
    assert len(result.tokens) == sum(r.accepted + 1 for r in result.trace)  # no EOS: nothing cut
    assert all(r.accepted <= len(r.drafted) <= 4 for r in result.trace)
    assert 0 <= result.alpha <= 1 and result.per_position_acceptance.shape == (4,)
    self_draft = engine.generate(TARGET, DraftModel(TARGET), PROMPT, 40, k=4, eos_token_id=-1)
    assert self_draft.alpha == 1.0 and self_draft.tokens_per_call > 4  # a perfect draft: k+1 per pass


def test_an_eos_inside_the_accepted_drafts_ends_the_trace_consistently():
    free = hf_greedy(TARGET, PROMPT, 30)
    eos = free[9]
    result = engine.generate(TARGET, DraftModel(TARGET), PROMPT, 30, k=6, eos_token_id=eos)
    last = result.trace[-1]
    assert result.tokens == free[: free.index(eos) + 1]
    assert last.kind == "eos" and last.drafted[-1] == eos and last.next_token is None
    emitted = sum(r.accepted + (r.next_token is not None) for r in result.trace)
    assert emitted == len(result.tokens)
    assert last.cache_len == PROMPT.shape[1] + len(result.tokens) - 1


def test_rounds_without_a_draft_are_plain_steps():
    result = engine.generate(TARGET, PromptLookup(), torch.tensor([[1, 2, 3, 4]]), 5, eos_token_id=-1)
    assert {r.kind for r in result.trace if not r.drafted} == {"plain"}


def test_generation_stops_at_eos_like_generate():
    free = hf_greedy(TARGET, PROMPT, 30)
    eos = free[12]
    expected = free[: free.index(eos) + 1]
    for drafter in (DraftModel(TARGET), PromptLookup()):
        result = engine.generate(TARGET, drafter, PROMPT, 30, k=5, eos_token_id=eos)
        assert result.tokens == expected and result.stopped_on_eos


@pytest.mark.parametrize("k", [1, 3, 8])
@pytest.mark.parametrize("drafter", ["prompt lookup", "8-layer self-draft"])
@pytest.mark.parametrize("kind", ["copy", "free"])
def test_greedy_equals_generate_on_the_real_model(real, drafter, k, kind):
    model, tokenizer = real
    text = {"copy": "Repeat exactly: the quick brown fox jumps over the lazy dog; the quick brown fox "
                    "jumps over the lazy dog.",
            "free": "Write two sentences about the sea."}[kind]
    ids = prompt_ids(tokenizer, text)
    reference = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=24, do_sample=False)
    drafter_obj = PromptLookup() if drafter == "prompt lookup" else DraftModel(surgery.truncated(model, 8))
    result = engine.generate(model, drafter_obj, ids, 24, k=k)
    assert result.tokens == reference[0, ids.shape[1]:].tolist()


# --------------------------------------------------------------------------- the sampled distribution

# Sized so the planted bug is flagged with room to spare (p ~ 1e-48 at these settings) while the
# exact engine sits at an ordinary p-value; 2,000 generations take about 15 s.
VOCAB, LENGTH, TEMPERATURE = 6, 3, 1.0
SMALL_TARGET = models.tiny_llama(seed=3, vocab_size=VOCAB, layers=2)
SMALL_DRAFT = models.tiny_llama(seed=4, vocab_size=VOCAB, layers=1, hidden_size=32)
SMALL_PROMPT = torch.tensor([[3, 1, 4]])
N_SAMPLES = 2000


EXACT = stats.exact_first_tokens(SMALL_TARGET, SMALL_PROMPT, LENGTH, TEMPERATURE)


def sampled(drafter_factory, seed0, n=N_SAMPLES):
    rows = [engine.generate(SMALL_TARGET, drafter_factory(), SMALL_PROMPT, LENGTH, k=2, do_sample=True,
                            temperature=TEMPERATURE, seed=seed0 + i, eos_token_id=-1).tokens
            for i in range(n)]
    return np.array(rows)


@pytest.mark.parametrize("drafter", ["draft model", "prompt lookup"])
def test_sampled_tokens_follow_the_targets_exact_distribution(drafter):
    factory = (lambda: DraftModel(SMALL_DRAFT)) if drafter == "draft model" else PromptLookup
    _, p_value = stats.chi2_test(sampled(factory, seed0=0), EXACT)
    assert p_value > stats.FLAG_P  # false alarms: 1 in a million


def test_sampling_with_temperature_and_top_k_keeps_the_processed_distribution():
    """q must be the draft's *processed* distribution: temperature 0.7 and top-k 4 on both models."""
    exact = stats.exact_first_tokens(SMALL_TARGET, SMALL_PROMPT, LENGTH, 0.7, top_k=4)
    rows = [engine.generate(SMALL_TARGET, DraftModel(SMALL_DRAFT), SMALL_PROMPT, LENGTH, k=2, do_sample=True,
                            temperature=0.7, top_k=4, seed=10_000 + i, eos_token_id=-1).tokens
            for i in range(N_SAMPLES)]
    _, p_value = stats.chi2_test(np.array(rows), exact)
    assert p_value > stats.FLAG_P


def test_the_target_residual_bug_fails_the_same_test(monkeypatch):
    monkeypatch.setattr(engine, "residual", lambda p, q: p)  # resample from p after a rejection
    tv, p_value = stats.chi2_test(sampled(lambda: DraftModel(SMALL_DRAFT), seed0=0), EXACT)
    assert p_value < stats.FLAG_P


# --------------------------------------------------------------------------- KV rollback


def cache_tensors(cache):
    return [(layer.keys, layer.values) for layer in cache.layers]


def test_rollback_leaves_the_cache_equal_to_a_fresh_prefill():
    # float64, so that what is compared is the bookkeeping, not fp32 rounding of differently shaped matmuls
    target = models.tiny_llama(seed=0, layers=4).double()
    rng = np.random.default_rng(0)
    vocab = target.config.vocab_size
    for _ in range(200):
        prompt = rng.integers(vocab, size=int(rng.integers(2, 24))).tolist()
        drafted = rng.integers(vocab, size=int(rng.integers(1, 9))).tolist()
        n = int(rng.integers(0, len(drafted) + 1))  # any accept pattern: a prefix of the drafts
        with torch.no_grad():
            _, cache = forward_pass(target, torch.tensor([prompt[:-1]]))
            _, cache = engine.verify_pass(target, cache, prompt[-1], drafted)
            engine.rollback(cache, len(drafted), n)
            _, fresh = forward_pass(target, torch.tensor([prompt + drafted[:n]]))
        assert cache.get_seq_length() == fresh.get_seq_length() == len(prompt) + n
        for (k1, v1), (k2, v2) in zip(cache_tensors(cache), cache_tensors(fresh), strict=True):
            assert (k1 - k2).abs().max() < 1e-5 and (v1 - v2).abs().max() < 1e-5


def test_draft_model_rolls_its_own_cache_back():
    target = models.tiny_llama(seed=0, layers=4).double()  # float64: compare bookkeeping, not rounding
    drafter = DraftModel(surgery.truncated(target, 2))
    result = engine.generate(target, drafter, PROMPT, 30, k=6, eos_token_id=-1)
    full = PROMPT[0].tolist() + result.tokens
    assert drafter.cached <= len(full) - 1
    with torch.no_grad():
        _, fresh = forward_pass(drafter.model, torch.tensor([full[: drafter.cached]]))
    for (k1, _), (k2, _) in zip(cache_tensors(drafter.cache), cache_tensors(fresh), strict=True):
        assert (k1 - k2).abs().max() < 1e-5


# --------------------------------------------------------------------------- errors and pieces


def test_batches_and_mismatched_vocabularies_are_refused_clearly():
    with pytest.raises(ValueError, match="Batch"):
        engine.generate(TARGET, PromptLookup(), PROMPT.repeat(2, 1), 5)
    other = DraftModel(models.tiny_llama(seed=1, vocab_size=100))
    with pytest.raises(ValueError, match="vocabulary"):
        engine.generate(TARGET, other, PROMPT, 5)
    with pytest.raises(ValueError, match="k"):
        engine.generate(TARGET, PromptLookup(), PROMPT, 5, k=0)


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
    assert len(lookup.propose(tokens, k=1).tokens) == 4  # its own length, not the engine's k
    lookup.update(tokens, 4)
    assert len(lookup.propose(tokens, k=1).tokens) == 8
    lookup.update(tokens, 1)
    assert len(lookup.propose(tokens, k=1).tokens) == 2


def test_top_k_and_top_p_processing_keep_the_right_tokens():
    sampler = engine.Sampler(do_sample=True, temperature=1.0, top_k=2, seed=0)
    probs = sampler.probs(torch.tensor([3.0, 1.0, 2.0, 0.0]))
    assert torch.count_nonzero(probs) == 2 and probs[1] == 0 and probs[3] == 0
    sampler = engine.Sampler(do_sample=True, top_p=0.5, seed=0)
    probs = sampler.probs(torch.log(torch.tensor([0.1, 0.6, 0.3])))
    assert probs.tolist() == pytest.approx([0.0, 1.0, 0.0])  # 0.6 alone crosses 0.5


# ------------------------------------------------------------------- nothing a drafter says is trusted


class Misreports(DraftModel):
    """A draft model that draws its tokens honestly and then reports q through `lie` (a course exercise
    gone wrong: writing a drafter means getting q right, and the engine is the last line of defence)."""

    def __init__(self, lie, name):
        super().__init__(models.tiny_llama(seed=1, layers=1, hidden_size=32))
        self.lie, self.name = lie, name

    def propose(self, tokens, k, sampler):
        draft = super().propose(tokens, k, sampler)
        return draft._replace(q=self.lie(draft))


LIES = {
    "half of q (every draft accepted twice as often)": (lambda d: 0.5 * d.q, "do not sum to 1"),
    "zeros (accepts every draft)": (lambda d: torch.zeros_like(d.q), "do not sum to 1"),
    "negative": (lambda d: d.q - 2 * d.q.max(), "negative"),
    "NaN": (lambda d: torch.full_like(d.q, float("nan")), "NaN"),
    "one row short": (lambda d: d.q[:-1], "shape"),
    "a vocabulary too wide": (lambda d: torch.nn.functional.pad(d.q, (0, 3)), "shape"),
    "no mass on the drafted token": (
        lambda d: torch.nn.functional.one_hot((torch.tensor(d.tokens) + 1) % d.q.shape[-1],
                                              d.q.shape[-1]).float(), "probability 0"),
    "a list, not a tensor": (lambda d: d.q.tolist(), "torch tensor"),
}


@pytest.mark.parametrize("lie", list(LIES))
def test_a_drafter_that_misreports_q_is_refused_before_the_target_judges_anything(lie):
    report, message = LIES[lie]
    passes = []
    hook = TARGET.register_forward_hook(lambda *args: passes.append(1))
    try:
        with pytest.raises((ValueError, TypeError), match=message) as refused:
            engine.generate(TARGET, Misreports(report, lie), PROMPT, 20, k=4, do_sample=True, seed=0)
    finally:
        hook.remove()
    assert "Misreports" in str(refused.value)  # the error names the drafter to fix
    assert passes == []  # refused in the first round, before its drafts reached the target


def test_the_honest_q_passes_the_check_and_greedy_never_reads_q():
    honest = engine.generate(TARGET, Misreports(lambda d: d.q, "honest"), PROMPT, 20, k=4, do_sample=True,
                             seed=0)
    assert len(honest.tokens) == 20
    # greedy verification never reads q, so a drafter's q cannot matter there and is not checked
    greedy = engine.generate(TARGET, Misreports(lambda d: 0.5 * d.q, "half"), PROMPT, 20, k=4)
    assert greedy.tokens == hf_greedy(TARGET, PROMPT, 20)


class OutOfVocabulary(PromptLookup):
    def propose(self, tokens, k, sampler=None):
        return Draft([3, TARGET.config.vocab_size + 5], None)


def test_drafted_ids_outside_the_vocabulary_are_refused_every_round():
    with pytest.raises(ValueError, match=r"OutOfVocabulary drafted.*token id 261"):
        engine.generate(TARGET, OutOfVocabulary(), PROMPT, 10)


class NotADraft(PromptLookup):
    def propose(self, tokens, k, sampler=None):
        return [1, 2, 3]


def test_a_propose_that_returns_no_draft_says_so():
    with pytest.raises(TypeError, match=r"NotADraft.propose returned list, not a Draft"):
        engine.generate(TARGET, NotADraft(), PROMPT, 10)


@pytest.mark.parametrize("prompt, error, match", [
    (torch.tensor([[]], dtype=torch.long), ValueError, "input_ids is empty"),
    (torch.tensor([[5, 300]]), ValueError, "token id 300, outside the vocabulary 0..255"),
    (torch.tensor([[5, -1]]), ValueError, "token id -1"),
    (torch.tensor([[1.0, 2.0]]), TypeError, "integer token ids"),
    ([[5, 9, 2]], TypeError, "torch tensor"),
])
def test_prompts_are_checked_before_the_first_pass(prompt, error, match):
    for generate in (lambda: engine.generate(TARGET, PromptLookup(), prompt, 5),
                     lambda: plain_generate(TARGET, prompt, 5)):
        with pytest.raises(error, match=match):
            generate()
