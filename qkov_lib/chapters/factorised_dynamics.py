"""The reviewers' tests: factorised against collapsed circuits on an exact instance of Theorem 1's setting, and the
falsifier (attention at matched losses, and after the loss is flat) on the population ODEs."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..theory import OrthogonalSetting, check_loss_threshold
from ..theory.instance import InstanceConfig
from ..theory.trajectories import STARTS
from ..validation import require_positive_numbers
from ..verdicts import ODE_MATCH, claim_table
from .fig4_mu_trajectories import NEAR_ONE, NEAR_UNIFORM

ALPHA_MATCH = 0.05  # "follows the ODE" for attention: |alpha - alpha_ODE| at most this along the run


@dataclass(frozen=True, kw_only=True)
class Setup:
    """The exact instance [M, b, m, n, q] and seed, the ratios, horizon, starts and starting scale of its gradient
    flows; Theorem 1's ODE setting of the falsifier (Figure 4's sizes, mu_0) with its ratios, matched losses and
    horizon multiples (the reviews ask for these tests; the paper does not run them)."""

    M: int = 3  # classes of the exact instance (small enough to enumerate)
    b: int = 2  # tokens per class
    m: int = 2  # class positions
    n: int = 2  # background positions
    q: int = 1  # background vectors +-u_1..u_q
    seed: int = 0  # the token frame and the random starts
    ratios: tuple[float, ...] = (0.1, 10.0)  # eta_QK / eta_OV of the flows
    t_end: float = 2000.0  # the flows' horizon
    starts: tuple[str, ...] = ("ansatz", "random")  # products on Theorem 1's directions, or random
    start_scale: float = 0.05  # the size of the starting products (factors at 0 never move)
    ode_m: int = 5  # the falsifier's sizes: Figure 4's m
    ode_n: int = 50  # Figure 4's n
    ode_b: int = 50  # Figure 4's b
    ode_M: int = 5  # Figure 4's M
    mu0: float = 0.01  # both models' starting mu_OV = mu_QK
    falsifier_ratios: tuple[float, ...] = (0.01, 1.0, 100.0)  # the reviewers' r = 100 against r = 0.01
    losses: tuple[float, ...] = (1e-1, 1e-2, 1e-3)  # the matched stopping losses
    horizon: tuple[float, ...] = (1.0, 10.0, 100.0, 1000.0)  # multiples of the time the smallest loss is reached

    def __post_init__(self) -> None:
        _ = (self.instance, self.ode)  # builds both, checking their sizes
        for name in ("ratios", "falsifier_ratios", "horizon"):
            require_positive_numbers(name, getattr(self, name))
        require_positive_numbers("t_end and start_scale", [self.t_end, self.start_scale, self.mu0])
        for thr in self.losses:
            check_loss_threshold(thr, self.ode_M, "each of losses")
        if not set(self.starts) <= set(STARTS) or not self.starts:
            raise ValueError(f"starts must be a non-empty subset of {list(STARTS)} (got {list(self.starts)!r})")

    @property
    def instance(self) -> InstanceConfig:
        return InstanceConfig(M=self.M, b=self.b, m=self.m, n=self.n, q=self.q, seed=self.seed)

    @property
    def ode(self) -> OrthogonalSetting:
        return OrthogonalSetting(m=self.ode_m, n=self.ode_n, b=self.ode_b, M=self.ode_M, mu0_ov=self.mu0,
                                 mu0_qk=self.mu0)


PROFILES = {"smoke": dict(ratios=(10.0,), t_end=200.0, falsifier_ratios=(0.01, 100.0))}


def claims(errors: pd.DataFrame, matched: pd.DataFrame, after: pd.DataFrame, alpha0: float) -> pd.DataFrame:
    """The reviewers' tests: which ODE describes each model, and the falsifier at matched losses."""
    e = errors.set_index(["start", "model", "ODE"])

    def worst(start: str, model: str, ode: str, cols: tuple[str, ...] = ("mu_OV error", "mu_QK error")) -> float:
        return float(e.loc[(start, model, ode)][list(cols)].to_numpy().max())

    rows = []
    if "ansatz" in e.index.get_level_values(0):
        fr, fc = worst("ansatz", "factorised", "rescaled ODE"), worst("ansatz", "factorised", "collapsed ODE")
        cc = worst("ansatz", "collapsed", "collapsed ODE")
        rows += [("ansatz_collapsed_ode", "from a start on the ansatz, collapsed circuits follow Theorem 1's ODE",
                  f"relative mu error {cc:.1e}", cc < ODE_MATCH),
                 ("ansatz_factorised_rescaled_ode", "... and balanced factorised circuits follow the Lemma-2 rescaled ODE, not Theorem 1's",
                  f"rescaled ODE {fr:.1e}; Theorem 1's ODE {fc:.2f}", fr < ODE_MATCH < fc)]
    if "random" in e.index.get_level_values(0):
        fa = worst("random", "factorised", "rescaled ODE", ("alpha error",))
        ca = worst("random", "collapsed", "collapsed ODE", ("alpha error",))
        rows.append(("random_alpha_follows_ode", "from small random balanced starts, each model's alpha follows its ODE",
                     f"max |alpha - ODE|: collapsed {ca:.3f}, factorised {fa:.3f} (threshold {ALPHA_MATCH})",
                     ca <= ALPHA_MATCH and fa <= ALPHA_MATCH))
    smallest = matched["stopping_loss"].min()
    at = matched[matched["stopping_loss"] == smallest].set_index(["model", "ratio"])["alpha"]
    for model in at.index.get_level_values(0).unique():
        a = at.loc[model]
        lo, hi = a.index.min(), a.index.max()
        rows.append((f"falsifier_{model}",
                     f"falsifier, {model}: alpha near 1 for r = {hi:g}, near uniform for r = {lo:g} at L = {smallest:g}",
                     f"alpha {a[hi]:.4f} vs {a[lo]:.4f} (= {a[lo] / alpha0:.2f} alpha_0)",
                     bool(a[hi] >= NEAR_ONE and a[lo] <= NEAR_UNIFORM * alpha0)))
    r_hi = after["ratio"].max()
    for model, part in after[after["ratio"] == r_hi].groupby("model", sort=False):
        first, last = part.iloc[0], part.iloc[-1]
        rows.append((f"alpha_grows_after_flat_{model}",
                     f"{model}, r = {r_hi:g}: alpha keeps growing after the loss is flat",
                     f"alpha {first['alpha']:.4f} -> {last['alpha']:.4f} while the loss goes {first['loss']:.1e} -> "
                     f"{last['loss']:.1e} ({last['time / t_L']:g} x longer)", bool(last["alpha"] > first["alpha"])))
    return claim_table(rows)
