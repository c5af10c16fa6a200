"""Learning-rate groups by circuit (QK, OV, other) with constant multipliers or linear ramps (Sections 4 and 7)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

CIRCUIT_OF = {"W_Q": "qk", "W_K": "qk", "W_QK": "qk", "W_O": "ov", "W_V": "ov", "W_OV": "ov"}
GROUPS = ("qk", "ov", "other")
SCHEDULES = ("constant", "ramp")


def circuit_groups(names: Iterable[str]) -> dict[str, list[str]]:
    """Each parameter name in exactly one group: QK (W_Q, W_K, W_QK), OV (W_O, W_V, W_OV), everything else 'other'.
    A dotted name (``blocks.0.W_Q``) is grouped by its last part."""
    groups: dict[str, list[str]] = {g: [] for g in GROUPS}
    for name in names:
        groups[CIRCUIT_OF.get(name.rsplit(".", 1)[-1], "other")].append(name)
    return groups


def check_rate(name: str, value: object) -> None:
    """Raise ValueError unless ``value``, the learning rate or multiplier ``name``, is a finite number > 0."""
    if not (isinstance(value, (int, float)) and value > 0 and value < float("inf")):
        raise ValueError(f"{name} must be a finite number > 0 (got {value!r})")


@dataclass(frozen=True)
class RateSchedule:
    """Per-group learning rates: base ``lr`` times a multiplier; the QK multiplier is constant (k) or a linear ramp
    from 1 to k over ``ramp_steps`` steps (the paper's "1x -> kx over training"), then held at k."""

    lr: float = 1e-2
    qk_mult: float = 1.0
    ov_mult: float = 1.0
    other_mult: float = 1.0
    qk_schedule: str = "constant"
    ramp_steps: int = 1

    def __post_init__(self) -> None:
        for name in ("lr", "qk_mult", "ov_mult", "other_mult"):
            check_rate(name, getattr(self, name))
        if self.qk_schedule not in SCHEDULES:
            raise ValueError(f"qk_schedule must be one of {', '.join(SCHEDULES)} (got {self.qk_schedule!r})")
        if not (isinstance(self.ramp_steps, int) and self.ramp_steps >= 1):
            raise ValueError(f"ramp_steps must be an integer >= 1 (got {self.ramp_steps!r})")

    def rate(self, group: str, step: int) -> float:
        """The learning rate of ``group`` at optimisation step ``step`` (0-based)."""
        if group == "qk":
            if self.qk_schedule == "ramp":
                frac = min(step / self.ramp_steps, 1.0)
                return self.lr * (1.0 + (self.qk_mult - 1.0) * frac)
            return self.lr * self.qk_mult
        return self.lr * (self.ov_mult if group == "ov" else self.other_mult)
