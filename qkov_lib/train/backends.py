"""Which engine trains a stack of synthetic models: ``engine.train_stack``'s one outer loop with the compiled step
kernel (numba, ``compiled.CompiledKernel``) on a CPU, the torch one (``engine.TorchKernel``: the reference, and the
CUDA path) elsewhere, as ``device.engine_backend`` decides (QKOV_ENGINE=compiled|torch forces one)."""

from __future__ import annotations

import torch

from ..core.device import engine_backend
from . import engine


def train_stack(params: dict[str, torch.Tensor], *args, **kwargs) -> engine.StackResult:
    """``engine.train_stack``'s arguments and result, trained by the kernel of the engine ``engine_backend`` picks
    for the parameters' device."""
    if engine_backend(next(iter(params.values())).device) == "compiled":
        from . import compiled  # lazy: numba loads only when the compiled engine trains (QKOV_ENGINE=torch: never)

        return engine.train_stack(params, *args, kernel=compiled.CompiledKernel, **kwargs)
    return engine.train_stack(params, *args, **kwargs)
