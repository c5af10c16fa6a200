"""Figure 4 (Section 6): Theorem 1's mu(t) trajectories for several ratios r = eta_QK / eta_OV, read at matched
stopping losses, with Lemma 3's bounds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..core.validation import require_positive_numbers
from ..data import authors
from ..metrics.verdicts import CHECK, Claim, check, claim_table
from ..present.plots import PALETTE, log_axes, style_legend
from ..present.text import scientific
from ..theory import OrthogonalSetting, RatioSweep, Trajectory, alpha_table, check_loss_threshold, simulate_ratios

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
            raise ValueError(
                f"table_losses must all be >= target_loss = {self.target_loss} (the run stops there); "
                f"got {list(self.table_losses)}"
            )
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
        return TIME_LABELS[self.time_axis]


BESIDE = ("official",)  # the authors' setup: its results of this chapter are set beside this run's (Figure 4's alphas)
PROFILES = {"smoke": dict(ratios=(0.01, 1.0, 100.0), target_loss=1e-3, n_matched=20), "official": dict(M=20)}


def run(
    setup: Setup, *, device: torch.device | None = None, progress: bool = True
) -> tuple[list[Trajectory], pd.DataFrame, pd.DataFrame]:
    """One trajectory per ratio to the target loss; the loss curves; the matched read-out with Lemma 3's bounds.
    The ODEs are solved on the CPU at once: ``device`` and ``progress`` are unused here."""
    return simulate_ratios(
        setup.base,
        list(setup.ratios),
        setup.target_loss,
        setup.thresholds,
        normalise_time=setup.time_axis == "normalised",
    )


CLAIM_COLUMNS = (
    ("claim", "claim"),
    ("this run", "this run (the ODEs' solution: no seeds)"),
    ("rule", "how the verdict is read"),
)  # the ODEs are deterministic: no interval over seeds


def claims(
    trajs: Sequence[Trajectory], matched: pd.DataFrame, base: OrthogonalSetting, stopping_loss: float
) -> pd.DataFrame:
    """Section 6 / Figure 4: the loss reaches its target for every r; at ``stopping_loss`` alpha is near 1 for the
    largest r and near uniform for the smallest; alpha*mu_OV agrees across r at every matched loss. The ODEs have no
    seeds: each check holds or fails."""
    at = matched[matched["stopping_loss"] == stopping_loss].set_index("ratio")["alpha"]
    r_lo, r_hi = at.index.min(), at.index.max()
    spread = matched.groupby("stopping_loss")["alpha_mu_ov"].agg(lambda v: v.max() - v.min()).max()
    finals = ", ".join(f"{scientific(tr.loss[-1], 2)} at r = {tr.setting.ratio:g}" for tr in trajs)
    target = trajs[0].target_loss
    return claim_table(
        [
            Claim(
                "loss_to_zero",
                "The loss goes to zero for every ratio r of the query-key to the output-value learning rate.",
                f"final loss {finals} (target {scientific(target, 0)})",
                check(all(tr.reached for tr in trajs)),
                f"holds if every trajectory reaches the loss {scientific(target, 0)}",
            ),
            Claim(
                "alpha_near_one",
                f"With the query-key circuit learning {r_hi:g} times faster than the output-value "
                f"circuit, attention on the class tokens ends close to 1.",
                f"attention α = {at[r_hi]:.4f} at the loss {scientific(stopping_loss, 0)}",
                check(at[r_hi] >= NEAR_ONE),
                f"holds if α is at least {NEAR_ONE:g} at the loss {scientific(stopping_loss, 0)}",
                at[r_hi],
                authors=authors.summary(["fig4.alpha.100"]),
            ),
            Claim(
                "alpha_near_uniform",
                f"With the query-key circuit learning {r_lo:g} times as fast, attention stays "
                f"near uniform at the same loss.",
                f"attention α = {at[r_lo]:.4f}, {at[r_lo] / base.alpha0:.2f} times "
                f"uniform (α₀ = {base.alpha0:.4f}), at the loss {scientific(stopping_loss, 0)}",
                check(at[r_lo] <= NEAR_UNIFORM * base.alpha0),
                f"holds if α is at most {NEAR_UNIFORM:g} times uniform attention α₀ = m/(m+n)",
                at[r_lo],
                authors=authors.summary(["fig4.alpha.0.01"]) + " with 20 classes",
            ),
            Claim(
                "alpha_mu_ov_matched",
                "At a matched loss, attention times the scale of the output-value circuit is the same for every r.",
                f"largest spread across r: {scientific(spread)}",
                check(spread < 1e-6),
                f"holds if the spread across r is below {scientific(1e-6, 0)} at every matched loss",
                spread,
                kind=CHECK,
            ),
        ]
    )


TIME_LABELS = {"normalised": "normalised time", "raw": "time t"}  # normalised: t·min(eta_OV, eta_QK) (the caption)
BOUND_STYLES = (("lower", "dot", "Lemma 3's lower bound"), ("upper", "dash", "Lemma 3's upper bound"))


def figure(curves: pd.DataFrame, matched: pd.DataFrame, alpha0: float, time_label: str) -> go.Figure:
    """Figure 4 (a-d), two panels to a row: loss against time; mu_OV, mu_QK and alpha against the matched stopping
    loss (falling to the right), with Lemma 3's bounds dotted (lower) and dashed (upper), uniform attention
    dash-dotted; every line style in the legend.

    ``curves`` has columns ratio, time, loss; ``matched`` has ratio, stopping_loss, mu_ov, mu_qk, alpha and,
    optionally, the Lemma 3 bounds at the matched times (ov_lower, ov_upper, qk_lower, qk_upper).
    """
    fig = make_subplots(
        rows=2,
        cols=2,
        horizontal_spacing=0.16,
        vertical_spacing=0.2,
        subplot_titles=("(a) training loss", "(b) μ<sub>OV</sub>", "(c) μ<sub>QK</sub>", "(d) attention α"),
    )
    for i, (r, cur) in enumerate(curves.groupby("ratio", sort=True)):
        color, name = PALETTE[i % len(PALETTE)], f"r = {r:g}"
        fig.add_trace(
            go.Scatter(x=cur["time"], y=cur["loss"], name=name, legendgroup=name, line_color=color), row=1, col=1
        )
        mat = matched[matched["ratio"] == r]
        for (row, col), column in (((1, 2), "mu_ov"), ((2, 1), "mu_qk"), ((2, 2), "alpha")):
            fig.add_trace(
                go.Scatter(
                    x=mat["stopping_loss"],
                    y=mat[column],
                    name=name,
                    legendgroup=name,
                    line_color=color,
                    showlegend=False,
                ),
                row=row,
                col=col,
            )
        for (row, col), circuit in (((1, 2), "ov"), ((2, 1), "qk")):
            for side, dash, words in BOUND_STYLES:
                column = f"{circuit}_{side}"
                if column in mat:
                    fig.add_trace(
                        go.Scatter(
                            x=mat["stopping_loss"],
                            y=mat[column],
                            legendgroup=name,
                            showlegend=False,
                            name=f"{name}, {words}",
                            line=dict(color=color, dash=dash, width=1.5),
                        ),
                        row=row,
                        col=col,
                    )
    losses = matched["stopping_loss"]
    fig.add_trace(
        go.Scatter(
            x=[losses.max(), losses.min()],
            y=[alpha0, alpha0],
            mode="lines",
            showlegend=False,
            line=dict(color="#6e7781", dash="dashdot", width=1.5),
            hoverinfo="skip",
        ),
        row=2,
        col=2,
    )
    for _, dash, words in BOUND_STYLES:
        style_legend(fig, dash, dash, f"{words} (same colour)")
    style_legend(fig, "dashdot", "dashdot", "uniform attention α₀ = m/(m+n)")
    log_axes(fig, x=True, y=True, row=1, col=1)
    fig.update_xaxes(title_text=time_label, row=1, col=1)
    losses_span = np.log10(losses.max()) - np.log10(losses.min())
    for row, col in ((1, 2), (2, 1), (2, 2)):
        log_axes(fig, x=True, row=row, col=col)
        fig.update_xaxes(
            autorange="reversed",
            title_text="stopping loss",
            dtick=max(1, int(np.ceil(losses_span / 3))),
            row=row,
            col=col,
        )  # about three labels: they fit a phone's half-width panel
    log_axes(fig, y=True, row=2, col=1)
    fig.update_yaxes(range=[0, 1.02], row=2, col=2)
    time = curves.loc[curves["time"] > 0, "time"]
    decades = np.log10(time.max()) - np.log10(time.min())
    fig.update_xaxes(dtick=max(1, int(np.ceil(decades / 4))), row=1, col=1)  # about four labels, on a phone too
    fig.update_xaxes(tickangle=0)
    fig.update_layout(
        height=820, legend=dict(orientation="h", yanchor="top", y=-0.14, x=0), margin=dict(l=50, r=15, t=40, b=40)
    )
    return fig


def alpha_shown(matched: pd.DataFrame, losses: Sequence[float]) -> pd.DataFrame:
    """For reading (``math_table``): attention alpha at each tabulated stopping loss (columns, largest first), one
    row per ratio r, to three decimals."""
    table = alpha_table(matched, list(losses))
    table.columns = [f"at the loss {scientific(c, 0)}" for c in sorted(losses, reverse=True)]
    table.index = pd.Index([f"{r:g}" for r in table.index], name=r"$r = \eta_{QK}/\eta_{OV}$")
    return table.map(lambda v: f"{v:.3f}")


BOUND_ROWS = {
    "min mu_OV / lower": "smallest $\\mu_{OV}$ / its lower bound",
    "max mu_OV / upper": "largest $\\mu_{OV}$ / its upper bound",
    "min mu_QK / lower": "smallest $\\mu_{QK}$ / its lower bound",
    "max mu_QK / upper": "largest $\\mu_{QK}$ / its upper bound",
}


def bounds_shown(tightness: pd.DataFrame) -> pd.DataFrame:
    """For reading (``math_table``): Lemma 3's four ratios value/bound over the whole trajectory, one row per bound,
    one column per ratio r, to three significant digits."""
    table = tightness.set_index("ratio")[list(BOUND_ROWS)].T
    table.index = [BOUND_ROWS[k] for k in table.index]
    table.columns = [f"r = {r:g}" for r in table.columns]
    return table.map(lambda v: f"{v:.3g}")
