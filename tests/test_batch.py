"""Batched speculative decoding (engine.generate_batch): each row is its own generation in one shared pass.
Greedy rows equal their prompts' own batch-1 output token for token (float64, so no near-ties), each row's
cache equals a fresh prefill of its tokens after every round, sampled rows keep the target's distribution
(and the χ² test flags two planted batching mistakes), and bad batches are refused by name."""

import copy

import numpy as np
import pytest
import torch

from specnotes import engine, models, stats, verify
from specnotes.decode import plain_generate
from specnotes.drafters import Drafter, DraftModel, PromptLookup
from tests.conftest import TREES, make_drafter, noisy


@pytest.fixture(scope="module")
def f64():
    """A float64 tiny target, a noisy copy of it as a draft model (it agrees often, not always), and
    prompts of 3 to 40 tokens that repeat themselves (so prompt lookup finds drafts)."""
    target = models.tiny_llama(seed=0, layers=4).double()
    draft = noisy(copy.deepcopy(target), seed=1, scale=0.02)
    rng = np.random.default_rng(0)
    prompts = []
    for n in (3, 40, 11, 26, 7, 33, 5, 18):
        motif = rng.integers(0, target.config.vocab_size, size=max(2, n // 3)).tolist()
        prompts.append((motif * 20)[:n])
    return target, draft, prompts


def plain(target, prompt, n, eos=-1):
    return plain_generate(target, torch.tensor([prompt]), n, eos_token_id=eos).tokens


DRAFTERS = {"prompt lookup": lambda draft: PromptLookup,
            "draft model": lambda draft: lambda: DraftModel(draft),
            "draft model (its own target)": None}


@pytest.mark.parametrize("size", [1, 3, 8])
@pytest.mark.parametrize("kind", list(DRAFTERS))
def test_every_row_equals_its_own_batch_1_greedy_output(f64, size, kind):
    target, draft, prompts = f64
    make = (lambda: DraftModel(target)) if DRAFTERS[kind] is None else DRAFTERS[kind](draft)
    rows = prompts[:size]
    results = engine.generate_batch(target, make, rows, 24, k=4, eos_token_id=-1)
    assert [r.tokens for r in results] == [plain(target, p, 24) for p in rows]
    accepted = sum(int(r.accepted_counts.sum()) for r in results)
    if kind == "draft model":  # the rows accept different counts: the bookkeeping is exercised
        assert accepted > 0 and len({tuple(r.accepted_counts[:3]) for r in results}) > (size > 2)


def test_rows_keep_their_own_eos_and_max_new_tokens(f64):
    target, draft, prompts = f64
    free = plain(target, prompts[1], 30)
    eos = free[10]
    limits = [30, 30, 7, 1, 19]
    results = engine.generate_batch(target, lambda: DraftModel(draft), prompts[1:6], limits, k=3,
                                    eos_token_id=eos)
    for prompt, n, result in zip(prompts[1:6], limits, results, strict=True):
        reference = plain(target, prompt, n, eos)
        assert result.tokens == reference
        assert result.stopped_on_eos == (eos in reference)
    assert results[0].stopped_on_eos and len(results[0].tokens) == free.index(eos) + 1


def test_each_rows_cache_equals_a_fresh_prefill_after_every_round(f64):
    target, draft, prompts = f64
    batch = engine.start_batch(target, lambda: DraftModel(draft), prompts[:6], [20, 9, 20, 14, 20, 3], k=4,
                               eos_token_id=-1)
    rounds = 0
    while not batch.done:
        engine.batch_round(target, batch)
        rounds += 1
        for r, i in enumerate(batch.live):
            seen = batch.mask[r].bool()
            tokens = batch.rows[i].tokens[:-1]  # every committed token but the last is cached
            assert int(seen.sum()) == len(tokens) == batch.rows[i].trace[-1].cache_len
            fresh = target(torch.tensor([tokens]), use_cache=True).past_key_values
            for mine, theirs in zip(batch.cache.layers, fresh.layers, strict=True):
                torch.testing.assert_close(mine.keys[r][:, seen], theirs.keys[0], rtol=0, atol=1e-10)
                torch.testing.assert_close(mine.values[r][:, seen], theirs.values[0], rtol=0, atol=1e-10)
    assert rounds == batch.passes < 20  # one pass per round, and speculation saved some


def test_finished_rows_leave_the_batch_and_cost_no_pass(f64):
    target, draft, prompts = f64
    batch = engine.start_batch(target, PromptLookup, prompts[:4], [2, 12, 1, 5], eos_token_id=-1)
    live = []
    while not batch.done:
        engine.batch_round(target, batch)
        live.append(len(batch.live))
    assert live == sorted(live, reverse=True) and live[-1] == 0
    for row in batch.rows:
        assert len(row.trace) <= len(row.new)  # a row is judged only while it generates
    assert batch.passes == max(len(row.trace) for row in batch.rows)


def test_the_whole_batch_rollback_is_lossless_and_throws_accepted_drafts_away(f64):
    target, draft, prompts = f64
    make = lambda: DraftModel(draft)  # noqa: E731
    own = engine.start_batch(target, make, prompts, 24, k=4, eos_token_id=-1)
    shortest = engine.start_batch(target, make, prompts, 24, k=4, eos_token_id=-1, rollback="shortest")
    for batch in (own, shortest):
        while not batch.done:
            engine.batch_round(target, batch)
    assert [r.tokens for r in shortest.results()] == [r.tokens for r in own.results()]
    dropped = sum(r.dropped for row in shortest.rows for r in row.trace)
    assert dropped > 0 and shortest.passes > own.passes
    assert all(r.dropped == 0 for row in own.rows for r in row.trace)


def test_plain_batch_equals_transformers_left_padded_batched_generate(f64):
    target, _, prompts = f64
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    theirs = target.generate(ids, attention_mask=mask, max_new_tokens=12, do_sample=False, pad_token_id=0,
                             eos_token_id=None)[:, width:].tolist()
    assert [r.tokens for r in engine.plain_batch(target, prompts, 12, eos_token_id=-1)] == theirs


@pytest.mark.parametrize("name", [n for n in ("draft model", "early exit + adapter", "eagle-lite", "suffix",
                                              "lookahead")])
def test_every_chain_drafter_of_the_registry_works_per_row(tiny, name):
    prompts = [tiny.prompt[0].tolist(), [7, 3, 7, 3, 7], tiny.prompt[0, 2:].tolist() * 2]
    results = engine.generate_batch(tiny.target, lambda: make_drafter(name, tiny.target), prompts, 16, k=3,
                                    eos_token_id=-1)
    assert [r.tokens for r in results] == [plain(tiny.target, p, 16) for p in prompts]


def test_a_tree_drafter_in_a_batch_is_refused_with_what_to_use(tiny):
    with pytest.raises(ValueError, match="verifies chains.*generate\\(\\) per prompt"):
        engine.generate_batch(tiny.target, lambda: make_drafter(TREES[0], tiny.target), [[1, 2]], 4)


# --------------------------------------------------------------------------- sampled batches

PROMPTS = ([3, 1, 4, 1, 3, 1, 4, 1], [2, 5, 2, 5, 0])  # different lengths: the shorter is left-padded
ROWS, CALLS = 8, 125  # rows alternate the two prompts: 500 samples of each


def sampled_rows(tiny, make, seed0=0):
    out = [[], []]
    for call in range(CALLS):
        prompts = [PROMPTS[i % 2] for i in range(ROWS)]
        results = engine.generate_batch(tiny.small_target, make, prompts, tiny.LENGTH, k=2, do_sample=True,
                                        seed=seed0 + call * ROWS, eos_token_id=-1)
        for i, result in enumerate(results):
            out[i % 2].append(result.tokens)
    return [np.array(rows) for rows in out]


def p_values(tiny, make, seed0=0):
    exact = [stats.exact_first_tokens(tiny.small_target, torch.tensor([p]), tiny.LENGTH) for p in PROMPTS]
    return [stats.chi2_test(rows, e).p_value for rows, e in zip(sampled_rows(tiny, make, seed0), exact,
                                                                 strict=True)]


@pytest.mark.parametrize("kind", ["draft model", "prompt lookup"])
def test_sampled_rows_follow_the_targets_exact_distribution(tiny, kind):
    make = (lambda: DraftModel(tiny.small_draft)) if kind == "draft model" else PromptLookup
    assert min(p_values(tiny, make)) > stats.FLAG_P


def test_a_random_draw_shared_across_rows_is_flagged(tiny, monkeypatch):
    """Planted: every row of a call samples with the call's seed, so rows with the same prompt are copies."""
    start = engine.start

    def shared_seed(*args):
        args = list(args)
        args[7] -= args[7] % ROWS
        return start(*args)

    monkeypatch.setattr(engine, "start", shared_seed)
    assert min(p_values(tiny, lambda: DraftModel(tiny.small_draft), seed0=90_000)) < stats.FLAG_P


def test_one_rows_accepted_count_applied_to_another_is_flagged(tiny, monkeypatch):
    """Planted: each row keeps as many drafts as the row judged before it accepted (cut to its own draft)."""
    chain, last = verify.TokenWise.chain, [0]

    def mixed_up(self, logits, drafted, q, sampler):
        mine, nxt = chain(self, logits, drafted, q, sampler)
        n, last[0] = min(last[0], len(drafted)), mine
        return n, (nxt if n == mine else drafted[n] if n < len(drafted) else sampler.draw(sampler.probs(
            logits[n])))

    monkeypatch.setattr(verify.TokenWise, "chain", mixed_up)
    assert min(p_values(tiny, lambda: DraftModel(tiny.small_draft), seed0=70_000)) < stats.FLAG_P


# --------------------------------------------------------------------------- bad batches

@pytest.mark.parametrize("prompts, make, error, match", [
    ([], PromptLookup, ValueError, "prompts must be a non-empty list"),
    ("hello", PromptLookup, ValueError, "prompts must be a non-empty list"),
    ([[1, 2], []], PromptLookup, ValueError, r"prompts\[1\] is empty"),
    ([[1, 2], [3, 256]], PromptLookup, ValueError, r"prompts\[1\] holds token id 256"),
    ([[1, 2], [3, 4]], PromptLookup(), TypeError, "make_drafter must build one drafter per row"),
    ([[1, 2], [3, 4]], "same", ValueError, "make_drafter returned the same drafter object"),
])
def test_bad_batches_are_refused_by_name(tiny, prompts, make, error, match):
    if make == "same":
        one = PromptLookup()
        make = lambda: one  # noqa: E731
    with pytest.raises(error, match=match):
        engine.generate_batch(tiny.target, make, prompts, 4)


def test_bad_batch_settings_are_refused_by_name(tiny):
    with pytest.raises(ValueError, match="max_new_tokens: one per prompt"):
        engine.generate_batch(tiny.target, Drafter, [[1], [2]], [3, 4, 5])
    with pytest.raises(ValueError, match="rollback must be one of"):
        engine.generate_batch(tiny.target, Drafter, [[1]], 3, rollback="longest")
    with pytest.raises(ValueError, match="lossless only under greedy"):
        engine.generate_batch(tiny.target, Drafter, [[1]], 3, do_sample=True, rollback="shortest")
