"""What a stack of eq. (1) models trains with (Section 4): each model's run (``RunSpec``: its rates, cap, OV decay and
stop) and seed (``Member``), and what the stack shares (``StackConfig``: the circuits, the optimiser, the batch, the
stop rule)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.validation import require_positive_ints
from .optim import RateSchedule
from .training import check_optimiser_and_stop

QK_KINDS = ("factorised", "collapsed", "fixed")


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """How one run trains: its learning rates (``optim.RateSchedule``: the base rate, the QK and OV multipliers and
    the QK ramp), its step cap, decoupled weight decay on its OV parameters, and how it stops early: the stack's rule,
    the authors' rule with epochs of ``stop_epoch`` steps (see ``StackConfig``), or not at all (``early_stop=False``).
    Every seed of the run trains with it."""

    rates: RateSchedule
    max_steps: int
    ov_decay: float = 0.0
    stop_epoch: int | None = None
    early_stop: bool = True

    def __post_init__(self) -> None:
        require_positive_ints(self, ("max_steps",))
        if not self.ov_decay >= 0:
            raise ValueError(f"ov_decay must be >= 0 (got {self.ov_decay!r})")
        if self.stop_epoch is not None:
            require_positive_ints(self, ("stop_epoch",))


@dataclass(frozen=True)
class Member:
    """One model of a stack: its seed (initialisation and batch order), the data row it reads, and how its run
    trains."""

    seed: int
    row: int
    spec: RunSpec


@dataclass(frozen=True)
class StackConfig:
    """What every model of a stack shares: the circuits' kinds, the optimiser, the batch size and the stop rule.

    Stop rule (Section 4, "train until NLL <= 0.001"): every ``eval_every`` steps each model's mean mini-batch loss
    over those steps is read; a model whose mean is at most ``gate`` x ``target_nll`` then has its NLL on the whole
    training set computed, and stops if that is <= ``target_nll``. ``target_nll = 0`` disables stopping.

    The authors' rule, for a model with ``RunSpec.stop_epoch`` = E (a multiple of ``eval_every``): at the end of each
    epoch of E steps the sum of its mini-batch losses since the last reset, divided by E, is compared with
    ``target_nll`` and the model stops if it is not larger; the sum is reset after every 100th epoch, as their
    notebooks print and reset it there (so after a reset it is one epoch's mean, then the sum of two, ...)."""

    qk: str = "factorised"
    ov_factorised: bool = True
    ov_bias: bool = False
    score_scale: float = 1.0
    optimizer: str = "sgd"
    batch_size: int = 32
    target_nll: float = 1e-3
    eval_every: int = 200
    gate: float = 2.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        if self.qk not in QK_KINDS:
            raise ValueError(f"qk must be one of {', '.join(QK_KINDS)} (got {self.qk!r})")
        check_optimiser_and_stop(self, ("batch_size", "eval_every"))
        if not self.gate >= 1:
            raise ValueError(f"gate must be >= 1 (got {self.gate!r})")

    @staticmethod
    def of(parameterisation: str, **kwargs) -> StackConfig:
        """The stack for a parameterisation name (FAFO, FACO, CAFO, CACO)."""
        return StackConfig(
            qk="factorised" if parameterisation[:2] == "FA" else "collapsed",
            ov_factorised=parameterisation[2:] == "FO",
            **kwargs,
        )


def model_label(m: Member) -> str:
    """A model, as an error names it."""
    return f"the model with seed {m.seed} (lr = {m.spec.rates.lr}, QK multiplier = {m.spec.rates.qk_mult})"
