"""Lemma 3 (Appendix C), checked: the proof's steps in sympy and the four bounds along very long trajectories."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..theory import RatioSweep, Trajectory, integrate_many
from ..validation import require_positive_numbers
from ..verdicts import SOLVER_SLACK, claim_table


@dataclass(frozen=True, kw_only=True)
class Setup(RatioSweep):
    """Figure 4's ratio sweep integrated much further (to ``target_loss``, within ``t_max``), and the shares of the
    log^2 value at which the regime is said to end."""

    target_loss: float = 1e-30  # far past Figure 4's 1e-4: about t = 1e32, where every bound is tested hard
    t_max: float = 1e40  # the solver's horizon (never reached at the default target)
    levels: tuple[float, ...] = (0.9, 0.5)  # shares of the log^2 value of mu_QK that mark the regime's end

    def __post_init__(self) -> None:
        super().__post_init__()
        require_positive_numbers("t_max", [self.t_max])
        if not all(0 < v < 1 for v in self.levels):
            raise ValueError(f"levels must lie in (0, 1) (got {list(self.levels)!r})")


PROFILES = {"smoke": dict(ratios=(0.01, 100.0), target_loss=1e-6)}


def run(setup: Setup) -> list[Trajectory]:
    """Every ratio's trajectory to the target loss, 2000 log-spaced read-outs each; an error if one stops short."""
    trajs = integrate_many(setup.settings(), target_loss=setup.target_loss, t_max=setup.t_max, n_out=2000)
    if not all(tr.reached for tr in trajs):
        raise RuntimeError(f"a trajectory stopped at t_max = {setup.t_max:g} before the loss reached "
                           f"{setup.target_loss:g}; raise t_max")
    return trajs


def claims(symbolic: pd.DataFrame, tightness: pd.DataFrame) -> pd.DataFrame:
    """Section 6.1 / Lemma 3: the proof's steps (sympy) and the four bounds along long trajectories."""
    t, slack = tightness, SOLVER_SLACK
    rows = [
        ("proof_steps", "the proof's steps (ratio (29), sandwich, comparison solutions, integrations) hold",
         f"{int(symbolic['holds'].sum())} of {len(symbolic)} identities proved", bool(symbolic["holds"].all())),
        ("mu_ov_bounds", "log(1 + eta alpha_0 t/(M b)) <= mu_OV(t) <= log(1 + eta alpha_0 t/b)/alpha_0",
         f"min value/lower {t['min mu_OV / lower'].min():.6f}, max value/upper {t['max mu_OV / upper'].max():.4f}",
         bool(t["min mu_OV / lower"].min() >= 1 - slack and t["max mu_OV / upper"].max() <= 1 + slack)),
        ("mu_qk_bounds", "the two mu_QK bounds (the lower one while alpha <= 1 - delta)",
         f"min value/lower {t['min mu_QK / lower'].min():.6f}, max value/upper {t['max mu_QK / upper'].max():.4f}",
         bool(t["min mu_QK / lower"].min() >= 1 - slack and t["max mu_QK / upper"].max() <= 1 + slack)),
    ]
    return claim_table(rows)
