"""Medusa: the tree drafter on Medusa's heads, a few residual blocks on the target's last hidden state that
guess the tokens two, three, four positions ahead through the target's own (frozen) LM head. Notebook 06,
part 2.

Head h reads the hidden state at position t, the one whose LM-head output is token t+1, and predicts
token t+2+h. Their top candidates form a static tree (specnotes.tree) that the target verifies in one
pass. Drafting costs one small matmul per head plus one LM-head read for all heads together, which is
why Medusa is the best candidate for a wall-clock win on a CPU. The heads, their training and their
weights are specnotes.training.medusa.
"""

from __future__ import annotations

from specnotes import checks, tree
from specnotes.drafters.base import Draft, Drafter, capped
from specnotes.training.medusa import load_medusa_heads


class Medusa(Drafter):
    """The tree drafter: the heads' top candidates at each depth arranged as a static tree.

    widths[h] is how many of head h's candidates the tree tries (under the best branch so far; see
    tree.default_choices), so the tree has sum(widths) nodes and depth len(widths) <= n_heads.
    heads: "trained" (committed or cached; a quick set otherwise), or a MedusaHeads module."""

    needs = frozenset({"states"})  # the heads read the target's last hidden state
    drafts_trees = True

    def __init__(self, target, heads="trained", widths=(3, 2, 2), n_heads: int = 3):
        if isinstance(heads, str) and heads != "trained":
            raise ValueError(f"heads must be 'trained', or heads from new_heads/train_medusa, got {heads!r}")
        self.heads = load_medusa_heads(target, n_heads) if heads == "trained" else heads
        if not isinstance(getattr(self.heads, "n_heads", None), int):
            raise TypeError(f"heads must be 'trained' or a MedusaHeads module (new_heads(target) or "
                            f"train_medusa(target)[0]), got {type(heads).__name__}")
        if not isinstance(widths, (list, tuple)) or not widths:
            raise TypeError(f"widths must be a non-empty tuple, one width per head (e.g. (3, 2, 2)), got "
                            f"{widths!r}")
        widths = [checks.whole(w, "widths", high=target.config.vocab_size, scalar=True) for w in widths]
        if len(widths) > self.heads.n_heads:
            raise ValueError(f"widths {tuple(widths)} need one width per head, at most {self.heads.n_heads}")
        self.widths = tuple(widths)
        self.choices = tree.default_choices(self.widths)
        self.state = None  # the target's last hidden state: the one that chose the newest token

    def reset(self, prompt: list[int]) -> None:
        self.state = None

    def propose(self, tokens: list[int], k: int | None, sampler) -> Draft:
        import torch

        if self.state is None:  # the first round: the prompt pass has not produced any states yet
            return Draft([])
        with torch.inference_mode():
            logits = self.heads(self.state)[:len(self.widths)]  # (depth, V)
            top = torch.topk(logits, max(self.widths), dim=-1).indices.tolist()  # one host sync
            candidates = [row[:w] for row, w in zip(top, self.widths, strict=True)]
        t = tree.static_tree(candidates, self.choices).cut(capped(len(self.widths), k))  # k caps the depth
        return Draft(t.tokens, None, t.parents)

    def update(self, feedback) -> None:
        self.state = feedback.states[-1]
