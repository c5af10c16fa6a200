"""Training many seeds at once (a leading seed dimension), with per-seed early stopping at a target NLL."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from .models import AttentionConfig, forward
from .optim import RateSchedule, circuit_groups
from .progress import bar
from .validation import require_positive_ints

OPTIMIZERS = ("sgd", "adamw")


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
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)} (got {self.optimizer!r})")
        require_positive_ints(self, ("batch_size", "max_steps", "eval_every"))
        if not self.target_nll >= 0:
            raise ValueError(f"target_nll must be >= 0, 0 meaning no early stop (got {self.target_nll!r})")
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


@torch.no_grad()
def evaluate(params: dict[str, torch.Tensor], cfg: AttentionConfig, tokens: torch.Tensor, labels: torch.Tensor,
             distinct: torch.Tensor | None = None, chunk: int = 1024) -> dict[str, np.ndarray]:
    """Per seed and example: NLL, probability of the true label, correctness, attention on the query position and
    (with a mask) the attention mass on distinct tokens. Inputs carry the seed dimension: tokens [S, N, T],
    labels [S, N], distinct [S, N, T]."""
    out: dict[str, list[torch.Tensor]] = {"nll": [], "prob_true": [], "correct": [], "attn_query": [],
                                          "attn_distinct": []}
    for start in range(0, tokens.shape[1], chunk):
        sl = slice(start, start + chunk)
        logits, attn = forward(params, cfg, tokens[:, sl])
        logp = torch.log_softmax(logits, dim=-1)
        lp_true = torch.gather(logp, 2, labels[:, sl, None]).squeeze(-1)
        out["nll"].append(-lp_true)
        out["prob_true"].append(lp_true.exp())
        out["correct"].append(logits.argmax(-1) == labels[:, sl])
        out["attn_query"].append(attn[:, :, -1])
        if distinct is not None:
            out["attn_distinct"].append((attn * distinct[:, sl]).sum(-1))
    return {k: torch.cat(v, dim=1).cpu().numpy() for k, v in out.items() if v}


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

    def __call__(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        if step % self.per_epoch == 0:
            n = self.labels.shape[1]
            self.perms = torch.stack([torch.randperm(n, generator=g) for g in self.gens]).to(self.inputs.device)
        k = step % self.per_epoch
        idx = self.perms[:, k * self.batch_size:(k + 1) * self.batch_size]
        return self.inputs[self.rows, idx], self.labels[self.rows, idx]


LossFn = Callable[[dict[str, torch.Tensor], torch.Tensor, torch.Tensor], torch.Tensor]


def attention_loss(cfg: AttentionConfig) -> LossFn:
    """Per-model mean cross-entropy of eq. (2) on a batch (tokens [S, B, T], labels [S, B]) -> [S]."""
    def loss_fn(params: dict[str, torch.Tensor], tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits, _ = forward(params, cfg, tokens)
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels, reduction="none").mean(1)
    return loss_fn


def train(params: dict[str, torch.Tensor], loss_fn: LossFn, tc: TrainConfig,
          batches: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
          monitor: Callable[[dict[str, torch.Tensor]], np.ndarray], seeds: list[int], progress: bool = True,
          desc: str = "training", recorder: UpdateRatios | None = None) -> History:
    """Train stacked models in place on ``batches(step)``; ``loss_fn`` gives one loss per model. Every
    ``eval_every`` steps ``monitor(params)`` returns each model's NLL; a model that reaches ``target_nll`` is
    frozen there. Stops when all models are frozen or after ``max_steps``. ``seeds[k]`` names model k in errors.
    ``recorder``, if given, is shown the update of every ``recorder.every``-th step."""
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
            before = {k: p.clone() for k, p in params.items()} if recorder and step % recorder.every == 0 else None
            mask = active.to(loss.device)
            for (name, p), g in zip(params.items(), grads):
                group = group_of[name]
                _update(p, g, state.get(name), tc, tc.schedule.rate(group, step), decay.get(group, 0.0), step,
                        mask.view(-1, *[1] * (p.dim() - 1)))
            if before is not None:
                recorder(step, params, {k: params[k] - before[k] for k in params}, active.numpy())
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


class UpdateRatios:
    """The effective QK/OV ratio of each step it sees (Section 8's Adam question): for each model,
    (|dQK| / |QK|) / (|dOV| / |OV|), with |.| the Frobenius norm over a circuit's parameters. Under plain gradient
    flow on the ansatz this is what r = eta_QK/eta_OV scales; under AdamW a nominal multiplier need not."""

    def __init__(self, every: int = 50) -> None:
        if not (isinstance(every, int) and every >= 1):
            raise ValueError(f"every must be an integer >= 1 (got {every!r})")
        self.every = every
        self.rows: list[dict] = []

    def __call__(self, step: int, params: dict[str, torch.Tensor], updates: dict[str, torch.Tensor],
                 active: np.ndarray) -> None:
        groups = circuit_groups(params)

        def norm(tensors: dict[str, torch.Tensor], group: str) -> np.ndarray:
            sq = sum(tensors[k].flatten(1).pow(2).sum(1) for k in groups[group])
            return sq.sqrt().cpu().numpy()

        rel = {g: norm(updates, g) / np.maximum(norm(params, g), 1e-30) for g in ("qk", "ov")}
        for i in np.flatnonzero(active):
            self.rows.append({"step": step, "model": int(i), "qk_rel_update": float(rel["qk"][i]),
                              "ov_rel_update": float(rel["ov"][i]),
                              "effective_ratio": float(rel["qk"][i] / max(rel["ov"][i], 1e-300))})


def _update(p: torch.Tensor, g: torch.Tensor, state, tc: TrainConfig, lr: float, wd: float, step: int,
            mask: torch.Tensor) -> None:
    """One SGD or AdamW step (decoupled weight decay), applied only to the seeds still training."""
    if tc.optimizer == "sgd":
        delta = g + wd * p
    else:
        m, v = state
        b1, b2 = tc.betas
        m.mul_(b1).add_(g * mask, alpha=1 - b1)
        v.mul_(b2).addcmul_(g * mask, g * mask, value=1 - b2)
        m_hat, v_hat = m / (1 - b1 ** (step + 1)), v / (1 - b2 ** (step + 1))
        delta = m_hat / (v_hat.sqrt() + tc.eps) + wd * p
    p.sub_(lr * delta * mask)
