"""Which engine trains a stack of synthetic models: the compiled one (numba, ``compiled.py``) on a CPU, the torch
engine (``engine.py``: the reference, and the CUDA path) elsewhere. The environment variable QKOV_ENGINE=compiled|torch
forces one."""
from __future__ import annotations

import os

import torch

from . import engine

ENGINE_ENV = "QKOV_ENGINE"
BACKENDS = ("compiled", "torch")


def engine_backend(device: torch.device) -> str:
    """Which engine trains stacks on ``device``: ``compiled`` on a CPU, ``torch`` elsewhere, unless QKOV_ENGINE
    says otherwise."""
    forced = os.environ.get(ENGINE_ENV, "").strip().lower()
    if forced and forced not in BACKENDS:
        raise ValueError(f"{ENGINE_ENV}={forced!r} is not an engine; allowed: {', '.join(BACKENDS)} (or unset it)")
    if forced == "compiled" and device.type != "cpu":
        raise ValueError(f"{ENGINE_ENV}=compiled trains on the CPU only, not on {device}; unset it or set it to torch")
    return forced or ("compiled" if device.type == "cpu" else "torch")


def train_stack(params: dict[str, torch.Tensor], *args, **kwargs) -> engine.StackResult:
    """``engine.train_stack``'s arguments and result, trained by the engine ``engine_backend`` picks for the
    parameters' device."""
    if engine_backend(next(iter(params.values())).device) == "compiled":
        from . import compiled  # lazy: numba loads only when the compiled engine trains (QKOV_ENGINE=torch: never)
        return compiled.train_stack(params, *args, **kwargs)
    return engine.train_stack(params, *args, **kwargs)
