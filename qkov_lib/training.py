"""Training many seeds of an autograd model at once (a leading seed dimension), with per-seed early stopping at a
target NLL: the real-data classifiers. The synthetic task's models train with ``engine``."""
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
    """The checks every training config shares: a known optimiser, ``target_nll`` >= 0 and positive integer sizes."""
    if cfg.optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)} (got {cfg.optimizer!r})")
    require_positive_ints(cfg, positive_ints)
    if not cfg.target_nll >= 0:
        raise ValueError(f"target_nll must be >= 0, 0 meaning no early stop (got {cfg.target_nll!r})")


@dataclass(frozen=True)
class TrainConfig:
    """Mini-batch training until every seed's training NLL is <= ``target_nll`` (checked every ``eval_every``
    steps; 0 disables the check) or ``max_steps`` is reached. ``weight_decay`` maps a group (qk, ov, other) to
    decoupled decay."""

    schedule: RateSchedule = field(default_factory=RateSchedule)
    batch_size: int = 32
    optimizer: str = "sgd"
    weight_decay: tuple[tuple[str, float], ...] = ()
    target_nll: float = 1e-3
    max_steps: int = 20_000
    eval_every: int = 200
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        check_optimiser_and_stop(self, ("batch_size", "max_steps", "eval_every"))
        for group, value in self.weight_decay:
            if group not in ("qk", "ov", "other") or not value >= 0:
                raise ValueError(f"weight_decay entries must be (group in qk/ov/other, value >= 0); got "
                                 f"({group!r}, {value!r})")


@dataclass
class History:
    """Per evaluation: the step and each seed's training NLL; per seed: the step it stopped at (-1: hit the cap)."""

    steps: list[int]
    train_nll: list[np.ndarray]
    stopped_at: np.ndarray

    @property
    def hit_cap(self) -> np.ndarray:
        return self.stopped_at < 0


def _check_finite(loss: torch.Tensor, step: int, seeds: list[int], tc: TrainConfig) -> None:
    bad = ~torch.isfinite(loss)
    if bad.any():
        seed = seeds[int(bad.nonzero()[0])]
        raise FloatingPointError(f"the training loss became {loss[bad][0].item()} at step {step} for seed {seed}; "
                                 f"lower the learning rate (lr = {tc.schedule.lr}) or the QK multiplier "
                                 f"(qk_mult = {tc.schedule.qk_mult})")


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


LossFn = Callable[[dict[str, torch.Tensor], torch.Tensor, torch.Tensor], torch.Tensor]


def train(params: dict[str, torch.Tensor], loss_fn: LossFn, tc: TrainConfig,
          batches: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
          monitor: Callable[[dict[str, torch.Tensor]], np.ndarray], seeds: list[int], progress: bool = True,
          desc: str = "training") -> History:
    """Train stacked models in place on ``batches(step)``; ``loss_fn`` gives one loss per model. Every
    ``eval_every`` steps ``monitor(params)`` returns each model's NLL; a model that reaches ``target_nll`` is
    frozen there. Stops when all models are frozen or after ``max_steps``. ``seeds[k]`` names model k in errors.
    """
    n_models = len(seeds)
    group_of = {name: g for g, names in circuit_groups(params).items() for name in names}
    decay = dict(tc.weight_decay)
    state = {k: (torch.zeros_like(p), torch.zeros_like(p)) for k, p in params.items()} if tc.optimizer == "adamw" \
        else {}
    active = torch.ones(n_models, dtype=torch.bool)
    hist = History([], [], np.full(n_models, -1))
    steps = bar(range(tc.max_steps), desc, enabled=progress, leave=False)
    for step in steps:
        inputs, labels = batches(step)
        loss = loss_fn(params, inputs, labels)
        _check_finite(loss, step, seeds, tc)
        grads = torch.autograd.grad(loss.sum(), list(params.values()))
        with torch.no_grad():
            mask = None if active.all() else active.to(loss.device)
            for (name, p), g in zip(params.items(), grads):
                group = group_of[name]
                _update(p, g, state.get(name), tc, tc.schedule.rate(group, step), decay.get(group, 0.0), step,
                        None if mask is None else mask.view(-1, *[1] * (p.dim() - 1)))
        if (step + 1) % tc.eval_every == 0 or step + 1 == tc.max_steps:
            nll = monitor(params)
            hist.steps.append(step + 1)
            hist.train_nll.append(nll)
            newly = (nll <= tc.target_nll) & active.numpy() if tc.target_nll > 0 else np.zeros(n_models, bool)
            hist.stopped_at[newly] = step + 1
            active &= ~torch.as_tensor(newly)
            steps.set_postfix_str(f"max NLL {nll.max():.2e}, {int(active.sum())} running")
            if not active.any():
                break
    return hist


def _update(p: torch.Tensor, g: torch.Tensor, state, tc: TrainConfig, lr: float, wd: float, step: int,
            mask: torch.Tensor | None) -> None:
    """One SGD or AdamW step (decoupled weight decay), applied only to the seeds still training (``mask`` [S, 1...];
    None: all). AdamW's moments m, v are bias-corrected: p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
    + lr wd p. With every seed training, PyTorch's fused AdamW kernel does it in one pass (the embedding's update was
    most of a real-data step); else in place with two temporaries."""
    if tc.optimizer == "sgd":
        delta = g + wd * p
    elif mask is None and p.device.type in ("cpu", "cuda"):  # the same step in one fused pass, 10x faster
        (m, v), (b1, b2) = state, tc.betas
        torch._fused_adamw_([p], [g], [m], [v], [], [torch.tensor(float(step + 1), device=p.device)], lr=lr,
                            beta1=b1, beta2=b2, weight_decay=wd, eps=tc.eps, amsgrad=False, maximize=False)
        return
    else:
        m, v = state
        b1, b2 = tc.betas
        g = g if mask is None else g * mask
        m.lerp_(g, 1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        delta = m.div(v.div(1 - b2 ** (step + 1)).sqrt_().add_(tc.eps)).div_(1 - b1 ** (step + 1))
        if wd:
            delta.add_(p, alpha=wd)
    p.sub_(delta if mask is None else delta * mask, alpha=lr)
