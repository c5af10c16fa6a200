"""The real-data training loop (Section 7): many seeds of an autograd model trained at once (a leading seed
dimension) with ``torch.optim``'s SGD or AdamW, the learning rate set per circuit (QK, OV, other). Also what every
training loop shares: the optimisers' names, the batch order of a fixed training set, and the error for a loss that
is no longer finite. The synthetic task's models train with ``engine``."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from .optim import RateSchedule, circuit_groups
from .progress import bar
from .validation import require_positive_ints

OPTIMIZERS = ("sgd", "adamw")


def check_optimiser_and_stop(cfg, positive_ints: tuple[str, ...]) -> None:
    """The checks every training config shares: a known optimiser, ``target_nll`` >= 0 (where it has one) and
    positive integer sizes."""
    if cfg.optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)} (got {cfg.optimizer!r})")
    require_positive_ints(cfg, positive_ints)
    if not getattr(cfg, "target_nll", 0) >= 0:
        raise ValueError(f"target_nll must be >= 0, 0 meaning no early stop (got {cfg.target_nll!r})")


def check_finite(losses: torch.Tensor, step: int, model: Callable[[int], str], every: int = 1) -> None:
    """One clear error when a model's loss (``losses[k]``, summed over the last ``every`` steps) is not finite;
    ``model(k)`` names the model and its learning rates."""
    bad = ~torch.isfinite(losses)
    if bad.any():
        k = int(bad.nonzero()[0])
        checked = f" (checked every {every} steps)" if every > 1 else ""
        raise FloatingPointError(f"the training loss became {losses[k].item()} by step {step}{checked} for "
                                 f"{model(k)}; lower the learning rate or the QK multiplier")


class FixedSetBatches:
    """Mini-batches from a fixed training set [S, N, ...]: model k reads data row ``rows[k]`` (default: k) and
    reshuffles every epoch with a generator seeded by ``seeds[k]``, so a model draws the same batches whether it
    trains alone or beside others."""

    def __init__(self, inputs: torch.Tensor, labels: torch.Tensor, seeds: list[int], batch_size: int,
                 rows: list[int] | None = None) -> None:
        if batch_size > labels.shape[1]:
            raise ValueError(f"batch_size = {batch_size} exceeds the {labels.shape[1]} training examples")
        self.inputs, self.labels, self.batch_size = inputs, labels, batch_size
        self.gens = [torch.Generator().manual_seed(int(s) + 7919) for s in seeds]
        self.per_epoch = labels.shape[1] // batch_size
        self.rows = torch.as_tensor(rows if rows is not None else range(len(seeds)))[:, None].to(inputs.device)

    def indices(self, step: int) -> torch.Tensor:
        """[S, B]: the example indices every model reads at ``step`` (steps must be asked for in order)."""
        if step % self.per_epoch == 0:
            n = self.labels.shape[1]
            self.perms = torch.stack([torch.randperm(n, generator=g) for g in self.gens]).to(self.inputs.device)
        k = step % self.per_epoch
        return self.perms[:, k * self.batch_size:(k + 1) * self.batch_size]

    def __call__(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = self.indices(step)
        flat = (self.rows * self.labels.shape[1] + idx).view(-1)
        take = lambda t: t.flatten(0, 1).index_select(0, flat).view(*idx.shape, *t.shape[2:])  # noqa: E731
        return take(self.inputs), take(self.labels)


@dataclass(frozen=True)
class TrainConfig:
    """``max_steps`` mini-batch steps of ``optimizer`` (SGD, or AdamW with decoupled weight decay, both as in
    ``torch.optim``) at the schedule's rate per circuit, with ``weight_decay`` on every parameter; the loss is read
    every ``eval_every`` steps."""

    schedule: RateSchedule = field(default_factory=RateSchedule)
    batch_size: int = 32
    optimizer: str = "adamw"
    weight_decay: float = 0.0
    max_steps: int = 20_000
    eval_every: int = 200

    def __post_init__(self) -> None:
        check_optimiser_and_stop(self, ("batch_size", "max_steps", "eval_every"))
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0 (got {self.weight_decay!r})")


def optimiser(params: dict[str, torch.Tensor], tc: TrainConfig) -> torch.optim.Optimizer:
    """``torch.optim``'s SGD or AdamW over the stacked parameters, one group per circuit (its rate at step 0);
    AdamW runs fused (one pass over each tensor) on the CPU and CUDA."""
    groups = [{"params": [params[n] for n in names], "lr": tc.schedule.rate(g, 0), "weight_decay": tc.weight_decay,
               "circuit": g} for g, names in circuit_groups(params).items() if names]
    if tc.optimizer == "sgd":
        return torch.optim.SGD(groups)
    fused = all(p.device.type in ("cpu", "cuda") for p in params.values())
    return torch.optim.AdamW(groups, fused=fused or None)


@dataclass
class History:
    """Per read-out: the step and each seed's training NLL."""

    steps: list[int] = field(default_factory=list)
    train_nll: list[np.ndarray] = field(default_factory=list)


LossFn = Callable[[dict[str, torch.Tensor], torch.Tensor, torch.Tensor], torch.Tensor]


def train(params: dict[str, torch.Tensor], loss_fn: LossFn, tc: TrainConfig,
          batches: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
          monitor: Callable[[dict[str, torch.Tensor]], np.ndarray], seeds: list[int], progress: bool = True,
          desc: str = "training") -> History:
    """Train stacked models in place on ``batches(step)`` for ``max_steps`` steps; ``loss_fn`` gives one loss per
    model (their sum is minimised: the seeds do not interact). Every ``eval_every`` steps, and at the end,
    ``monitor(params)`` returns each model's NLL. ``seeds[k]`` names model k in errors."""
    opt = optimiser(params, tc)
    ramps = tc.schedule.qk_schedule == "ramp"
    rates = f"lr = {tc.schedule.lr}, qk_mult = {tc.schedule.qk_mult}"
    hist = History()
    steps = bar(range(tc.max_steps), desc, enabled=progress, leave=False)
    for step in steps:
        inputs, labels = batches(step)
        loss = loss_fn(params, inputs, labels)
        check_finite(loss, step, lambda k: f"seed {seeds[k]} ({rates})")
        opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        if ramps:
            for group in opt.param_groups:
                group["lr"] = tc.schedule.rate(group["circuit"], step)
        opt.step()
        if (step + 1) % tc.eval_every == 0 or step + 1 == tc.max_steps:
            nll = monitor(params)
            hist.steps.append(step + 1)
            hist.train_nll.append(nll)
            steps.set_postfix_str(f"max NLL {nll.max():.2e}")
    return hist

