"""Solutions for notebook 03: the residual and the two acceptance rates."""

import numpy as np


def residual(p, q):
    r = np.maximum(np.asarray(p) - np.asarray(q), 0.0)
    mass = r.sum()
    return r / mass if mass > 0 else np.asarray(p)


def acceptance_rates(p, q):
    p, q = np.asarray(p), np.asarray(q)
    return float(np.minimum(p, q).sum()), float((p * q).sum())


SOLUTIONS = {"03.1": residual, "03.2": acceptance_rates}
