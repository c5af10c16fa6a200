"""Theorem 1 as code: the scalar gradient-flow ODEs of the orthogonal setting (Section 6.1).

Notation follows the paper: ``mu_OV`` and ``mu_QK`` are the scalar coefficients of the ansatz, ``alpha`` the total
attention on the ``m`` class-specific positions, ``M`` the number of classes, ``b`` the tokens per class.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import brentq
from scipy.special import expit

from ..core.validation import require_positive_ints


@dataclass(frozen=True)
class OrthogonalSetting:
    """Sizes and learning rates of Theorem 1 (Assumptions 1-3): m class positions, n background, b tokens, M classes.

    ``factorised=True`` gives the Lemma-2 rescaled dynamics of balanced FAFO factors whose products lie on the
    ansatz; ``mu0_ov``, ``mu0_qk`` are the starting coefficients (Theorem 1 starts at 0, where factors cannot move).
    """

    m: int = 5
    n: int = 50
    b: int = 50
    M: int = 5
    eta_ov: float = 1.0
    eta_qk: float = 1.0
    factorised: bool = False
    mu0_ov: float = 0.0
    mu0_qk: float = 0.0

    def __post_init__(self) -> None:
        require_positive_ints(self, ("m", "n", "b"))
        if not (isinstance(self.M, (int, np.integer)) and self.M >= 2):
            raise ValueError(f"M (number of classes) must be an integer >= 2 (got {self.M!r})")
        for name in ("eta_ov", "eta_qk"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name} (learning rate) must be a finite number > 0 (got {value!r})")

    @property
    def ratio(self) -> float:
        """r = eta_QK / eta_OV (Figure 4)."""
        return self.eta_qk / self.eta_ov

    @property
    def alpha0(self) -> float:
        """alpha at initialisation, m / (m + n) (Lemma 3)."""
        return self.m / (self.m + self.n)

    def with_ratio(self, r: float) -> OrthogonalSetting:
        """The same setting with eta_QK = r * eta_OV; r must be > 0."""
        if not (np.isfinite(r) and r > 0):
            raise ValueError(f"ratio r = eta_QK/eta_OV must be a finite number > 0 (got {r!r})")
        return replace(self, eta_qk=float(r) * self.eta_ov)


def attention_mass(mu_qk, m: int, n: int):
    """alpha = m e^{mu_QK} / (m e^{mu_QK} + n) (Theorem 1), computed without overflow."""
    return expit(np.asarray(mu_qk, dtype=float) + np.log(m / n))


def loss(mu_ov, alpha, M: int):
    """Population loss on the ansatz, L = log(1 + (M-1) exp(-alpha mu_OV)) (Theorem 1)."""
    return np.logaddexp(0.0, np.log(M - 1) - np.asarray(alpha) * np.asarray(mu_ov))


def rhs(mu_ov, mu_qk, s: OrthogonalSetting | SimpleNamespace):
    """Right-hand sides (d mu_OV/dt, d mu_QK/dt) of Theorem 1.

    For factorised circuits (Lemma 2 on the ansatz) each rate is multiplied by the preconditioner's eigenvalue
    along the ansatz direction: 2 sqrt(b) |mu_OV| for OV (D_OV has singular values sqrt(b)) and 2 b |mu_QK| for QK
    (D_QK = sum_y S_y S_y^T has eigenvalues b), i.e. a learning rate proportional to the current scale.
    Works elementwise: mu_OV, mu_QK and the fields of ``s`` may be arrays (one entry per system).
    """
    a = attention_mass(mu_qk, s.m, s.n)
    denom = np.exp(a * mu_ov) + s.M - 1
    d_ov = s.eta_ov * a / (s.b * denom)
    d_qk = s.eta_qk * (s.M - 1) * (a - a * a) * mu_ov / (s.M * s.b**2 * denom)
    f = np.asarray(s.factorised, dtype=float)
    return (d_ov * (1 + f * (2 * np.sqrt(s.b) * np.abs(mu_ov) - 1)), d_qk * (1 + f * (2 * s.b * np.abs(mu_qk) - 1)))


@dataclass
class Trajectory:
    """A solved trajectory on a log-spaced time grid, plus the dense solution for exact read-outs."""

    setting: OrthogonalSetting
    t: np.ndarray
    mu_ov: np.ndarray
    mu_qk: np.ndarray
    target_loss: float
    reached: bool
    n_rhs: int
    dense: Callable[[float | np.ndarray], np.ndarray]  # u = log(1+t) -> (mu_OV, mu_QK)

    @property
    def alpha(self) -> np.ndarray:
        return attention_mass(self.mu_qk, self.setting.m, self.setting.n)

    @property
    def loss(self) -> np.ndarray:
        return loss(self.mu_ov, self.alpha, self.setting.M)

    def at(self, t) -> tuple[np.ndarray, np.ndarray]:
        """(mu_OV, mu_QK) at times t, from the dense output."""
        y = self.dense(np.log1p(np.atleast_1d(np.asarray(t, dtype=float))))
        return y[0], y[1]


def integrate(
    s: OrthogonalSetting,
    target_loss: float = 1e-4,
    t_max: float = 1e30,
    n_out: int = 400,
    rtol: float = 1e-9,
    atol: float = 1e-12,
) -> Trajectory:
    """Integrate Theorem 1 from (mu0_OV, mu0_QK) (0 by default) until L <= target_loss (or t_max); see
    ``integrate_many``."""
    return integrate_many([s], target_loss, t_max, n_out, rtol, atol)[0]


def integrate_many(
    settings: Sequence[OrthogonalSetting],
    target_loss: float = 1e-4,
    t_max: float = 1e30,
    n_out: int = 400,
    rtol: float = 1e-9,
    atol: float = 1e-12,
) -> list[Trajectory]:
    """Integrate Theorem 1 for several settings at once, each until its loss is <= target_loss (or t_max).

    The systems are stacked into one ODE, so the solver's per-step cost is paid once for all of them. The solver
    works in log-time u = log(1 + t), so one run spans many decades; LSODA switches to a stiff method when needed.
    Each trajectory is sampled on a grid uniform in u (log-spaced in t) up to its own first crossing of the target.
    """
    for s in settings:
        check_loss_threshold(target_loss, s.M, "target_loss")
    k = len(settings)
    p = SimpleNamespace(
        **{
            f: np.array([getattr(s, f) for s in settings], dtype=float)
            for f in ("m", "n", "b", "M", "eta_ov", "eta_qk", "factorised")
        }
    )
    y0 = np.array([s.mu0_ov for s in settings] + [s.mu0_qk for s in settings], dtype=float)
    calls = [0]

    def log_gap(y: np.ndarray) -> np.ndarray:
        return np.log(loss(y[:k], attention_mass(y[k:], p.m, p.n), p.M)) - np.log(target_loss)

    def f(u: float, y: np.ndarray) -> np.ndarray:
        calls[0] += 1
        return np.exp(u) * np.concatenate(rhs(y[:k], y[k:], p))  # dt/du = 1 + t

    def all_reached(u: float, y: np.ndarray) -> float:
        return float(np.max(log_gap(y)))

    all_reached.terminal, all_reached.direction = True, -1  # type: ignore[attr-defined]  # solve_ivp's event API
    sol = solve_ivp(
        f, (0.0, np.log1p(t_max)), y0, method="LSODA", events=all_reached, dense_output=True, rtol=rtol, atol=atol
    )
    if not sol.success:
        raise RuntimeError(f"Theorem 1 integration failed: {sol.message}")
    u_last = sol.t[-1]
    trajs = []
    for i, s in enumerate(settings):
        dense = _Component(sol.sol, i, k)
        gap = lambda u, i=i: float(log_gap(sol.sol(u))[i])  # noqa: E731
        reached = gap(u_last) <= 1e-9
        u_end = brentq(gap, 0.0, u_last, xtol=1e-13, rtol=1e-13) if reached and gap(u_last) < 0 else u_last
        u = np.linspace(0.0, u_end, n_out)
        y = dense(u)
        trajs.append(Trajectory(s, np.expm1(u), y[0], y[1], target_loss, reached, calls[0], dense))
    return trajs


@dataclass(frozen=True)
class _Component:
    """System i of a stacked dense solution, as a function of u returning (mu_OV, mu_QK)."""

    sol: Callable[[float | np.ndarray], np.ndarray]  # an OdeSolution: u -> the stacked state
    i: int
    k: int

    def __call__(self, u) -> np.ndarray:
        y = self.sol(u)
        return np.stack([y[self.i], y[self.k + self.i]])


def check_loss_threshold(value: float, M: int, name: str = "threshold") -> None:
    """A loss threshold must lie in (0, log M): the loss starts at log M and tends to 0."""
    upper = float(np.log(M))
    if not (np.isfinite(value) and 0 < value < upper):
        raise ValueError(f"{name} must lie in (0, log M) = (0, {upper:.4g}) for M = {M} (got {value!r})")


def normalised_time(t, s: OrthogonalSetting):
    """The time axis of Figure 4 as the authors plot it: t * min(eta_OV, eta_QK)."""
    return np.asarray(t) * min(s.eta_ov, s.eta_qk)
