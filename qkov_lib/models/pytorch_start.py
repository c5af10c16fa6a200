"""The real-data classifier started as PyTorch's layers start by default, as the authors' SVA notebooks leave them
(the paper states no initialisation): ``nn.Embedding`` tables normal(0, 1), ``nn.Linear`` weights and biases
uniform within 1/sqrt(fan-in). ``transformer.init_classifier`` is this book's start, normal(0, init_scale) weights
and zero biases; it stays as it is, since every other stored classifier run was computed from it."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .transformer import ClassifierConfig, init_classifier

INITS = ("normal", "pytorch")  # a classifier's start: this book's normal(0, init_scale), or PyTorch's defaults
EMBEDDINGS = ("embed", "pos")  # ``nn.Embedding`` tables: normal(0, 1)


def fan_in(name: str, cfg: ClassifierConfig) -> int:
    """The input width of the ``nn.Linear`` layer a parameter belongs to (its bias shares the weight's)."""
    last = name.rsplit(".", 1)[-1]
    if last in ("W_O", "b_O"):
        return cfg.n_heads * cfg.d_head
    if last in ("mlp_out", "b_out"):
        return cfg.d_mlp
    return cfg.d_model  # W_Q, W_K, W_V and their biases, mlp_in, b_in, the read-out and its bias


def init_pytorch(
    cfg: ClassifierConfig, seeds: Sequence[int], device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """``init_classifier``'s parameters drawn as PyTorch's layers draw them by default, one independent draw per
    seed from its own generator, stacked on dimension 0."""
    shapes = {k: tuple(v.shape[1:]) for k, v in init_classifier(cfg, seeds[:1]).items()}
    per_seed = []
    for seed in seeds:
        gen = torch.Generator().manual_seed(int(seed))
        per_seed.append({k: _draw(k, s, cfg, gen) for k, s in shapes.items()})
    return {k: torch.stack([p[k] for p in per_seed]).to(device).requires_grad_() for k in shapes}


def _draw(name: str, shape: tuple[int, ...], cfg: ClassifierConfig, gen: torch.Generator) -> torch.Tensor:
    if name in EMBEDDINGS:
        return torch.randn(shape, generator=gen)
    bound = 1 / math.sqrt(fan_in(name, cfg))
    return (torch.rand(shape, generator=gen) * 2 - 1) * bound
