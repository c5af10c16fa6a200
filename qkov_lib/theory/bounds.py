"""Lemma 3 (Appendix C): logarithmic bounds on mu_OV(t) and mu_QK(t) in the pre-saturation regime."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .dynamics import OrthogonalSetting, Trajectory


def lemma3_bounds(s: OrthogonalSetting, t, delta=None) -> dict[str, np.ndarray]:
    """The four bounds of Lemma 3 at times t (alpha_0 = m/(m+n), r = eta_QK/eta_OV).

    ov_lower  = log(1 + eta_OV alpha_0 t / (M b))
    ov_upper  = (1/alpha_0) log(1 + eta_OV alpha_0 t / b)
    qk_upper  = r (M-1)(1-alpha_0) / (2 M b alpha_0^2) log^2(1 + eta_OV alpha_0 t / b)
    qk_lower  = r (M-1) delta / (2 M b) log^2(1 + eta_OV alpha_0 t / (M b)), valid while alpha <= 1 - delta on [0, t];
                ``delta`` may be an array (one value per time), e.g. 1 - running max of alpha. Omitted when None.
    """
    t = np.asarray(t, dtype=float)
    a0, r, M, b = s.alpha0, s.ratio, s.M, s.b
    slow = np.log1p(s.eta_ov * a0 * t / (M * b))
    fast = np.log1p(s.eta_ov * a0 * t / b)
    out = {
        "ov_lower": slow,
        "ov_upper": fast / a0,
        "qk_upper": r * (M - 1) * (1 - a0) / (2 * M * b * a0**2) * fast**2,
    }
    if delta is not None:
        out["qk_lower"] = r * (M - 1) * np.asarray(delta, dtype=float) / (2 * M * b) * slow**2
    return out


def lemma3_tightness(trajs: Sequence[Trajectory]) -> pd.DataFrame:
    """Per trajectory: min of value/lower bound and max of value/upper bound over t > 0 (a bound holds when the
    first is >= 1 and the second <= 1), and both ratios at the last time; delta = 1 - running max of alpha, the
    tightest the lemma allows."""
    rows = []
    for tr in trajs:
        t, delta = tr.t[1:], 1.0 - np.maximum.accumulate(tr.alpha)[1:]
        bound = lemma3_bounds(tr.setting, t, delta)
        ratios = {
            "mu_OV / lower": tr.mu_ov[1:] / bound["ov_lower"],
            "mu_OV / upper": tr.mu_ov[1:] / bound["ov_upper"],
            "mu_QK / lower": tr.mu_qk[1:] / bound["qk_lower"],
            "mu_QK / upper": tr.mu_qk[1:] / bound["qk_upper"],
        }
        row = {"ratio": tr.setting.ratio, "t end": tr.t[-1]}
        for name, v in ratios.items():
            row[("min " if "lower" in name else "max ") + name] = np.min(v) if "lower" in name else np.max(v)
            row[name + " at end"] = v[-1]
        rows.append(row)
    return pd.DataFrame(rows)


def bound_ratios(trajs: Sequence[Trajectory]) -> pd.DataFrame:
    """Long table over t > 0: value / bound for the four bounds (delta = 1 - running max of alpha), alpha and
    the log^2 share, one block per trajectory labelled ``r = ...``."""
    parts = []
    for tr in trajs:
        t, delta = tr.t[1:], 1.0 - np.maximum.accumulate(tr.alpha)[1:]
        bound = lemma3_bounds(tr.setting, t, delta)
        parts.append(
            pd.DataFrame(
                {
                    "ratio": f"r = {tr.setting.ratio:g}",
                    "t": t,
                    "alpha": tr.alpha[1:],
                    "ov_low": tr.mu_ov[1:] / bound["ov_lower"],
                    "ov_up": tr.mu_ov[1:] / bound["ov_upper"],
                    "qk_low": tr.mu_qk[1:] / bound["qk_lower"],
                    "qk_up": tr.mu_qk[1:] / bound["qk_upper"],
                    "log2_share": log2_share(tr)[1:],
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def log2_share(tr: Trajectory) -> np.ndarray:
    """mu_QK over its log^2-regime value r (M-1)(1-alpha_0)/(2 M b) mu_OV^2 (eq. 29 integrated with alpha = alpha_0).

    It is 1 while alpha stays near alpha_0 and falls as alpha saturates, since d mu_QK/d mu_OV carries (1 - alpha).
    """
    s = tr.setting
    k = s.ratio * (s.M - 1) * (1 - s.alpha0) / (2 * s.M * s.b)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tr.mu_ov > 0, tr.mu_qk / (k * tr.mu_ov**2), 1.0)


def log2_regime_end(trajs: Sequence[Trajectory], levels: Sequence[float] = (0.9, 0.5)) -> pd.DataFrame:
    """For each trajectory and level: the first time the log^2 share drops below the level, with alpha and loss
    there (NaN when it never does within the trajectory)."""
    rows = []
    for tr in trajs:
        share = log2_share(tr)
        for level in levels:
            below = np.flatnonzero(share < level)
            i = below[0] if below.size else None
            rows.append(
                {
                    "ratio": tr.setting.ratio,
                    "level": level,
                    "t": tr.t[i] if i is not None else np.nan,
                    "alpha": tr.alpha[i] if i is not None else np.nan,
                    "loss": tr.loss[i] if i is not None else np.nan,
                }
            )
    return pd.DataFrame(rows)
