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
    first is >= 1 and the second <= 1); delta = 1 - running max of alpha, the tightest the lemma allows."""
    rows = []
    for tr in trajs:
        t, delta = tr.t[1:], 1.0 - np.maximum.accumulate(tr.alpha)[1:]
        bound = lemma3_bounds(tr.setting, t, delta)
        rows.append({"ratio": tr.setting.ratio,
                     "min mu_OV / lower": np.min(tr.mu_ov[1:] / bound["ov_lower"]),
                     "max mu_OV / upper": np.max(tr.mu_ov[1:] / bound["ov_upper"]),
                     "min mu_QK / lower": np.min(tr.mu_qk[1:] / bound["qk_lower"]),
                     "max mu_QK / upper": np.max(tr.mu_qk[1:] / bound["qk_upper"])})
    return pd.DataFrame(rows)
