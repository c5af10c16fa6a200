"""Collapsed and factorised (FAFO) circuits trained by population gradient flow on an exact instance, read off the
products, and compared with Theorem 1's collapsed ODE and the Lemma-2 rescaled ODE (the reviewers' test)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import torch

from .dynamics import OrthogonalSetting, attention_mass, integrate, integrate_many, loss
from .factorised import Params, factorise
from .instance import OrthogonalInstance, flow
from .matched import crossing_times, matched_readout

STARTS = ("ansatz", "random")


def starting_point(
    inst: OrthogonalInstance, start: str, scale: float, seed: int
) -> tuple[Params, Params, float, float]:
    """Collapsed and balanced factorised parameters with the same products, and (mu0_OV, mu0_QK) read off them.

    ``ansatz``: products scale * (D_OV, D_QK), on Theorem 1's directions. ``random``: products with i.i.d. normal
    entries of standard deviation ``scale`` (off the ansatz; the mu's are their least-squares coefficients).
    """
    if start not in STARTS:
        raise ValueError(f"start must be one of {', '.join(STARTS)} (got {start!r})")
    if not scale > 0:
        raise ValueError(f"the starting scale must be > 0 (got {scale!r}): factors at 0 never move")
    gen = torch.Generator().manual_seed(seed)
    if start == "ansatz":
        w_ov, w_qk = inst.ansatz(scale, scale)
    else:
        w_ov = scale * torch.randn(inst.cfg.M, inst.d, generator=gen, dtype=torch.float64)
        w_qk = scale * torch.randn(inst.d, inst.d, generator=gen, dtype=torch.float64)
    mu_ov, mu_qk = inst.read_mu(w_ov, w_qk)
    return {"W_OV": w_ov, "W_QK": w_qk}, factorise(w_ov, w_qk, gen), mu_ov, mu_qk


def ode_curves(
    inst: OrthogonalInstance, ratio: float, mu0: tuple[float, float], t: np.ndarray, factorised: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(mu_OV, mu_QK) at times t from Theorem 1's ODE (collapsed) or its Lemma-2 rescaling (factorised)."""
    c = inst.cfg
    s = OrthogonalSetting(m=c.m, n=c.n, b=c.b, M=c.M, eta_qk=ratio, factorised=factorised, mu0_ov=mu0[0], mu0_qk=mu0[1])
    traj = integrate(s, target_loss=1e-15, t_max=float(t[-1]) * 1.01, rtol=1e-11, atol=1e-13)
    return traj.at(t)


def compare_models(
    inst: OrthogonalInstance,
    ratio: float,
    t_end: float,
    start: str = "ansatz",
    scale: float = 0.05,
    seed: int = 0,
    n_out: int = 40,
) -> pd.DataFrame:
    """Both parameterisations from the same product, each by gradient flow (eta_OV = 1, eta_QK = ratio on every
    QK factor), next to both ODEs started from the same (mu0_OV, mu0_QK). Long table: model, t, mu's, alpha, loss,
    the off-ansatz norm, and the two ODEs' mu's and alpha."""
    collapsed, factors, mu0_ov, mu0_qk = starting_point(inst, start, scale, seed)
    t = np.concatenate([[0.0], np.geomspace(t_end * 1e-4, t_end, n_out - 1)])
    odes = {
        name: ode_curves(inst, ratio, (mu0_ov, mu0_qk), t, fac)
        for name, fac in (("collapsed ODE", False), ("rescaled ODE", True))
    }
    parts = []
    for model, p0, rates in (
        ("collapsed", collapsed, {"W_QK": ratio}),
        ("factorised", factors, {"W_K": ratio, "W_Q": ratio}),
    ):
        fl = flow(inst, p0, t, rates)
        part = pd.DataFrame(
            {
                "model": model,
                "t": t,
                "mu_ov": fl["mu_ov"],
                "mu_qk": fl["mu_qk"],
                "alpha": fl["alpha"],
                "loss": fl["loss"],
                "off_ansatz": np.maximum(fl["off_ov"], fl["off_qk"]),
            }
        )
        for name, (o, q) in odes.items():
            part[f"{name} mu_ov"], part[f"{name} mu_qk"] = o, q
            part[f"{name} alpha"] = attention_mass(q, inst.cfg.m, inst.cfg.n)
        parts.append(part)
    return pd.concat(parts, ignore_index=True).assign(start=start, ratio=ratio)


def ode_errors(curves: pd.DataFrame) -> pd.DataFrame:
    """Per (start, ratio, model) and ODE: the largest |mu - ODE| over the largest |mu| (OV and QK), and the largest
    |alpha - ODE alpha|."""
    rows = []
    for (start, ratio, model), part in curves.groupby(["start", "ratio", "model"], sort=False):
        for ode in ("collapsed ODE", "rescaled ODE"):
            rows.append(
                {
                    "start": start,
                    "ratio": ratio,
                    "model": model,
                    "ODE": ode,
                    "mu_OV error": _rel(part["mu_ov"], part[f"{ode} mu_ov"]),
                    "mu_QK error": _rel(part["mu_qk"], part[f"{ode} mu_qk"]),
                    "alpha error": float(np.max(np.abs(part["alpha"] - part[f"{ode} alpha"]))),
                    "max off-ansatz": float(part["off_ansatz"].max()),
                }
            )
    return pd.DataFrame(rows)


def _rel(a: pd.Series, b: pd.Series) -> float:
    return float(np.max(np.abs(a.to_numpy() - b.to_numpy())) / max(np.max(np.abs(b.to_numpy())), 1e-300))


def falsifier(
    base: OrthogonalSetting, ratios: list[float], losses: list[float], horizon: list[float], t_max: float = 1e40
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Section 6's falsifier on the population ODEs, collapsed and factorised from the same start.

    Returns (matched, after): alpha at each matched loss; and, from the first time t_L the loss reaches
    min(losses), alpha and the loss at t_L times each factor in ``horizon`` (does attention keep sharpening after
    the loss is flat?)."""
    matched, after = [], []
    for fac in (False, True):
        settings = [replace(base, factorised=fac).with_ratio(r) for r in ratios]
        trajs = integrate_many(settings, target_loss=min(losses) * 1e-6, t_max=t_max)
        label = "factorised (rescaled ODE)" if fac else "collapsed (Theorem 1)"
        m = matched_readout(trajs, losses).assign(model=label)
        # the ratio the circuits actually learn at: r for collapsed, r sqrt(b) mu_QK / mu_OV for factorised
        m["effective ratio"] = m["ratio"] * (np.sqrt(base.b) * m["mu_qk"] / m["mu_ov"] if fac else 1.0)
        matched.append(m)
        for tr in trajs:
            t_l = float(crossing_times(tr, [min(losses)])[0])
            for k in horizon:
                mo, mq = tr.at(t_l * k)
                a = float(attention_mass(mq[0], base.m, base.n))
                after.append(
                    {
                        "model": label,
                        "ratio": tr.setting.ratio,
                        "time / t_L": k,
                        "t": t_l * k,
                        "alpha": a,
                        "loss": float(loss(mo[0], a, base.M)),
                        "mu_qk": float(mq[0]),
                    }
                )
    return pd.concat(matched, ignore_index=True), pd.DataFrame(after)


def flow_or_falsifier(kind: str, args: tuple) -> dict[str, pd.DataFrame]:
    """One stored run of the reviewers' tests: a pair of gradient flows (``"flow"``: ``compare_models(*args)``) or
    the falsifier (``"falsifier"``: ``falsifier(*args)``), as tables."""
    if kind == "flow":
        return {"main": compare_models(*args)}
    matched, after = falsifier(*args)
    return {"matched": matched, "after": after}
