"""The figure of the engine's KV cache across rounds: how long the cache is before, during and after each
round's verify pass and rollback (notebook 02).

Each figure function takes ``ax=None`` (``fig=None`` where it draws several panels) and returns the
matplotlib Figure it drew on; none calls ``plt.show()``. Pure (data in, figure out), tested headless.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from specnotes import checks


def plot_cache_lengths(result, prompt_len: int, ax=None, zoom: int | None = None):
    """Target KV-cache length per round: after the verify pass (before rollback) and after rollback.
    zoom: also draw the first `zoom` rounds on their own axes (beside the whole run), where each round's
    rollback is wide enough to see."""
    if zoom is not None:
        zoom = checks.whole(zoom, "zoom", low=1, scalar=True)
    if ax is None:
        fig, axes = plt.subplots(1, 2 if zoom else 1, figsize=(12 if zoom else 8, 3.2), squeeze=False)
        axes = list(axes[0])
    else:
        axes = [ax]
    after = [r.cache_len for r in result.trace]
    before = [(after[i - 1] if i else prompt_len - 1) + len(r.drafted) + 1
              for i, r in enumerate(result.trace)]
    rounds = np.arange(1, len(after) + 1)
    views = [(axes[0], len(rounds))]
    if zoom and len(axes) > 1:
        views.append((axes[1], min(zoom, len(rounds))))
    for axis, n in views:
        axis.plot(rounds[:n], before[:n], "v", color="tab:red",
                  label="after the verify pass (drafts included)")
        axis.plot(rounds[:n], after[:n], "o-", ms=3, color="tab:blue",
                  label="after rollback (accepted prefix only)")
        axis.vlines(rounds[:n], after[:n], before[:n], color="tab:red", alpha=0.4)
        axis.set_xlabel("round")
        axis.set_ylabel("cached positions (axis does not start at 0)")
    axes[0].legend(fontsize=8, loc="upper left")
    title = "Rejected drafts leave keys and values behind; cropping removes them"
    if len(views) > 1:
        axes[0].figure.suptitle(title, fontsize=11)
        axes[0].set_title("the whole run", fontsize=10)
        views[1][0].set_title(f"the first {views[1][1]} rounds: each red line is one rollback", fontsize=10)
        views[1][0].set_ylabel("")
    else:
        axes[0].set_title(title, fontsize=10)
    return axes[0].figure
