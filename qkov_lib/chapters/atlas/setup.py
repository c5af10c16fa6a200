"""The atlas's setup and profiles: Figure 2's task and training, the grid's axes, the ablation's factors and budget, and
where the sweep runs."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ...core.validation import is_positive_int
from ...models import check_init
from ...runs import fig2_panels
from ...runs.synthetic_runs import SyntheticTask
from ...train.optim import check_rate

PER_SETTING = ("inits", "lrs", "scaled_scores")  # the parameters a setting takes its values from
ABLATION = ("ablation_factors", "ablation_speedup", "ablation_cap")  # the ablation's own: each run's cell holds them
RUN_ONLY = ("scheduler", "workers")  # where the sweep runs, which changes no number
PAPER_LR = fig2_panels.Setup().lr  # the paper's and the authors' SGD rate, 0.01, which the ablation's speedup scales


@dataclass(frozen=True)
class Factor:
    """One factor of the ablation: a short name and the keys of fig2_dtap's official profile that it sets (switched
    off, each key keeps the paper's value, ``fig2_dtap.Setup``'s default); ``pages.factor_text`` says what it does."""

    key: str
    name: str
    keys: tuple[str, ...]


# The official profile's keys, every one in exactly one factor (tests/unit/chapters/test_atlas.py checks it): one thing
# the authors' code does differently per factor, so that a flip can be attributed.
FACTORS = (
    Factor("layout", "token layout", ("layout", "vocab_size", "seq_len", "seq_len_gh")),
    Factor("weights", "distinct-token weights", ("distinct_weights",)),
    Factor("scaling", "score scaling", ("score_scale",)),
    Factor("fresh", "fresh batches", ("fresh_batches",)),
    Factor("classes", "random classes", ("class_draw",)),
    Factor("collapsed", "collapsed start", ("collapsed_init",)),
    Factor("init", "per-panel initialisation", ("pytorch_init",)),
    Factor("multipliers", "the code's multipliers", ("mult_e", "ramp_f")),
    Factor("budgets", "per-panel budgets and stop rule", ("panel_steps", "panel_stop", "max_steps", "eval_every")),
)
FACTOR_KEYS = tuple(f.key for f in FACTORS)


@dataclass(frozen=True, kw_only=True)
class Setup(SyntheticTask):
    """Figure 2's task and training (``SyntheticTask``), and the grid: [init kind, scale] pairs, learning rates,
    score scalings and multiplier sets [mult_e, ramp_f, mult_g, ramp_h]; the ablation's factors and budget; where the
    sweep runs (a Dask scheduler's address, ``"serial"``, or None: a local cluster of ``workers`` processes, one per
    core when None). The paper states one setting, partly unstated: the grid around it is this companion's."""

    inits: tuple[tuple[str, float], ...] = (
        ("identity", 1e-6),
        ("balanced", 0.01),
        ("balanced", 0.1),
        ("balanced", 1.0),
        ("pytorch", 1.0),
    )  # the authors' and around it
    lrs: tuple[float, ...] = (0.01, 0.1, 1.0)  # SGD's rate: the authors' 0.01 and larger
    scaled_scores: tuple[bool, ...] = (False, True)  # no score scaling (eq. 1), or the authors' 1/sqrt(d)
    mult_sets: tuple[tuple[float, float, float, float], ...] = (
        (10.0, 20.0, 5.0, 10.0),
        (20.0, 40.0, 5.0, 10.0),
    )  # the paper's multipliers (Figure 2), the code's
    ablation_factors: tuple[str, ...] = FACTOR_KEYS  # the factors switched one at a time (all of FACTORS)
    ablation_speedup: int = 1  # the rate x this, step counts / this; 1: the paper's 0.01, the authors' budgets
    ablation_cap: int | None = None  # a cap on every ablation run's steps (None: the budgets alone, as the authors)
    scheduler: str | None = None  # a Dask scheduler's address, "serial", or None: a local cluster
    workers: int | None = None  # the local cluster's processes (None: one per core)

    def __post_init__(self) -> None:
        """Each axis value checked where its kind is checked (an initialisation, a rate, Figure 2's multipliers), so
        every setting of the grid is a valid Figure 2 setup; then the ablation's parameters and the sweep's place."""
        super().__post_init__()
        for name in (*PER_SETTING, "mult_sets"):
            if not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty list (got {list(getattr(self, name))!r})")
        try:
            for kind, scale in self.inits:
                check_init(kind, scale)
        except ValueError as err:
            raise ValueError(f"inits, each [kind, scale]: {err}") from None
        for lr in self.lrs:
            check_rate("each of lrs", lr)
        for mults in self.mult_sets:
            if len(mults) != len(fig2_panels.MULTIPLIERS):
                raise ValueError(
                    f"each of mult_sets must be [{', '.join(fig2_panels.MULTIPLIERS)}] (got {list(mults)})"
                )
            try:
                fig2_panels.check_multipliers(dict(zip(fig2_panels.MULTIPLIERS, mults)))
            except ValueError as err:
                raise ValueError(f"mult_sets: {err}") from None
        self._check_ablation()
        if self.scheduler == "":
            raise ValueError("scheduler must be None, 'serial' or a scheduler address (got '')")
        if not (self.workers is None or is_positive_int(self.workers)):
            raise ValueError(f"workers must be None (one per core) or an integer >= 1 (got {self.workers!r})")

    def _check_ablation(self) -> None:
        """The ablation's parameters: known, distinct factors, a whole-number speedup, a positive cap or None."""
        unknown = [f for f in self.ablation_factors if f not in FACTOR_KEYS]
        if not self.ablation_factors or unknown or len(set(self.ablation_factors)) < len(self.ablation_factors):
            raise ValueError(
                f"ablation_factors must be a non-empty list of distinct factors from "
                f"{', '.join(FACTOR_KEYS)} (got {list(self.ablation_factors)!r})"
            )
        if not is_positive_int(self.ablation_speedup):
            raise ValueError(
                f"ablation_speedup must be an integer >= 1: the ablation's rate is {PAPER_LR:g} times "
                f"it and its step counts are divided by it (got {self.ablation_speedup!r})"
            )
        if not (self.ablation_cap is None or is_positive_int(self.ablation_cap)):
            raise ValueError(
                f"ablation_cap must be None (the budgets alone) or an integer >= 1 (got {self.ablation_cap!r})"
            )


# A grid that fits a CPU: three starts, three rates, the paper's multipliers, 60,000 steps (ramps over 20,000).
CPU_GRID = dict(
    inits=(("identity", 1e-6), ("balanced", 0.1), ("pytorch", 1.0)),
    lrs=(0.01, 0.1, 1.0),
    mult_sets=((10.0, 20.0, 5.0, 10.0),),
    max_steps=60_000,
    ramp_steps=20_000,
)
PROFILES = {
    "default": dict(**CPU_GRID, ablation_speedup=10),
    # The ablation at the authors' rate 0.01 and their own budgets. The grid is this companion's, not theirs: under
    # official it is the default's (the paper's 60 settings at 700,000 steps would take days on a CPU).
    "official": dict(**CPU_GRID, ablation_speedup=1),
    "smoke": dict(
        seeds=(0, 1),
        n_train=320,
        n_test=320,
        inits=(("identity", 1e-6), ("balanced", 0.1)),
        lrs=(1.0,),
        scaled_scores=(False,),
        mult_sets=((10.0, 20.0, 5.0, 10.0),),
        max_steps=200,
        eval_every=20,
        ramp_steps=100,
        ablation_speedup=100,
        ablation_cap=100,
        scheduler="serial",
    ),
}


def values(setup: Any) -> dict[str, Any]:
    """A setup's parameters (its fields that are arguments) by name."""
    return {f.name: getattr(setup, f.name) for f in fields(setup) if f.init}


def shared(setup: Setup) -> dict[str, Any]:
    """What every setting shares (the sweep's ``common``; with the code, it names the folder of finished cells)."""
    return {k: v for k, v in values(setup).items() if k not in PER_SETTING + ABLATION + RUN_ONLY}
