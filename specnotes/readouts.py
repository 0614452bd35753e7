"""The text the notebooks print or display, computed from the package's models: the roofline
calculator's readout (notebook 01), an engine trace as coloured HTML (02, 06) and the serving explorer's
readout (08). Pure: arguments in, a string out. The figures beside them are in
specnotes.viz_roofline and specnotes.viz_serving.
"""

from __future__ import annotations

import html

import numpy as np

from specnotes import checks, roofline, serving


def roofline_readout(n_params: float, dtype: str, gpu, k: int = 4) -> str:
    """The calculator's answer for one choice of model size, dtype, GPU and draft length (pure)."""
    k = checks.whole(k, "k", scalar=True)
    m = roofline.machine(gpu)
    weights = roofline.model_bytes(n_params, dtype)
    t1 = roofline.step_time(n_params, dtype, m)
    tk = roofline.step_time(n_params, dtype, m, tokens=k + 1)
    compute1 = roofline.forward_flops(n_params) / m.peak_flops
    ridge = roofline.ridge_tokens(m, dtype)
    fits = "" if not np.isfinite(m.memory_bytes) else (
        "fits in memory" if weights < m.memory_bytes else "DOES NOT FIT in memory")
    return (f"{n_params / 1e9:.2f}B params in {dtype}: {weights / 1e9:.1f} GB of weights ({fits}) "
            f"on {m.name}\n"
            f"  one decode step >= {t1 * 1e3:.2f} ms -> at most {1 / t1:,.0f} tokens/s at batch 1\n"
            f"  its arithmetic alone would take {compute1 * 1e6:.1f} µs: the step is "
            f"{t1 / compute1:,.0f}x longer than its compute\n"
            f"  ridge point: ~{ridge:,.0f} tokens per pass before compute, not memory, sets the time "
            f"(peak quoted for {m.peak_dtype or 'its dtype'})\n"
            f"  verifying k+1 = {k + 1} tokens in one pass: >= {tk * 1e3:.2f} ms "
            f"({tk / t1:.2f}x one decode step)")


# light backgrounds that stay apart under the common colour-vision deficiencies (blue against orange, not
# green against red), with dark text on every one, so a trace reads in dark mode too; rejected drafts are
# also struck out
TRACE_COLOURS = {"accepted": "#b3d4f5", "rejected": "#f9c89b", "corrected": "#dcc6ef", "bonus": "#fff0a0",
                 "plain": "#e4e4e4"}
TRACE_TEXT = "#1a1a1a"
# what the prose calls each of them (tools/prose_claims.py holds the notebooks' trace sentences to these)
TRACE_COLOUR_NAMES = {"accepted": "light blue", "rejected": "orange", "corrected": "lavender",
                      "bonus": "yellow", "plain": "grey"}


def trace_html(result, tokenizer, max_rounds: int | None = None) -> str:
    """HTML of an engine trace: each round's accepted drafts (light blue), rejected drafts (orange, struck
    out), and the target's own token (lavender if it corrected a draft, yellow if it was the free bonus
    after a fully accepted draft, grey if nothing was drafted and the round was a plain decode step)."""
    def span(token, kind, title):
        text = html.escape(tokenizer.decode([token])).replace("\n", "↵")
        style = f"background:{TRACE_COLOURS[kind]};color:{TRACE_TEXT};border-radius:3px;padding:0 1px;"
        if kind == "rejected":
            style += "text-decoration:line-through;"
        return f'<span style="{style}" title="{title}">{text}</span>'

    parts = []
    for i, r in enumerate(result.trace[:max_rounds]):
        parts += [span(t, "accepted", f"round {i + 1}: accepted draft") for t in r.drafted[:r.accepted]]
        parts += [span(t, "rejected", f"round {i + 1}: rejected draft") for t in r.drafted[r.accepted:]]
        if r.next_token is not None:  # None: the round ended on an accepted EOS draft
            parts.append(span(r.next_token, r.kind, f"round {i + 1}: target's {r.kind} token"))
        parts.append('<span style="color:#999">│</span>')
    legend = " ".join(f'<span style="background:{c};color:{TRACE_TEXT};padding:0 4px">{k}</span>'
                      for k, c in TRACE_COLOURS.items())
    body = "".join(parts)
    return (f'<div style="font-family:monospace;line-height:1.8;white-space:pre-wrap">{legend}'
            f'<br>{body}</div>')


def serving_readout(alpha: float, k: int, c: float, n_params: float, dtype: str, gpu, context: int) -> str:
    """One line for the serving explorer: B = 1 speedup, the crossover batch, the memory limit."""
    at1 = float(serving.speedup(1, alpha, k, c, n_params, dtype, gpu, context))
    cross = serving.crossover_batch(alpha, k, c, n_params, dtype, gpu, context)
    fits = serving.simulate(np.arange(1, 4097), alpha, k, c, n_params, dtype, gpu, context).fits
    most = int(np.flatnonzero(fits)[-1]) + 1 if fits.any() else 0
    head = f"{at1:.2f}× at batch 1 (context {context:,})"
    if not most:
        return f"{head}; the weights alone do not fit in this GPU's memory"
    if cross == 1:
        return f"{head}: speculation loses even at batch 1"
    if cross is None or cross > most:
        return f"{head}; speculation pays at every batch that fits in memory (up to {most})"
    return f"{head}; speculation stops paying at batch {cross} (memory holds {most} sequences)"
