"""The synthetic engine's optimiser (Section 4): SGD or AdamW with decoupled decay over a stack, each model with its
own QK and OV rates (``optim.RateSchedule``) and OV decay; the relative updates of Section 8; and the subnormal
flush that keeps the CPU's matmuls fast."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from .optim import CIRCUIT_OF
from .stack import Member, StackConfig


class UpdateRatios:
    """The effective QK/OV ratio of each step it sees (Section 8's Adam question): for each model,
    (|dQK| / |QK|) / (|dOV| / |OV|), with |.| the Frobenius norm over a circuit's parameters. Under plain gradient
    flow on the ansatz this is what r = eta_QK/eta_OV scales; under AdamW a nominal multiplier need not."""

    def __init__(self, every: int = 50) -> None:
        if not (isinstance(every, int) and every >= 1):
            raise ValueError(f"every must be an integer >= 1 (got {every!r})")
        self.every = every
        self.rows: list[dict] = []

    def __call__(
        self,
        step: int,
        names: Sequence[tuple[str, int]],
        params: dict[str, torch.Tensor],
        updates: dict[str, torch.Tensor],
    ) -> None:
        """``names[k]`` = (panel, seed) of stacked model k."""

        def norm(tensors: dict[str, torch.Tensor], group: str) -> np.ndarray:
            squares = [t.flatten(1).pow(2).sum(1) for k, t in tensors.items() if circuit_of(k) == group]
            if not squares:
                raise ValueError(f"no {group} parameter among {', '.join(tensors)}; the model has no {group} circuit")
            return sum(squares[1:], squares[0]).sqrt().cpu().numpy()

        rel = {g: norm(updates, g) / np.maximum(norm(params, g), 1e-30) for g in ("qk", "ov")}
        for k, (panel, seed) in enumerate(names):
            self.rows.append(
                {
                    "step": step,
                    "panel": panel,
                    "seed": seed,
                    "qk_rel_update": float(rel["qk"][k]),
                    "ov_rel_update": float(rel["ov"][k]),
                    "effective_ratio": float(rel["qk"][k] / max(rel["ov"][k], 1e-300)),
                }
            )


@contextlib.contextmanager
def flush_denormals(enabled: bool = True) -> Iterator[None]:
    """Flush subnormal floats to zero while training (the 1e-6 initialisation's products are subnormal and make
    CPU matmuls ~10x slower); restores the previous setting."""
    if not enabled:
        yield
        return
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def circuit_of(name: str) -> str:
    """The circuit a stack parameter belongs to (``optim.CIRCUIT_OF``; Figure 3's output bias counts as OV)."""
    return CIRCUIT_OF.get(name, "ov")


class Rates:
    """Each model's QK and OV learning rate at a step, as tensors (constant rates are built once)."""

    def __init__(self, members: Sequence[Member], device: torch.device) -> None:
        self.schedules, self.device = [m.spec.rates for m in members], device
        self.ramps = any(s.qk_schedule == "ramp" for s in self.schedules)
        self.fixed = {g: torch.tensor([s.rate(g, 0) for s in self.schedules], device=device) for g in ("qk", "ov")}
        self.cache: tuple[int, dict[str, torch.Tensor]] | None = None

    def at(self, step: int, active: Sequence[int]) -> dict[str, torch.Tensor]:
        if self.cache is None or self.cache[0] != len(active):  # models only ever leave the stack
            index = torch.as_tensor(active, device=self.device)
            self.cache = (len(active), {g: r[index] for g, r in self.fixed.items()})
        rates = dict(self.cache[1])
        if self.ramps:
            rates["qk"] = torch.tensor([self.schedules[k].rate("qk", step) for k in active], device=self.device)
        return rates


class Optimiser:
    """SGD or AdamW (decoupled decay) over a stack, with a per-model rate and OV decay."""

    def __init__(self, sc: StackConfig, params: dict[str, torch.Tensor]) -> None:
        self.sc = sc
        self.state = (
            {k: (torch.zeros_like(p), torch.zeros_like(p)) for k, p in params.items()}
            if sc.optimizer == "adamw"
            else {}
        )

    def step(
        self,
        params: dict[str, torch.Tensor],
        grads: dict[str, torch.Tensor],
        rates: dict[str, torch.Tensor],
        decay: torch.Tensor | None,
        count: int,
        keep_updates: bool = False,
    ) -> dict[str, torch.Tensor]:
        """Update in place (``decay`` None: no OV decay in this stack); returns the updates if asked."""
        updates = {}
        for name, p in params.items():
            shape = (-1, *[1] * (p.dim() - 1))
            g = grads[name]
            if self.sc.optimizer == "adamw":
                m, v = self.state[name]
                b1, b2 = self.sc.betas
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                g = (m / (1 - b1**count)) / ((v / (1 - b2**count)).sqrt_().add_(self.sc.eps))
            if decay is not None and circuit_of(name) == "ov":
                g = g.addcmul_(p, decay.view(shape)) if g is grads[name] else g + decay.view(shape) * p
            lr = rates[circuit_of(name)].view(shape)
            if keep_updates:
                updates[name] = lr * g
                p.sub_(updates[name])
            else:
                p.addcmul_(g, lr, value=-1.0)
        return updates

    def keep(self, index: torch.Tensor) -> None:
        self.state = {k: (m[index], v[index]) for k, (m, v) in self.state.items()}
