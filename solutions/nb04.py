"""Solutions for notebook 04: total variation and the point-mass recovery distribution."""

import numpy as np


def total_variation(a, b):
    return 0.5 * float(np.abs(np.asarray(a) - np.asarray(b)).sum())


def recovery_distribution(p, x):
    r = np.array(p, dtype=float)
    r[x] = 0.0
    return r / r.sum() if r.sum() > 0 else np.asarray(p, dtype=float)


SOLUTIONS = {"04.1": total_variation, "04.2": recovery_distribution}
