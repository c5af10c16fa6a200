"""The real-data training loop (Section 7): many seeds of an autograd model trained at once (a leading seed
dimension) with ``torch.optim``'s SGD (with momentum) or AdamW, the learning rate set per parameter group (QK, OV,
the token embedding, other; some groups frozen), a rate schedule from ``torch.optim.lr_scheduler`` (cosine after a
linear warm-up, or OneCycle), each seed's gradient clipped to its own global norm (``torch.nn.utils``), and gradient
accumulation. Also what every training loop shares: the optimisers' names, the batch order of a fixed training set,
and the error for a loss that is no longer finite. The synthetic task's models train with ``engine``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..core.progress import bar
from ..core.validation import require_positive_ints
from .optim import RateSchedule, circuit_groups

OPTIMIZERS = ("sgd", "adamw")
LR_SCHEDULES = ("constant", "cosine", "onecycle")  # the rate over the optimiser steps (``lr_scheduler``)
# Which parameters train at the QK rate (the faster condition's multiplier), by a parameter name's last dotted part.
# The companion's definition is W_Q and W_K only; the others are the authors' notebooks' groups.
QK_PARAMS = {
    "wq_wk": ("W_Q", "W_K"),
    "wq_wk_bq_bk": ("W_Q", "W_K", "b_Q", "b_K"),  # SQuAD: every parameter of the q and k projections
    "wq_wk_embed": ("W_Q", "W_K", "embed"),  # HateXplain: also the token embedding
    "wq_wk_bq_bk_embed_pos": ("W_Q", "W_K", "b_Q", "b_K", "embed", "pos"),  # SVA: also both embeddings
}
# Parameters left out of the optimiser (they still take part in the forward pass and in the clipping norm).
FROZEN = {"none": (), "mlp": ("mlp_in", "mlp_out", "b_in", "b_out")}
WARMUP_START = 1e-8  # ``LinearLR``'s first factor (it must be > 0): the warm-up climbs from ~0 to the full rate


def check_optimiser_and_stop(cfg, positive_ints: tuple[str, ...]) -> None:
    """The checks every training config shares: a known optimiser, ``target_nll`` >= 0 (where it has one) and
    positive integer sizes."""
    if cfg.optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)} (got {cfg.optimizer!r})")
    require_positive_ints(cfg, positive_ints)
    if not getattr(cfg, "target_nll", 0) >= 0:
        raise ValueError(f"target_nll must be >= 0, 0 meaning no early stop (got {cfg.target_nll!r})")


def check_loop(cfg: Any) -> None:
    """The checks of a training loop's options (``TrainConfig``'s, and a setup's that carries the same names, as
    ``RealSetup`` does): decay, momentum, schedule and warm-up, clipping, the QK and frozen sets, the embedding's
    rate and decay."""
    if not cfg.weight_decay >= 0:
        raise ValueError(f"weight_decay must be >= 0 (got {cfg.weight_decay!r})")
    if not 0 <= cfg.momentum < 1:
        raise ValueError(f"momentum must lie in [0, 1) (got {cfg.momentum!r})")
    if cfg.momentum and cfg.optimizer != "sgd":
        raise ValueError(f"momentum is SGD's; AdamW has its betas (got momentum = {cfg.momentum!r})")
    if cfg.lr_schedule not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {', '.join(LR_SCHEDULES)} (got {cfg.lr_schedule!r})")
    if not (0 <= cfg.warmup < 1 and (cfg.warmup > 0 or cfg.lr_schedule != "onecycle")):
        raise ValueError(f"warmup must lie in [0, 1), and in (0, 1) for onecycle (got {cfg.warmup!r})")
    if not (cfg.clip_norm is None or cfg.clip_norm > 0):
        raise ValueError(f"clip_norm must be > 0, or None for no clipping (got {cfg.clip_norm!r})")
    if cfg.qk_params not in QK_PARAMS:
        raise ValueError(f"qk_params must be one of {', '.join(QK_PARAMS)} (got {cfg.qk_params!r})")
    if cfg.frozen not in FROZEN:
        raise ValueError(f"frozen must be one of {', '.join(FROZEN)} (got {cfg.frozen!r})")
    if not (cfg.embed_mult > 0 and (cfg.embed_decay is None or cfg.embed_decay >= 0)):
        raise ValueError(
            f"embed_mult must be > 0 and embed_decay >= 0 or None (got {cfg.embed_mult!r}, {cfg.embed_decay!r})"
        )


def check_finite(losses: torch.Tensor, step: int, model: Callable[[int], str], every: int = 1) -> None:
    """One clear error when a model's loss (``losses[k]``, summed over the last ``every`` steps) is not finite;
    ``model(k)`` names the model and its learning rates."""
    bad = ~torch.isfinite(losses)
    if bad.any():
        k = int(bad.nonzero()[0])
        checked = f" (checked every {every} steps)" if every > 1 else ""
        raise FloatingPointError(
            f"the training loss became {losses[k].item()} by step {step}{checked} for "
            f"{model(k)}; lower the learning rate or the QK multiplier"
        )


class FixedSetBatches:
    """Mini-batches from a fixed training set [S, N, ...]: model k reads data row ``rows[k]`` (default: k) and
    reshuffles every epoch with a generator seeded by ``seeds[k]``, so a model draws the same batches whether it
    trains alone or beside others."""

    def __init__(
        self,
        inputs: torch.Tensor,
        labels: torch.Tensor,
        seeds: list[int],
        batch_size: int,
        rows: list[int] | None = None,
    ) -> None:
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
        return self.perms[:, k * self.batch_size : (k + 1) * self.batch_size]

    def __call__(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = self.indices(step)
        flat = (self.rows * self.labels.shape[1] + idx).view(-1)
        take = lambda t: t.flatten(0, 1).index_select(0, flat).view(*idx.shape, *t.shape[2:])  # noqa: E731
        return take(self.inputs), take(self.labels)


@dataclass(frozen=True)
class TrainConfig:
    """``max_steps`` mini-batch steps of ``optimizer`` (SGD with ``momentum``, or AdamW with decoupled weight decay,
    both as in ``torch.optim``) at the schedule's rate per group, with ``weight_decay`` on every parameter (the token
    embedding: ``embed_decay`` where given); the loss is read every ``eval_every`` steps.

    The groups: the ``qk_params`` set (``QK_PARAMS``) at the QK rate, the OV circuit at the OV rate, the token
    embedding at ``embed_mult`` x the base rate where ``embed_mult`` or ``embed_decay`` is set, the rest at the
    'other' rate; the ``frozen`` set (``FROZEN``) is not trained. Every ``accumulate`` mini-batches make one
    optimiser step (their losses averaged); before it, each seed's gradient is clipped to global norm ``clip_norm``
    (over that seed's slices of every parameter, frozen ones included, so a seed trains as it would alone); after
    it, ``lr_schedule`` moves the rates: constant, cosine to 0 after a linear warm-up over ``warmup`` of the
    optimiser steps, or OneCycle with ``warmup`` as its rising share (``torch.optim.lr_scheduler``'s defaults)."""

    schedule: RateSchedule = field(default_factory=RateSchedule)
    batch_size: int = 32
    optimizer: str = "adamw"
    weight_decay: float = 0.0
    max_steps: int = 20_000
    eval_every: int = 200
    momentum: float = 0.0
    lr_schedule: str = "constant"
    warmup: float = 0.0
    clip_norm: float | None = None
    accumulate: int = 1
    qk_params: str = "wq_wk"
    frozen: str = "none"
    embed_mult: float = 1.0
    embed_decay: float | None = None

    def __post_init__(self) -> None:
        check_optimiser_and_stop(self, ("batch_size", "max_steps", "eval_every", "accumulate"))
        if self.max_steps < self.accumulate:
            raise ValueError(
                f"max_steps ({self.max_steps}) must be at least one optimiser step of accumulate = "
                f"{self.accumulate} mini-batches"
            )
        check_loop(self)
        if self.lr_schedule != "constant" and self.schedule.qk_schedule == "ramp":
            raise ValueError("a QK ramp sets the rates itself; it takes lr_schedule = 'constant'")

    def group_of(self, name: str) -> str:
        """The group of parameter ``name`` (its last dotted part decides): 'frozen', 'qk', 'embed', 'ov' or
        'other'."""
        last = name.rsplit(".", 1)[-1]
        if last in FROZEN[self.frozen]:
            return "frozen"
        if last in QK_PARAMS[self.qk_params]:
            return "qk"
        if last == "embed" and (self.embed_mult != 1.0 or self.embed_decay is not None):
            return "embed"
        return "ov" if circuit_groups([name])["ov"] else "other"

    def rate(self, group: str, step: int) -> float:
        """The rate of ``group`` before the ``lr_schedule`` (which scales every group alike)."""
        return self.schedule.lr * self.embed_mult if group == "embed" else self.schedule.rate(group, step)

    @property
    def optimiser_steps(self) -> int:
        return self.max_steps // self.accumulate


def optimiser(params: dict[str, torch.Tensor], tc: TrainConfig) -> torch.optim.Optimizer:
    """``torch.optim``'s SGD or AdamW over the stacked parameters, one group per ``TrainConfig.group_of`` (its rate
    at step 0; the frozen group left out); AdamW runs fused (one pass over each tensor) on the CPU and CUDA."""
    names: dict[str, list[str]] = {g: [] for g in ("qk", "ov", "embed", "other")}
    for name in params:
        group = tc.group_of(name)
        if group != "frozen":
            names[group].append(name)
    decay = {"embed": tc.weight_decay if tc.embed_decay is None else tc.embed_decay}
    groups = [
        {
            "params": [params[n] for n in members],
            "lr": tc.rate(g, 0),
            "weight_decay": decay.get(g, tc.weight_decay),
            "circuit": g,
        }
        for g, members in names.items()
        if members
    ]
    if tc.optimizer == "sgd":
        return torch.optim.SGD(groups, momentum=tc.momentum)
    fused = all(p.device.type in ("cpu", "cuda") for p in params.values())
    return torch.optim.AdamW(groups, fused=fused or None)


def rate_scheduler(opt: torch.optim.Optimizer, tc: TrainConfig) -> torch.optim.lr_scheduler.LRScheduler | None:
    """The ``lr_schedule`` over ``tc.optimiser_steps`` steps, stepped after every optimiser step (None: constant).
    Cosine: ``LinearLR`` from ``WARMUP_START`` to 1 over ``int(warmup * steps)`` steps, then ``CosineAnnealingLR``
    to 0 (``SequentialLR``), the schedule of ``transformers.get_cosine_schedule_with_warmup``. OneCycle: each
    group's step-0 rate as its peak, ``warmup`` as ``pct_start``, the other settings ``OneCycleLR``'s defaults."""
    sched = torch.optim.lr_scheduler
    total = tc.optimiser_steps
    if tc.lr_schedule == "onecycle":
        return sched.OneCycleLR(opt, max_lr=[g["lr"] for g in opt.param_groups], total_steps=total, pct_start=tc.warmup)
    if tc.lr_schedule == "cosine":
        warm = int(tc.warmup * total)
        cosine = sched.CosineAnnealingLR(opt, T_max=max(total - warm, 1))
        if warm == 0:
            return cosine
        linear = sched.LinearLR(opt, start_factor=WARMUP_START, end_factor=1.0, total_iters=warm)
        return sched.SequentialLR(opt, [linear, cosine], milestones=[warm])
    return None


def clip_per_seed(params: dict[str, torch.Tensor], max_norm: float) -> None:
    """Clip each seed's gradient to global norm ``max_norm`` with ``torch.nn.utils.clip_grad_norm_``, over that
    seed's slices (dimension 0) of every parameter that has a gradient: what clipping one model trained alone does.
    Each slice is handed to ``clip_grad_norm_`` as a detached view whose ``.grad`` is the gradient's slice, so the
    scaling lands in the stacked gradient."""
    grads = [p.grad for p in params.values() if p.grad is not None]
    for k in range(grads[0].shape[0] if grads else 0):
        views = []
        for g in grads:
            view = g[k]
            holder = torch.empty_like(view)
            holder.grad = view
            views.append(holder)
        torch.nn.utils.clip_grad_norm_(views, max_norm)


@dataclass
class History:
    """Per read-out: the step and each seed's training NLL."""

    steps: list[int] = field(default_factory=list)
    train_nll: list[np.ndarray] = field(default_factory=list)


LossFn = Callable[[dict[str, torch.Tensor], torch.Tensor, torch.Tensor], torch.Tensor]


def train(
    params: dict[str, torch.Tensor],
    loss_fn: LossFn,
    tc: TrainConfig,
    batches: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    monitor: Callable[[dict[str, torch.Tensor]], np.ndarray],
    seeds: list[int],
    progress: bool = True,
    desc: str = "training",
) -> History:
    """Train stacked models in place on ``batches(step)`` for ``max_steps`` mini-batch steps; ``loss_fn`` gives one
    loss per model (their sum is minimised: the seeds do not interact). Every ``accumulate`` steps make one optimiser
    step (``TrainConfig``). Every ``eval_every`` steps, and at the end, ``monitor(params)`` returns each model's NLL.
    ``seeds[k]`` names model k in errors."""
    opt = optimiser(params, tc)
    scheduler = rate_scheduler(opt, tc)
    ramps = tc.schedule.qk_schedule == "ramp"
    rates = f"lr = {tc.schedule.lr}, qk_mult = {tc.schedule.qk_mult}"
    hist = History()
    steps = bar(range(tc.max_steps), desc, enabled=progress, leave=False)
    for step in steps:
        inputs, labels = batches(step)
        loss = loss_fn(params, inputs, labels)
        check_finite(loss, step, lambda k: f"seed {seeds[k]} ({rates})")
        if tc.accumulate == 1:
            opt.zero_grad(set_to_none=True)
            loss.sum().backward()
        else:
            (loss.sum() / tc.accumulate).backward()
        if (step + 1) % tc.accumulate == 0:
            if tc.clip_norm is not None:
                clip_per_seed(params, tc.clip_norm)
            if ramps:
                for group in opt.param_groups:
                    group["lr"] = tc.schedule.rate(group["circuit"], step)
            opt.step()
            if scheduler is not None and scheduler.last_epoch + 1 < tc.optimiser_steps:  # no step past the last
                scheduler.step()
            if tc.accumulate > 1:
                opt.zero_grad(set_to_none=True)
        if (step + 1) % tc.eval_every == 0 or step + 1 == tc.max_steps:
            nll = monitor(params)
            hist.steps.append(step + 1)
            hist.train_nll.append(nll)
            steps.set_postfix_str(f"max NLL {nll.max():.2e}")
    return hist
