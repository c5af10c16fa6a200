"""Matched stopping losses (Figure 4 b-d): the state at the first time the loss falls below each threshold."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from ..core.validation import require_positive_numbers
from .bounds import lemma3_bounds
from .dynamics import (
    OrthogonalSetting,
    Trajectory,
    attention_mass,
    check_loss_threshold,
    integrate_many,
    loss,
    normalised_time,
)


def crossing_times(traj: Trajectory, thresholds: Sequence[float]) -> np.ndarray:
    """First time t at which L(t) <= threshold, found by root-finding on the dense solution (NaN if never reached).

    L is strictly decreasing along Theorem 1 (alpha and mu_OV both grow), so the first crossing is the only one.
    """
    s = traj.setting

    def log_loss(u: float) -> float:
        mu_ov, mu_qk = traj.dense(u)
        return float(np.log(loss(mu_ov, attention_mass(mu_qk, s.m, s.n), s.M)))

    u_end = float(np.log1p(traj.t[-1]))
    out = []
    for thr in thresholds:
        check_loss_threshold(thr, s.M)
        gap_end = log_loss(u_end) - np.log(thr)
        if gap_end > 1e-9:  # not reached (the solver's own stop is accurate to about 1e-12)
            out.append(np.nan)
        elif gap_end >= 0:
            out.append(traj.t[-1])
        else:
            gap = lambda u, thr=thr: log_loss(u) - np.log(thr)  # noqa: E731
            out.append(np.expm1(brentq(gap, 0.0, u_end, xtol=1e-13, rtol=1e-13)))
    return np.asarray(out)


def matched_readout(trajs: Sequence[Trajectory], thresholds: Sequence[float]) -> pd.DataFrame:
    """Tidy table: one row per (ratio, threshold) with t, normalised time, mu_OV, mu_QK, alpha and alpha*mu_OV."""
    rows = []
    for traj in trajs:
        s = traj.setting
        times = crossing_times(traj, thresholds)
        for thr, t in zip(thresholds, times):
            mu_ov, mu_qk = (np.nan, np.nan) if np.isnan(t) else (float(v[0]) for v in traj.at(t))
            a = float(attention_mass(mu_qk, s.m, s.n))
            rows.append(
                {
                    "ratio": s.ratio,
                    "stopping_loss": float(thr),
                    "t": float(t),
                    "normalised_time": float(normalised_time(t, s)),
                    "mu_ov": mu_ov,
                    "mu_qk": mu_qk,
                    "alpha": a,
                    "alpha_mu_ov": a * mu_ov,
                }
            )
    return pd.DataFrame(rows)


def alpha_table(matched: pd.DataFrame, thresholds: Sequence[float]) -> pd.DataFrame:
    """Wide table of alpha at matched losses: one row per ratio r, one column per stopping loss (largest first)."""
    sub = matched[np.isin(matched["stopping_loss"], list(thresholds))]
    table = sub.pivot(index="ratio", columns="stopping_loss", values="alpha")
    table = table[sorted(table.columns, reverse=True)]
    table.columns = [f"alpha at L = {c:g}" for c in table.columns]
    return table


def simulate_ratios(
    base: OrthogonalSetting,
    ratios: Sequence[float],
    target_loss: float,
    thresholds: Sequence[float],
    normalise_time: bool = True,
) -> tuple[list[Trajectory], pd.DataFrame, pd.DataFrame]:
    """Figure 4's computation: one trajectory per r to ``target_loss``, the loss curves, and the matched read-out
    at ``thresholds`` with the Lemma 3 bounds evaluated at each matched time (delta = 1 - alpha there, the
    tightest delta the lemma allows since alpha only grows)."""
    trajs = integrate_many([base.with_ratio(r) for r in ratios], target_loss=target_loss)
    curves = pd.concat(
        [
            pd.DataFrame(
                {
                    "ratio": tr.setting.ratio,
                    "t": tr.t,
                    "time": normalised_time(tr.t, tr.setting) if normalise_time else tr.t,
                    "mu_ov": tr.mu_ov,
                    "mu_qk": tr.mu_qk,
                    "alpha": tr.alpha,
                    "loss": tr.loss,
                }
            )
            for tr in trajs
        ],
        ignore_index=True,
    )
    parts = []
    for tr in trajs:
        part = matched_readout([tr], thresholds)
        bounds = lemma3_bounds(tr.setting, part["t"].to_numpy(), delta=1.0 - part["alpha"].to_numpy())
        parts.append(part.assign(**bounds))
    return trajs, curves, pd.concat(parts, ignore_index=True)


@dataclass(frozen=True, kw_only=True)
class RatioSweep:
    """Theorem 1's ODEs at several rate ratios r = eta_QK / eta_OV, typed and checked once (Section 6, Figure 4):
    the sizes and eta_OV of the orthogonal setting, the ratios, and the loss at which each trajectory stops."""

    m: int = 5  # class-specific positions per sequence (Figure 4)
    n: int = 50  # background positions per sequence (Figure 4)
    b: int = 50  # tokens per class (Figure 4)
    M: int = 5  # classes (Figure 4's caption; the authors' notebook uses 20)
    eta_ov: float = 1.0  # the OV learning rate (Figure 4)
    ratios: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, 100.0)  # r = eta_QK / eta_OV (Figure 4)
    target_loss: float = 1e-4  # each trajectory stops at this loss (the authors' notebook; the paper: "to zero")

    def __post_init__(self) -> None:
        check_loss_threshold(self.target_loss, self.base.M, "target_loss")
        require_positive_numbers("ratios", self.ratios)

    @property
    def base(self) -> OrthogonalSetting:
        """The orthogonal setting at r = 1 (checks the sizes and eta_OV)."""
        return OrthogonalSetting(m=self.m, n=self.n, b=self.b, M=self.M, eta_ov=self.eta_ov)

    def settings(self) -> list[OrthogonalSetting]:
        return [self.base.with_ratio(r) for r in self.ratios]
