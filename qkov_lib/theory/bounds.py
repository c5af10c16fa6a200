"""Lemma 3 (Appendix C): logarithmic bounds on mu_OV(t) and mu_QK(t) in the pre-saturation regime."""
from __future__ import annotations

import numpy as np

from .dynamics import OrthogonalSetting


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
