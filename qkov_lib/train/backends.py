"""Which engine trains a stack of synthetic models: the compiled one (numba, ``compiled.py``) on a CPU, the torch
engine (``engine.py``: the reference, and the CUDA path) elsewhere, as ``device.engine_backend`` decides
(QKOV_ENGINE=compiled|torch forces one)."""
from __future__ import annotations

import torch

from ..core.device import engine_backend
from . import engine


def train_stack(params: dict[str, torch.Tensor], *args, **kwargs) -> engine.StackResult:
    """``engine.train_stack``'s arguments and result, trained by the engine ``engine_backend`` picks for the
    parameters' device."""
    if engine_backend(next(iter(params.values())).device) == "compiled":
        from . import compiled  # lazy: numba loads only when the compiled engine trains (QKOV_ENGINE=torch: never)
        return compiled.train_stack(params, *args, **kwargs)
    return engine.train_stack(params, *args, **kwargs)
