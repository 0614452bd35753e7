"""Eagle3Lite: EagleLite with EAGLE-3's two changes, at EagleLite's size: the feature it reads fuses the
target's hidden states after a low, a middle and the last layer, and its network was trained on its own
outputs as it chains them (training-time test, specnotes.training.eagle3). Notebook 06.
"""

from __future__ import annotations

from specnotes.drafters.eagle import EagleLite
from specnotes.training.eagle3 import load_eagle3


class Eagle3Lite(EagleLite):
    """EagleLite's chain drafting (k guesses per round, the confidence gate, sampled guesses with q) on
    the fused features: the engine hands it the states of the network's `layers`, side by side."""

    load = staticmethod(load_eagle3)

    def __init__(self, target, model="trained", **kwargs):
        super().__init__(target, model=model, **kwargs)
        self.state_layers = tuple(self.model.layers)
