"""Figure 4 (Section 6): Theorem 1's mu(t) trajectories for several ratios r = eta_QK / eta_OV, read at matched
stopping losses, with Lemma 3's bounds."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..plots import PALETTE
from ..theory import OrthogonalSetting, RatioSweep, Trajectory, check_loss_threshold, simulate_ratios
from ..validation import require_positive_numbers
from ..verdicts import claim_table

NEAR_ONE = 0.9  # "alpha close to 1" (Figure 4) is read as alpha >= NEAR_ONE
NEAR_UNIFORM = 1.5  # "attention near uniform" is read as alpha <= NEAR_UNIFORM * alpha_0


@dataclass(frozen=True, kw_only=True)
class Setup(RatioSweep):
    """Figure 4's run: the ratio sweep, the stopping losses of its table, how many log-spaced losses the matched
    curves read, and the time axis (normalised t * min(eta_OV, eta_QK), as the authors plot it, or raw t)."""

    table_losses: tuple[float, ...] = (1e-1, 1e-2, 1e-3)  # the matched losses tabulated (Figure 4 b-d)
    n_matched: int = 60  # log-spaced matched losses drawn in (b)-(d)
    time_axis: str = "normalised"  # panel (a)'s x-axis: the authors' t * min(eta_OV, eta_QK), or "raw" t

    def __post_init__(self) -> None:
        super().__post_init__()
        require_positive_numbers("table_losses", self.table_losses)
        for thr in self.table_losses:
            check_loss_threshold(thr, self.M, "each of table_losses")
        if min(self.table_losses) < self.target_loss:
            raise ValueError(f"table_losses must all be >= target_loss = {self.target_loss} (the run stops there); "
                             f"got {list(self.table_losses)}")
        if self.n_matched < 2:
            raise ValueError(f"n_matched must be an integer >= 2 (got {self.n_matched!r})")
        if self.time_axis not in ("normalised", "raw"):
            raise ValueError(f"time_axis must be 'normalised' or 'raw' (got {self.time_axis!r})")

    @property
    def thresholds(self) -> list[float]:
        """The matched read-out's losses: ``n_matched`` log-spaced from just below log M to the target, and the
        table's, largest first."""
        grid = np.geomspace(0.99 * np.log(self.M), self.target_loss, self.n_matched)
        return sorted(set(grid.tolist()) | set(self.table_losses), reverse=True)

    @property
    def time_label(self) -> str:
        return "normalised time t·min(η_OV, η_QK)" if self.time_axis == "normalised" else "time t"


PROFILES = {"smoke": dict(ratios=(0.01, 1.0, 100.0), target_loss=1e-3, n_matched=20),
            "official": dict(M=20)}


def run(setup: Setup) -> tuple[list[Trajectory], pd.DataFrame, pd.DataFrame]:
    """One trajectory per ratio to the target loss; the loss curves; the matched read-out with Lemma 3's bounds."""
    return simulate_ratios(setup.base, list(setup.ratios), setup.target_loss, setup.thresholds,
                           normalise_time=setup.time_axis == "normalised")


def claims(trajs: Sequence[Trajectory], matched: pd.DataFrame, base: OrthogonalSetting,
           stopping_loss: float) -> pd.DataFrame:
    """Section 6 / Figure 4: the loss reaches its target for every r; at ``stopping_loss`` alpha is near 1 for the
    largest r and near uniform for the smallest; alpha*mu_OV agrees across r at every matched loss."""
    at = matched[matched["stopping_loss"] == stopping_loss].set_index("ratio")["alpha"]
    r_lo, r_hi = at.index.min(), at.index.max()
    spread = matched.groupby("stopping_loss")["alpha_mu_ov"].agg(lambda v: v.max() - v.min()).max()
    finals = ", ".join(f"r={tr.setting.ratio:g}: {tr.loss[-1]:.2e}" for tr in trajs)
    rows = [
        ("loss_to_zero", "the loss goes to zero for every r", f"final losses {finals} (target {trajs[0].target_loss:g})",
         all(tr.reached for tr in trajs)),
        ("alpha_near_one", f"alpha close to 1 for r = {r_hi:g}", f"alpha = {at[r_hi]:.4f} at L = {stopping_loss:g}",
         at[r_hi] >= NEAR_ONE),
        ("alpha_near_uniform", f"alpha near uniform for r = {r_lo:g}",
         f"alpha = {at[r_lo]:.4f} = {at[r_lo] / base.alpha0:.2f} alpha_0 at L = {stopping_loss:g}",
         at[r_lo] <= NEAR_UNIFORM * base.alpha0),
        ("alpha_mu_ov_matched", "alpha*mu_OV is the same for every r at a matched loss", f"largest spread across r: {spread:.1e}",
         spread < 1e-6),
    ]
    return claim_table(rows)


def figure(curves: pd.DataFrame, matched: pd.DataFrame, alpha0: float, time_label: str) -> go.Figure:
    """Figure 4 (a-d): loss against time; mu_OV, mu_QK and alpha against the matched stopping loss.

    ``curves`` has columns ratio, time, loss; ``matched`` has ratio, stopping_loss, mu_ov, mu_qk, alpha and,
    optionally, the Lemma 3 bounds at the matched times (ov_lower, ov_upper, qk_lower, qk_upper).
    """
    fig = make_subplots(rows=2, cols=2, horizontal_spacing=0.1, vertical_spacing=0.16, subplot_titles=(
        "(a) training loss", "(b) μ_OV at matched loss", "(c) μ_QK at matched loss", "(d) α at matched loss"))
    for i, (r, cur) in enumerate(curves.groupby("ratio", sort=True)):
        color, name = PALETTE[i % len(PALETTE)], f"r = {r:g}"
        fig.add_trace(go.Scatter(x=cur["time"], y=cur["loss"], name=name, legendgroup=name, line_color=color),
                      row=1, col=1)
        mat = matched[matched["ratio"] == r]
        for (row, col), column in (((1, 2), "mu_ov"), ((2, 1), "mu_qk"), ((2, 2), "alpha")):
            fig.add_trace(go.Scatter(x=mat["stopping_loss"], y=mat[column], name=name, legendgroup=name,
                                     line_color=color, showlegend=False), row=row, col=col)
        for (row, col), column, dash in (((1, 2), "ov_lower", "dot"), ((1, 2), "ov_upper", "dash"),
                                         ((2, 1), "qk_lower", "dot"), ((2, 1), "qk_upper", "dash")):
            if column in mat:
                fig.add_trace(go.Scatter(x=mat["stopping_loss"], y=mat[column], legendgroup=name, showlegend=False,
                                         name=f"{name}, Lemma 3 {column.split('_')[1]} bound",
                                         line=dict(color=color, dash=dash, width=1)), row=row, col=col)
    fig.add_hline(y=alpha0, line=dict(color="grey", dash="dash", width=1), row=2, col=2,
                  annotation_text="α₀ = m/(m+n)", annotation_position="bottom left")
    fig.update_xaxes(type="log", title_text=time_label, row=1, col=1)
    fig.update_yaxes(type="log", title_text="loss", row=1, col=1)
    for row, col, label in ((1, 2, "μ_OV"), (2, 1, "μ_QK"), (2, 2, "α")):
        fig.update_xaxes(type="log", autorange="reversed", title_text="stopping loss", row=row, col=col)
        fig.update_yaxes(title_text=label, row=row, col=col)
    fig.update_yaxes(type="log", row=2, col=1)
    fig.update_yaxes(range=[0, 1.02], row=2, col=2)
    fig.update_layout(height=760, template="plotly_white", legend_title_text="η_QK/η_OV",
                      margin=dict(l=60, r=20, t=60, b=50))
    return fig
