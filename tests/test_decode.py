import numpy as np
import pytest
import torch

from specnotes import decode, models
from specnotes.decode import TextStream, plain_generate


@pytest.fixture(scope="module")
def tiny():
    return models.tiny_llama(seed=0, vocab_size=128)


def hf_greedy(model, ids, n):
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                         pad_token_id=model.config.pad_token_id, eos_token_id=None)
    return out[0, ids.shape[1]:].tolist()


def test_plain_greedy_matches_transformers_generate(tiny):
    ids = torch.tensor([[5, 9, 2, 77]])
    result = plain_generate(tiny, ids, 16)
    assert result.tokens == hf_greedy(tiny, ids, 16)
    assert len(result.step_seconds) == 15 and np.all(result.step_seconds > 0)


def test_plain_greedy_matches_a_cacheless_recomputation(tiny):
    ids = torch.tensor([[5, 9, 2]])
    tokens = plain_generate(tiny, ids, 8).tokens
    seq = ids
    for _ in range(8):  # the slow obvious way: rerun the whole sequence every step
        nxt = tiny(seq).logits[0, -1].argmax()
        seq = torch.cat([seq, nxt.view(1, 1)], dim=1)
    assert tokens == seq[0, 3:].tolist()


def test_generation_stops_on_eos_and_keeps_it(tiny):
    ids = torch.tensor([[5, 9, 2, 77]])
    free = plain_generate(tiny, ids, 12).tokens
    eos = free[4]
    stopped = plain_generate(tiny, ids, 12, eos_token_id=eos)
    assert stopped.tokens == free[: free.index(eos) + 1] and stopped.stopped_on_eos


def test_sampling_is_repeatable_by_seed_and_varies_across_seeds(tiny):
    ids = torch.tensor([[1, 2, 3]])
    a = plain_generate(tiny, ids, 20, do_sample=True, seed=7).tokens
    b = plain_generate(tiny, ids, 20, do_sample=True, seed=7).tokens
    c = plain_generate(tiny, ids, 20, do_sample=True, seed=8).tokens
    assert a == b and a != c


@pytest.mark.parametrize("kwargs, match", [
    ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"max_new_tokens": 4, "do_sample": True, "temperature": 0.0}, "temperature"),
])
def test_bad_arguments_raise_value_errors(tiny, kwargs, match):
    with pytest.raises(ValueError, match=match):
        plain_generate(tiny, torch.tensor([[1, 2]]), **kwargs)


def test_batches_are_refused_with_a_clear_message(tiny):
    with pytest.raises(ValueError, match="Batch"):
        plain_generate(tiny, torch.tensor([[1, 2], [3, 4]]), 4)


def test_text_stream_prints_the_decoded_text_once(real, capsys):
    _, tokenizer = real
    ids = tokenizer("Speculative decoding is exact.")["input_ids"]
    stream = TextStream(tokenizer, end="")
    for t in ids:
        stream(t)
    assert capsys.readouterr().out == tokenizer.decode(ids, skip_special_tokens=True)


def test_text_stream_waits_for_characters_split_across_tokens(real, capsys):
    _, tokenizer = real
    text = "Hi 🙂 there, 日本語 and more."
    ids = tokenizer(text)["input_ids"]
    stream = TextStream(tokenizer, end="")
    for t in ids:
        stream(t)
    assert capsys.readouterr().out == tokenizer.decode(ids, skip_special_tokens=True) == text


def test_unseeded_sampling_leaves_the_global_rng_alone(tiny):
    torch.manual_seed(0)
    expected = torch.rand(2)
    torch.manual_seed(0)
    plain_generate(tiny, torch.tensor([[1, 2]]), 5, do_sample=True)
    assert torch.equal(torch.rand(2), expected)


@pytest.mark.parametrize("sampling", [dict(do_sample=False), dict(do_sample=True, seed=7),
                                      dict(do_sample=True, seed=3, temperature=0.7, top_k=20, top_p=0.9)])
def test_plain_decoding_is_the_engines_twin_token_for_token(sampling):
    """The same seed gives the same tokens as the engine with a drafter that drafts nothing: the same
    Sampler, seeded the same way, one draw per token."""
    from specnotes import engine, models
    from specnotes.drafters import Drafter

    model = models.tiny_llama(seed=0, layers=2)
    ids = torch.tensor([[5, 9, 2, 77, 5, 9]])
    plain = decode.plain_generate(model, ids, 12, eos_token_id=-1, **sampling).tokens
    assert plain == engine.generate(model, Drafter(), ids, 12, eos_token_id=-1, **sampling).tokens
    if sampling["do_sample"]:  # and a different seed draws something else: the seed is used
        other = {**sampling, "seed": sampling["seed"] + 1}
        assert decode.plain_generate(model, ids, 12, eos_token_id=-1, **other).tokens != plain


def test_the_prompt_pass_keeps_only_the_last_positions_logits(monkeypatch):
    from specnotes import models

    kept = []
    real = decode.forward_pass

    def spy(model, input_ids, cache=None, keep=None):
        kept.append((input_ids.shape[1], keep))
        return real(model, input_ids, cache, keep=keep)

    monkeypatch.setattr(decode, "forward_pass", spy)
    decode.plain_generate(models.tiny_llama(seed=0, layers=1), torch.tensor([[1, 2, 3, 4]]), 3,
                          eos_token_id=-1)
    assert kept[0] == (4, 1)  # the prompt pass: the LM head on its last position only
