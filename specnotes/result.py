"""What one generation returns (engine.generate, generate_batch, one per prompt): its new tokens and its
trace, one engine.Round per target pass, and the readings taken from them (specnotes.metrics computes the
acceptance figures, once)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specnotes import metrics


@dataclass
class Result:
    tokens: list[int]  # new tokens only
    trace: list = field(default_factory=list)  # engine.Round, one per target pass; the first reads the prompt
    stopped_on_eos: bool = False

    @property
    def drafted_counts(self) -> np.ndarray:
        return np.array([len(r.drafted) for r in self.trace], dtype=int)

    @property
    def accepted_counts(self) -> np.ndarray:
        return np.array([r.accepted for r in self.trace], dtype=int)

    def acceptance(self) -> metrics.Acceptance:
        """This generation's acceptance record (specnotes.metrics): alpha, acceptance length, tokens per
        pass and acceptance by draft position are all computed there, once."""
        return metrics.Acceptance.from_trace(self.trace, len(self.tokens))

    @property
    def position_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(judged, kept), each (max drafted,): rounds whose scan reached draft position i, and of those
        the rounds that accepted it."""
        return self.acceptance().position_counts

    @property
    def per_position_acceptance(self) -> np.ndarray:
        """(max drafted,) acceptance at draft position i among rounds whose scan reached it."""
        return self.acceptance().per_position_acceptance

    @property
    def alpha(self) -> float:
        """Accepted drafts over drafts judged (the scan stops at the first rejection)."""
        return self.acceptance().alpha

    @property
    def arrival_times(self) -> np.ndarray:
        """(new tokens,) seconds from the start at which each token was ready: a round's tokens arrive
        together, so the gaps between them are bursts of zeros and then one round's wait."""
        return np.repeat([r.at for r in self.trace], [r.accepted + (r.next_token is not None)
                                                      for r in self.trace])[:len(self.tokens)]

    @property
    def tokens_per_call(self) -> float:
        """New tokens per target pass (every pass verifies; the first one also reads the prompt)."""
        return self.acceptance().tokens_per_pass
