"""Lemma 3 (Appendix C), checked: the proof's steps in sympy and the four bounds along very long trajectories."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from ..core.validation import require_positive_numbers
from ..metrics.verdicts import CHECK, SOLVER_SLACK, Claim, check, claim_table
from ..present.plots import line_panels, style_legend
from ..present.tables import readable
from ..present.text import scientific
from ..theory import RatioSweep, Trajectory, integrate_many


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


def run(setup: Setup, *, device: torch.device | None = None, progress: bool = True) -> list[Trajectory]:
    """Every ratio's trajectory to the target loss, 2000 log-spaced read-outs each; an error if one stops short.
    The ODEs are solved on the CPU at once: ``device`` and ``progress`` are unused here."""
    trajs = integrate_many(setup.settings(), target_loss=setup.target_loss, t_max=setup.t_max, n_out=2000)
    if not all(tr.reached for tr in trajs):
        raise RuntimeError(
            f"a trajectory stopped at t_max = {setup.t_max:g} before the loss reached "
            f"{setup.target_loss:g}; raise t_max"
        )
    return trajs


CLAIM_COLUMNS = (
    ("claim", "claim"),
    ("this run", "this run (the ODEs' solution: no seeds)"),
    ("rule", "how the verdict is read"),
)


def claims(symbolic: pd.DataFrame, tightness: pd.DataFrame) -> pd.DataFrame:
    """Section 6.1 / Lemma 3: the proof's steps (sympy) and the four bounds along long trajectories (deterministic:
    each holds or fails, to the solver's tolerance)."""
    t, slack = tightness, SOLVER_SLACK
    within = (
        f"holds if every ratio value/lower bound is at least 1 − {scientific(slack, 0)} and every value/upper "
        f"bound at most 1 + {scientific(slack, 0)} (the solver's tolerance)"
    )
    return claim_table(
        [
            Claim(
                "proof_steps",
                "The proof's steps (the ratio (29), the sandwich, the comparison solutions, the integrations) hold.",
                f"{int(symbolic['holds'].sum())} of {len(symbolic)} identities proved by sympy",
                check(bool(symbolic["holds"].all())),
                "holds if sympy proves every identity",
                kind=CHECK,
            ),
            Claim(
                "mu_ov_bounds",
                "The scale of the output-value circuit stays between the two logarithmic bounds of Lemma 3.",
                f"smallest value/lower bound {t['min mu_OV / lower'].min():.6f}, largest value/upper bound "
                f"{t['max mu_OV / upper'].max():.4f}",
                check(bool(t["min mu_OV / lower"].min() >= 1 - slack and t["max mu_OV / upper"].max() <= 1 + slack)),
                within,
            ),
            Claim(
                "mu_qk_bounds",
                "The scale of the query-key circuit stays between the two log-squared bounds (the "
                "lower one while attention is at most 1 − δ).",
                f"smallest value/lower bound {t['min mu_QK / lower'].min():.6f}, "
                f"largest value/upper bound {t['max mu_QK / upper'].max():.4f}",
                check(bool(t["min mu_QK / lower"].min() >= 1 - slack and t["max mu_QK / upper"].max() <= 1 + slack)),
                within,
            ),
        ]
    )


BOUND_PANELS = [
    ("ov_low", "μ<sub>OV</sub> /<br>lower bound"),
    ("ov_up", "μ<sub>OV</sub> /<br>upper bound"),
    ("qk_low", "μ<sub>QK</sub> /<br>lower bound"),
    ("qk_up", "μ<sub>QK</sub> /<br>upper bound"),
]
# (two lines each: two titles side by side fit a phone's width)
REGIME_PANELS = [("log2_share", "μ<sub>QK</sub> / its log² value"), ("alpha", "attention α")]


def _time_ticks(fig: go.Figure, t: pd.Series) -> None:
    """A label every few powers of ten on a time axis that spans many (about four labels)."""
    decades = math.log10(t.max()) - math.log10(t.min())
    fig.update_xaxes(dtick=max(1, math.ceil(decades / 4)))


def bounds_figure(ratios: pd.DataFrame) -> go.Figure:
    """Each of Lemma 3's four bounds as value/bound against time, one line per ratio r, with the bound itself (ratio
    1) dotted grey; log scales where a panel spans more than a decade."""
    log_y = [bool(np.log10(ratios[c].max() / ratios[c].min()) > 1) for c, _ in BOUND_PANELS]
    fig = line_panels(ratios, "t", BOUND_PANELS, "ratio", "time t", log_y=log_y, cols=2)
    for j in range(len(BOUND_PANELS)):
        fig.add_trace(
            go.Scatter(
                x=[ratios["t"].min(), ratios["t"].max()],
                y=[1, 1],
                mode="lines",
                showlegend=False,
                line=dict(color="#6e7781", dash="dot", width=1.5),
                hoverinfo="skip",
            ),
            row=j // 2 + 1,
            col=j % 2 + 1,
        )
    style_legend(fig, "bound", "dot", "the bound itself (value/bound = 1)")
    _time_ticks(fig, ratios["t"])
    return fig


def regime_figure(ratios: pd.DataFrame) -> go.Figure:
    """The share of its log^2-regime value that mu_QK reaches, and attention, against time, one line per ratio."""
    fig = line_panels(ratios, "t", REGIME_PANELS, "ratio", "time t")
    _time_ticks(fig, ratios["t"])
    return fig


TIGHTNESS_ROWS = {  # each column of ``lemma3_tightness`` -> its row's name
    "t end": "time at the end of the run",
    "min mu_OV / lower": r"smallest $\mu_{OV}$ / lower bound",
    "mu_OV / lower at end": r"$\mu_{OV}$ / lower bound at the end",
    "max mu_OV / upper": r"largest $\mu_{OV}$ / upper bound",
    "mu_OV / upper at end": r"$\mu_{OV}$ / upper bound at the end",
    "min mu_QK / lower": r"smallest $\mu_{QK}$ / lower bound",
    "mu_QK / lower at end": r"$\mu_{QK}$ / lower bound at the end",
    "max mu_QK / upper": r"largest $\mu_{QK}$ / upper bound",
    "mu_QK / upper at end": r"$\mu_{QK}$ / upper bound at the end",
}


def tightness_shown(tightness: pd.DataFrame) -> pd.DataFrame:
    """For reading (``math_table``): one row per measure, one column per ratio r, in scientific notation (the ratios
    to three significant digits)."""
    table = tightness.set_index("ratio")[list(TIGHTNESS_ROWS)].T
    out = table.apply(lambda col: [scientific(v, 1 if k == "t end" else 2) for k, v in col.items()])
    out.index = [TIGHTNESS_ROWS[k] for k in table.index]
    out.columns = [f"r = {r:g}" for r in table.columns]
    return out


def regime_shown(regime: pd.DataFrame) -> pd.DataFrame:
    """For reading (``math_table``): per ratio and level, the first time mu_QK falls below that share of its log^2
    value, with attention and the loss there (empty where it never does)."""
    table = regime.assign(ratio=regime["ratio"].map(lambda r: f"{r:g}"), level=regime["level"].map(lambda v: f"{v:g}"))
    table = table.set_index(["ratio", "level"])
    for column in ("t", "loss"):
        table[column] = table[column].map(scientific)
    return readable(
        table,
        {"alpha": 3},
        labels={"ratio": "$r$", "level": "share of the log² value", "loss": "loss", "alpha": r"attention $\alpha$"},
    )
