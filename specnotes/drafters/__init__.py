"""Drafters: where the guesses come from. One file per drafter, all behind the protocol in
specnotes.drafters.base (Draft, Feedback, Drafter).

The engine (specnotes.engine) calls them; notebooks 02, 06 and 07 compare them. The networks the
learning drafters run, their training and their weights are in specnotes.training.
"""

from specnotes.drafters.base import Draft, Drafter, Feedback, Wrapper
from specnotes.drafters.draft_model import DraftModel
from specnotes.drafters.eagle import EagleLite
from specnotes.drafters.eagle3 import Eagle3Lite
from specnotes.drafters.early_exit import EarlyExit
from specnotes.drafters.lookahead import Lookahead
from specnotes.drafters.medusa import Medusa
from specnotes.drafters.one_hot import OneHot
from specnotes.drafters.parallel import ParallelLite
from specnotes.drafters.prompt_lookup import PromptLookup
from specnotes.drafters.random_tree import RandomTree
from specnotes.drafters.suffix import Suffix

__all__ = ["Draft", "Drafter", "DraftModel", "Eagle3Lite", "EagleLite", "EarlyExit", "Feedback", "Lookahead",
           "Medusa", "OneHot", "ParallelLite", "PromptLookup", "RandomTree", "Suffix", "Wrapper"]
