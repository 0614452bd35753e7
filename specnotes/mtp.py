"""Multi-token prediction (MTP) in miniature: a model trained WITH an extra module that predicts the token
after next, as DeepSeek-V3 does, and that module reused as a drafter. Notebook 06, part 2.

DeepSeek-V3's MTP module k reads the main model's hidden state at position t and the embedding of token
t+k, runs one transformer block and the shared output head, and predicts token t+k+1. Training adds its
cross-entropy (weighted by λ) to the main loss, so the main model learns representations that plan
ahead. At inference the module can simply be dropped, or used as a free, already-aligned draft head. It
has the same shape as EagleLite's drafter (specnotes.drafters.eagle), so here it IS an EagleLite module:
the difference is only that it was trained together with the model instead of bolted on afterwards.

Everything is tiny and synthetic (a random second-order Markov language over 32 tokens) so that it
trains in seconds on a CPU.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from specnotes import checks, models
from specnotes.env import progress_bar
from specnotes.training.eagle import new_model


def toy_language(vocab: int = 32, branching: int = 3, seed: int = 0) -> np.ndarray:
    """(vocab, vocab, vocab) second-order transition table: after tokens (a, b) the next token is one of
    `branching` successors, with skewed probabilities."""
    vocab = checks.whole(vocab, "vocab (the table holds vocab**3 floats)", low=4, high=256, scalar=True)
    branching = checks.whole(branching, "branching", scalar=True)
    seed = checks.whole(seed, "seed", low=0, scalar=True)
    if vocab < 4 or not 1 <= branching <= vocab:
        raise ValueError(f"need vocab >= 4 and 1 <= branching <= vocab; got {vocab}, {branching}")
    rng = np.random.default_rng(seed)
    table = np.zeros((vocab, vocab, vocab))
    weights = np.sort(rng.dirichlet(np.full(branching, 0.7), size=(vocab, vocab)), axis=-1)[..., ::-1]
    for a in range(vocab):
        for b in range(vocab):
            table[a, b, rng.choice(vocab, branching, replace=False)] = weights[a, b]
    return table


def sample_language(table: np.ndarray, n: int, length: int, seed: int = 0) -> np.ndarray:
    """(n, length) sequences from the second-order table (vectorized over sequences)."""
    n, length = checks.whole(n, "n", scalar=True), checks.whole(length, "length", low=2, scalar=True)
    seed = checks.whole(seed, "seed", low=0, scalar=True)
    table = np.asarray(table)
    if table.ndim != 3 or table.shape[0] != table.shape[1]:
        raise ValueError(f"table must be a (vocab, vocab, vocab) transition table as toy_language makes, "
                         f"got shape {table.shape}")
    checks.distribution(table, "table")
    rng = np.random.default_rng(seed)
    vocab = table.shape[0]
    out = np.empty((n, length), dtype=np.int64)
    out[:, :2] = rng.integers(0, vocab, (n, 2))
    for t in range(2, length):
        cdf = table[out[:, t - 2], out[:, t - 1]].cumsum(-1)
        out[:, t] = (rng.random((n, 1)) < cdf).argmax(-1)
    return out


class MTPRun(NamedTuple):
    model: object  # the tiny main model (LlamaForCausalLM)
    module: object  # the MTP module (an EagleLite model over the main model's normed hidden states)
    main_losses: list[float]
    mtp_losses: list[float]


def train(lam: float = 0.3, steps: int = 300, seconds: float | None = None, vocab: int = 32,
          seed: int = 0, progress: bool = True) -> MTPRun:
    """Train a tiny model and its depth-1 MTP module together on the toy language:
    loss = CE(next token) + λ · CE(token after next, from the MTP module). λ = 0 trains the main model
    alone (the module then learns nothing: its loss is reported but not optimized)."""
    import torch

    lam = checks.positive(lam, "lam", zero=True, scalar=True)
    steps = checks.whole(steps, "steps", scalar=True)
    if seconds is not None:
        seconds = checks.positive(seconds, "seconds", scalar=True)
    torch.manual_seed(seed)
    data = torch.as_tensor(sample_language(toy_language(vocab, seed=seed), 512, 48, seed=seed))
    model = models.tiny_llama(seed=seed, vocab_size=vocab, hidden_size=64, layers=2).train()
    for p in model.parameters():
        p.requires_grad_(True)
    module = new_model(model).train()
    for p in module.parameters():  # the module's own layer, norm and fc; embeddings and head are shared
        p.requires_grad_(True)
    params = list({id(p): p for p in [*model.parameters(), *module.parameters()]}.values())
    opt = torch.optim.AdamW(params, lr=3e-3)
    rng = np.random.default_rng(seed)
    main_losses, mtp_losses = [], []
    start = time.perf_counter()

    tqdm = progress_bar()

    for _ in tqdm(range(steps), desc=f"MTP training (λ={lam})", disable=not progress):
        batch = data[rng.integers(0, len(data), 32)]
        out = model.model(batch)
        h = out.last_hidden_state
        logits = model.lm_head(h)
        main = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, vocab), batch[:, 1:].reshape(-1))
        # the module at position t reads (h_t, token t+1) and predicts token t+2
        _, mtp_logits, _ = module(h[:, :-2], batch[:, 1:-1])
        mtp = torch.nn.functional.cross_entropy(mtp_logits.reshape(-1, vocab), batch[:, 2:].reshape(-1))
        loss = main + lam * mtp
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        main_losses.append(main.item())
        mtp_losses.append(mtp.item())
        if seconds is not None and time.perf_counter() - start > seconds:
            break
    for p in [*model.parameters(), *module.parameters()]:
        p.requires_grad_(False)
    return MTPRun(model.eval(), module.eval(), main_losses, mtp_losses)
