"""What a real-data classifier run trains from: this book's normal(0, 0.02) start (``real_data.CLASSIFY``) or
PyTorch's default layers (``models.pytorch_start``), the start of the authors' SVA notebooks. A chapter whose setup
has an ``init`` field passes ``task_for(setup.init)`` to ``real_data.run_all``."""

from __future__ import annotations

import pandas as pd
import torch

from ..models.pytorch_start import INITS, init_pytorch
from ..models.transformer import classify, trim
from .real_data import CLASSIFY, Task, accuracy_by_group, evaluate_condition, fit, model_config
from .real_setup import Prepared, RealSetup


def train_from_pytorch_start(
    data: Prepared, s: RealSetup, qk_mult: float, device: torch.device, progress: bool = True, desc: str = "training"
) -> tuple[dict[str, torch.Tensor], pd.DataFrame]:
    """``real_data.train_condition`` from PyTorch's default start. Its steps are repeated here, not shared, because
    the key of every stored classifier run covers ``train_condition``'s code (merge the two when those runs are next
    recomputed)."""
    cfg = model_config(data, s)
    params = init_pytorch(cfg, list(s.seeds), device)

    def loss_fn(prm, x, y, smoothing=0.0):
        logits, _ = classify(prm, cfg, trim(x)[0])
        return torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), y, reduction="none", label_smoothing=smoothing
        ).mean(1)

    smoothed = (lambda prm, x, y: loss_fn(prm, x, y, s.label_smoothing)) if s.label_smoothing else None
    inputs, labels = data.train.ids.to(device), data.train.labels.to(device)
    return params, fit(params, loss_fn, inputs, labels, s, qk_mult, progress, desc, train_loss=smoothed)


TASKS = {"normal": CLASSIFY, "pytorch": Task(train_from_pytorch_start, evaluate_condition, accuracy_by_group)}


def check_init(init: str) -> None:
    """A setup's ``init`` names a known start (``INITS``)."""
    if init not in INITS:
        raise ValueError(f"init must be one of {', '.join(INITS)} (got {init!r})")


def task_for(init: str) -> Task:
    """The task that trains the classifiers from ``init`` and measures them as every real-data run does."""
    check_init(init)
    return TASKS[init]
