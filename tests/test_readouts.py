"""The text the notebooks print (specnotes.readouts): the roofline calculator's and the serving explorer's
readouts over their whole control grids, and an engine trace as HTML."""

import re

import pytest

from specnotes import engine, readouts, roofline


def test_roofline_readout_over_every_catalog_gpu_and_dtype():
    assert "239 tokens/s" in readouts.roofline_readout(7e9, "bf16", "H100 SXM", 4)  # the seed's 7B, ~240
    for gpu in roofline.catalog():
        for dtype in roofline.DTYPE_BYTES:
            text = readouts.roofline_readout(7e9, dtype, gpu, 4)
            assert "ridge point" in text and dtype in text


@pytest.mark.parametrize("gpu", ["H100 SXM", "L4", "T4", "Apple M2 Max"])
@pytest.mark.parametrize("alpha,k,c", [(0.0, 1, 0.0), (0.95, 12, 0.5), (0.5, 4, 0.1)])
def test_serving_readout_over_the_explorers_control_grid(gpu, alpha, k, c):
    for n_params in (1e8, 8e9, 3e11):
        assert "at batch 1" in readouts.serving_readout(alpha, k, c, n_params, "bf16", gpu, 4096)


def test_serving_readout_names_the_crossover_and_the_memory_limit():
    assert "every batch that fits" in readouts.serving_readout(0.7, 4, 0.05, 8e9, "bf16", "H100 SXM", 4096)
    assert "stops paying at batch" in readouts.serving_readout(0.7, 4, 0.05, 8e9, "bf16", "H100 SXM", 0)
    assert "do not fit" in readouts.serving_readout(0.7, 4, 0.05, 3e11, "bf16", "H100 SXM", 0)


class Letters:
    """A tokenizer stand-in: token i is the i-th letter."""

    def decode(self, ids):
        return "".join(chr(ord("a") + i) for i in ids)


def test_trace_html_colours_each_token_by_what_happened_to_it():
    trace = [engine.Round(drafted=[], accepted=0, next_token=0, cache_len=5),  # a plain step: a
             engine.Round(drafted=[1, 2, 3], accepted=1, next_token=4, cache_len=7),  # b kept, c d out, e
             engine.Round(drafted=[5, 6], accepted=2, next_token=7, cache_len=10)]  # f g kept, bonus h
    html = readouts.trace_html(engine.Result(tokens=[0, 1, 4, 5, 6, 7], trace=trace), Letters())
    body = html.split("<br>", 1)[1]  # after the legend
    kind_of = {colour: kind for kind, colour in readouts.TRACE_COLOURS.items()}
    spans = re.findall(r"background:(#\w+);[^>]*>(\w)</span>", body)
    assert [(text, kind_of[colour]) for colour, text in spans] == [
        ("a", "plain"), ("b", "accepted"), ("c", "rejected"), ("d", "rejected"), ("e", "corrected"),
        ("f", "accepted"), ("g", "accepted"), ("h", "bonus")]
    assert body.count("line-through") == 2 and body.count("│") == 3  # struck-out drafts, one bar a round
    first = readouts.trace_html(engine.Result(tokens=[0], trace=trace), Letters(), max_rounds=1)
    assert ">a</span>" in first and ">b</span>" not in first


def test_trace_html_sets_dark_text_on_every_span_for_dark_mode():
    trace = [engine.Round(drafted=[1, 2], accepted=1, next_token=4, cache_len=7)]
    html = readouts.trace_html(engine.Result(tokens=[1, 4], trace=trace), Letters())
    spans = re.findall(r'<span style="([^"]*)"', html)
    coloured = [s for s in spans if "background" in s]
    assert coloured and all(f"color:{readouts.TRACE_TEXT}" in s for s in coloured)
