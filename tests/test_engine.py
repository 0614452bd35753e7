"""The loop (specnotes.engine): one round at a time, greedy identity with the target's own generate, the
round's bookkeeping, EOS, and nothing a drafter says is trusted. Every drafter's identity and calibrated
sampling test is in test_drafters.py; the sampling rule in test_sampling.py; the passes in test_passes.py."""

import pytest
import torch

from specnotes import engine, models, surgery, timing
from specnotes.decode import plain_generate, prompt_ids
from specnotes.drafters import Draft, Drafter, DraftModel, PromptLookup, RandomTree


def test_one_round_at_a_time_is_the_same_as_generate(tiny):
    drafter = DraftModel(surgery.truncated(tiny.target, 2))
    state = engine.start(tiny.target, drafter, tiny.prompt, 30, k=4, eos_token_id=-1)
    with timing.CountCalls(tiny.target) as passes:
        rounds = []
        while not state.done:
            rounds.append(engine.speculative_round(tiny.target, drafter, state))
    assert state.result().tokens == tiny.greedy(tiny.target, tiny.prompt, 30)
    assert passes.n == len(rounds) == len(state.trace)  # one target pass per round, counted by a hook
    assert state.trace == rounds
    with pytest.raises(ValueError, match="finished"):
        engine.speculative_round(tiny.target, drafter, state)


def test_acceptance_bookkeeping_is_consistent(tiny):
    result = engine.generate(tiny.target, DraftModel(surgery.truncated(tiny.target, 2)), tiny.prompt, 40, k=4,
                             eos_token_id=-1)
    assert len(result.tokens) == sum(r.accepted + 1 for r in result.trace)  # no EOS: nothing cut
    assert all(r.accepted <= len(r.drafted) <= 4 for r in result.trace)
    assert 0 <= result.alpha <= 1 and result.per_position_acceptance.shape == (4,)
    self_draft = engine.generate(tiny.target, DraftModel(tiny.target), tiny.prompt, 40, k=4, eos_token_id=-1)
    assert self_draft.alpha == 1.0 and self_draft.tokens_per_call > 4  # a perfect draft: k+1 per pass


def test_an_eos_inside_the_accepted_drafts_ends_the_trace_consistently(tiny):
    free = tiny.greedy(tiny.target, tiny.prompt, 30)
    eos = free[9]
    result = engine.generate(tiny.target, DraftModel(tiny.target), tiny.prompt, 30, k=6, eos_token_id=eos)
    last = result.trace[-1]
    assert result.tokens == free[: free.index(eos) + 1]
    assert last.kind == "eos" and last.drafted[-1] == eos and last.next_token is None
    assert sum(r.accepted + (r.next_token is not None) for r in result.trace) == len(result.tokens)
    assert last.cache_len == tiny.prompt.shape[1] + len(result.tokens) - 1


def test_rounds_without_a_draft_are_plain_steps(tiny):
    result = engine.generate(tiny.target, Drafter(), tiny.prompt, 5, eos_token_id=-1)
    assert {r.kind for r in result.trace} == {"plain"} and len(result.trace) == 5
    assert result.tokens == tiny.greedy(tiny.target, tiny.prompt, 5)


def test_generation_stops_at_eos_like_generate(tiny):
    free = tiny.greedy(tiny.target, tiny.prompt, 30)
    eos = free[12]
    for drafter in (DraftModel(tiny.target), PromptLookup()):
        result = engine.generate(tiny.target, drafter, tiny.prompt, 30, k=5, eos_token_id=eos)
        assert result.tokens == free[: free.index(eos) + 1] and result.stopped_on_eos


@pytest.mark.parametrize("k", [1, 3, 8])
@pytest.mark.parametrize("drafter", ["prompt lookup", "8-layer self-draft"])
@pytest.mark.parametrize("kind", ["copy", "free"])
def test_greedy_equals_generate_on_the_real_model(real, tiny, drafter, k, kind):
    model, tokenizer = real
    text = {"copy": "Repeat exactly: the quick brown fox jumps over the lazy dog; the quick brown fox "
                    "jumps over the lazy dog.",
            "free": "Write two sentences about the sea."}[kind]
    ids = prompt_ids(tokenizer, text)
    drafter_obj = PromptLookup() if drafter == "prompt lookup" else DraftModel(surgery.truncated(model, 8))
    result = engine.generate(model, drafter_obj, ids, 24, k=k)
    assert result.tokens == tiny.greedy(model, ids, 24, eos=model.generation_config.eos_token_id)


def test_batches_bad_settings_and_mismatched_vocabularies_are_refused_clearly(tiny):
    with pytest.raises(ValueError, match="Batch"):
        engine.generate(tiny.target, PromptLookup(), tiny.prompt.repeat(2, 1), 5)
    with pytest.raises(ValueError, match="vocabulary"):
        engine.generate(tiny.target, DraftModel(models.tiny_llama(seed=1, vocab_size=100)), tiny.prompt, 5)
    with pytest.raises(ValueError, match="k"):
        engine.generate(tiny.target, PromptLookup(), tiny.prompt, 5, k=0)
    with pytest.raises(ValueError, match="rule"):
        engine.generate(tiny.target, PromptLookup(), tiny.prompt, 5, rule="relaxed")
    with pytest.raises(ValueError, match="sampling rule"):
        engine.generate(tiny.target, PromptLookup(), tiny.prompt, 5, rule="typical")
    with pytest.raises(TypeError, match="not the class"):
        engine.generate(tiny.target, PromptLookup, tiny.prompt, 5)


# ------------------------------------------------------------------- nothing a drafter says is trusted


class Misreports(DraftModel):
    """A draft model that draws its tokens honestly and then reports q through `lie` (a course exercise
    gone wrong: writing a drafter means getting q right, and the engine is the last line of defence)."""

    def __init__(self, lie, name):
        super().__init__(models.tiny_llama(seed=1, layers=1, hidden_size=32))
        self.lie, self.name = lie, name

    def propose(self, tokens, k, sampler):
        draft = super().propose(tokens, k, sampler)
        return Draft(draft.tokens, self.lie(draft))


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
def test_a_drafter_that_misreports_q_is_refused_before_the_target_judges_anything(tiny, lie):
    report, message = LIES[lie]
    with timing.CountCalls(tiny.target) as passes:
        with pytest.raises((ValueError, TypeError), match=message) as refused:
            engine.generate(tiny.target, Misreports(report, lie), tiny.prompt, 20, k=4, do_sample=True,
                            seed=0)
    assert "Misreports" in str(refused.value)  # the error names the drafter to fix
    assert passes.n == 0  # refused in the first round, before its drafts reached the target


def test_the_honest_q_passes_the_check_and_greedy_never_reads_q(tiny):
    honest = engine.generate(tiny.target, Misreports(lambda d: d.q, "honest"), tiny.prompt, 20, k=4,
                             do_sample=True, seed=0)
    assert len(honest.tokens) == 20
    # greedy verification never reads q, so a drafter's q cannot matter there and is not checked (a q of
    # zeros, refused when sampling; a draft model builds no q at all under greedy)
    zeros = lambda d: torch.zeros(len(d.tokens), tiny.target.config.vocab_size)  # noqa: E731
    greedy = engine.generate(tiny.target, Misreports(zeros, "zeros"), tiny.prompt, 20, k=4)
    assert greedy.tokens == tiny.greedy(tiny.target, tiny.prompt, 20)


class Says(Drafter):
    drafts_trees = True  # it says whatever it is told, trees included

    def __init__(self, draft):
        self.draft = draft

    def propose(self, tokens, k, sampler):
        return self.draft


@pytest.mark.parametrize("draft, error, match", [
    (Draft([3, 261]), ValueError, r"Says drafted.*token id 261"),
    ([1, 2, 3], TypeError, r"Says.propose returned list, not a Draft"),
    (Draft([3, 4], None, [-1, 5]), ValueError, "parent"),
    (Draft([3, 4], torch.full((2, 256), 1 / 256), [-1, 0]), ValueError, "tree with q"),
])
def test_a_bad_draft_is_refused_every_round(tiny, draft, error, match):
    with pytest.raises(error, match=match):
        engine.generate(tiny.target, Says(draft), tiny.prompt, 10)


@pytest.mark.parametrize("prompt, error, match", [
    (torch.tensor([[]], dtype=torch.long), ValueError, "input_ids is empty"),
    (torch.tensor([[5, 300]]), ValueError, "token id 300, outside the vocabulary 0..255"),
    (torch.tensor([[5, -1]]), ValueError, "token id -1"),
    (torch.tensor([[1.0, 2.0]]), TypeError, "integer token ids"),
    ([[5, 9, 2]], TypeError, "torch tensor"),
])
def test_prompts_are_checked_before_the_first_pass(tiny, prompt, error, match):
    for generate in (lambda: engine.generate(tiny.target, PromptLookup(), prompt, 5),
                     lambda: plain_generate(tiny.target, prompt, 5)):
        with pytest.raises(error, match=match):
            generate()


def test_a_tree_from_a_drafter_that_did_not_declare_trees_is_refused(tiny):
    class Undeclared(Drafter):
        def propose(self, tokens, k, sampler):
            return Draft([1, 2], None, [-1, -1])

    with pytest.raises(TypeError, match="drafts_trees"):
        engine.generate(tiny.target, Undeclared(), tiny.prompt, 10)


def test_a_chain_only_rule_with_a_tree_drafter_is_refused_at_start(tiny):

    with pytest.raises(ValueError, match="judges chain drafts"):
        engine.start(tiny.target, RandomTree(6), tiny.prompt, 10, do_sample=True, rule="block")


def test_k_caps_every_drafter_and_none_leaves_the_drafters_own_length(tiny):


    copy = torch.tensor([list(range(3, 13)) * 3])  # repeated text: prompt lookup proposes long drafts
    for make in (PromptLookup, lambda: DraftModel(tiny.target, k=6)):
        capped = engine.generate(tiny.target, make(), copy, 24, k=2)
        assert max(len(r.drafted) for r in capped.trace) <= 2
        free = engine.generate(tiny.target, make(), copy, 24)
        assert max(len(r.drafted) for r in free.trace) > 2


def test_a_tree_round_records_the_size_of_the_tree(tiny):

    result = engine.generate(tiny.target, RandomTree(tiny.target.config.vocab_size, (3, 2, 1)), tiny.prompt,
                             12, do_sample=True, seed=0)
    assert [r.size for r in result.trace[:2]] == [6, 6]  # 3 + 2 + 1 nodes, judged along one line
    assert all(len(r.drafted) <= 3 for r in result.trace)
