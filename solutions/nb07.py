"""Solutions for notebook 07: a speedup predicted from measured parts, and the first differing token."""

import numpy as np


def predicted_speedup(position_alpha, draft_lengths, verify_cost, draft_cost):
    tokens_at = np.concatenate([[1.0], 1 + np.cumsum(np.cumprod(position_alpha))])  # E(d) for d = 0..k
    d = np.asarray(draft_lengths)
    cost = np.asarray(verify_cost, dtype=float)[d + 1] + draft_cost
    return float(tokens_at[d].mean() / cost.mean())


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


SOLUTIONS = {"07.1": predicted_speedup, "07.2": first_difference}
