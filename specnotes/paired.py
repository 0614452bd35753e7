"""The two exact rules on a real model, paired: every draft the engine proposed is priced under both the
token-wise and the block rule (block.kept_given_draft), so their difference is measured without the noise of
two separate sampled runs. Notebook 05 runs it.
"""

from __future__ import annotations

import numpy as np

from specnotes import block, engine
from specnotes.drafters.base import Recorder
from specnotes.sampling import Sampler


def paired_kept(target, make_drafter, prompts, max_new_tokens: int, k: int, temperature: float = 1.0,
                seed: int = 0) -> np.ndarray:
    """(rounds, 2) kept_given_draft for every round that drafted, on a real model: each prompt is sampled
    through the engine (token-wise rule) with a fresh make_drafter(); every draft it proposed is then
    priced under both rules by one extra target pass over the round's context and draft. The drafter
    must report q (a draft model, EagleLite(sampled=True)); prompts: (1, T) id tensors."""
    import torch

    processing = Sampler(do_sample=True, temperature=temperature)
    out = []
    for i, ids in enumerate(prompts):
        recorder = Recorder(make_drafter())
        engine.generate(target, recorder, ids, max_new_tokens, k=k, do_sample=True, temperature=temperature,
                        seed=seed + i, eos_token_id=-1)
        for tokens, draft in recorder.drafts:
            if not draft.tokens:
                continue
            if draft.q is None:
                raise ValueError("paired_kept needs drafts with q (the distribution each guess was drawn "
                                 "from): a draft model, or EagleLite(sampled=True)")
            n = len(draft.tokens)
            with torch.inference_mode():
                logits = target(torch.tensor([tokens + draft.tokens], device=ids.device)).logits[0, -(n + 1):]
            p = processing.probs(logits).double().cpu().numpy()
            q = draft.q[:n].double().cpu().numpy()
            p, q = p / p.sum(-1, keepdims=True), q / q.sum(-1, keepdims=True)
            out.append(block.kept_given_draft(p, q, draft.tokens))
    return np.array(out).reshape(-1, 2)
