"""Exact finite instances of the orthogonal setting (Section 6.1): every sequence enumerated, population gradients
by autograd, compared entry by entry with Theorem 1.

An instance has ``M`` classes of ``b`` class tokens each, ``m`` class positions (tokens drawn uniformly with
replacement), ``n`` background positions drawn from ``2 q`` background vectors ``+-u_i`` (zero mean, Assumption 2)
and a query token. Enumerating every (class, tokens, query) combination with its probability makes the loss the
exact population loss, so its autograd gradient is the population gradient of Theorem 1's proof.

Options that switch off one assumption at a time (the theorem needs each of them):
``assumption="literal"`` (Assumption 1 as printed: only s_1^tau..s_M^tau orthogonal for each tau), ``token_norm``
(the proof needs unit norm), ``background="shifted"`` (non-zero mean), ``overlap`` (background not orthogonal to the
class tokens), ``class_probs`` (a non-uniform class prior), ``query`` and ``self_attend`` (the query token, which the
paper never specifies).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from ..core.validation import require_positive_ints
from .dynamics import OrthogonalSetting, attention_mass, integrate, rhs
from .factorised import Params, collapse, gradient_flow
from .model import attention, weighted_loss

QUERIES = ("class_mean", "class_token", "fixed")


@dataclass(frozen=True)
class InstanceConfig:
    """One exact instance; the defaults satisfy every assumption Theorem 1's proof uses."""

    M: int = 3
    b: int = 2
    m: int = 2
    n: int = 2
    q: int = 1
    query: str = "class_mean"
    self_attend: bool = False
    assumption: str = "orthonormal"
    token_norm: float = 1.0
    background: str = "symmetric"
    overlap: float = 0.0
    class_probs: tuple[float, ...] | None = None
    seed: int = 0
    max_sequences: int = 200_000

    def __post_init__(self) -> None:
        require_positive_ints(self, ("M", "b", "m", "n", "q"))
        if self.M < 2:
            raise ValueError(f"M must be >= 2 classes (got {self.M})")
        if self.query not in QUERIES:
            raise ValueError(f"unknown query {self.query!r}; allowed: {', '.join(QUERIES)}")
        if self.assumption not in ("orthonormal", "literal"):
            raise ValueError(f"assumption must be 'orthonormal' or 'literal' (got {self.assumption!r})")
        if self.background not in ("symmetric", "shifted"):
            raise ValueError(f"background must be 'symmetric' or 'shifted' (got {self.background!r})")
        if self.class_probs is not None and (
            len(self.class_probs) != self.M or abs(sum(self.class_probs) - 1) > 1e-9 or min(self.class_probs) <= 0
        ):
            raise ValueError(
                f"class_probs must be M = {self.M} positive numbers summing to 1 (got {self.class_probs!r})"
            )
        if self.n_sequences > self.max_sequences:
            raise ValueError(
                f"this instance has {self.n_sequences} sequences (> max_sequences = "
                f"{self.max_sequences}); lower b, m, n or q"
            )

    @property
    def n_sequences(self) -> int:
        per_query = self.b if self.query == "class_token" else 1
        return self.M * self.b**self.m * (2 * self.q) ** self.n * per_query


@dataclass
class OrthogonalInstance:
    """Token vectors, every sequence X [S, T, d] with its probability, labels; the loss and its exact gradients."""

    cfg: InstanceConfig
    tokens: torch.Tensor = field(init=False)  # [M, b, d] class tokens s_y^tau
    background: torch.Tensor = field(init=False)  # [2q, d]
    query_fixed: torch.Tensor = field(init=False)  # [d]
    X: torch.Tensor = field(init=False)
    x_query: torch.Tensor = field(init=False)
    labels: torch.Tensor = field(init=False)
    probs: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.tokens, self.background, self.query_fixed = _vectors(self.cfg)
        self.X, self.x_query, self.labels, self.probs = _enumerate(
            self.cfg, self.tokens, self.background, self.query_fixed
        )

    @property
    def d(self) -> int:
        return self.tokens.shape[-1]

    @property
    def class_sums(self) -> torch.Tensor:
        """S_y = sum_tau s_y^tau, [M, d]."""
        return self.tokens.sum(1)

    def attention(self, w_qk: torch.Tensor) -> torch.Tensor:
        return attention(self.X, self.x_query, w_qk, self.cfg.self_attend)

    def loss(self, w_ov: torch.Tensor, w_qk: torch.Tensor) -> torch.Tensor:
        """Population cross-entropy of z = W_OV X^T softmax(X W_QK x_T) (eq. 1, collapsed)."""
        return weighted_loss(self.X, self.x_query, self.labels, self.probs, w_ov, w_qk, self.cfg.self_attend)

    def gradients(self, w_ov: torch.Tensor, w_qk: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(dL/dW_OV, dL/dW_QK) of the population loss, by autograd."""
        w_ov, w_qk = w_ov.detach().requires_grad_(), w_qk.detach().requires_grad_()
        g_ov, g_qk = torch.autograd.grad(self.loss(w_ov, w_qk), (w_ov, w_qk))
        return g_ov, g_qk

    def alpha(self, w_qk: torch.Tensor) -> float:
        """Measured alpha: expected attention on positions holding class tokens (the m class positions, plus the
        query when it attends to itself and is a class token or class mean)."""
        last = self.cfg.m + (self.cfg.self_attend and self.cfg.query != "fixed")
        attn = self.attention(w_qk)
        return float((self.probs * (attn[:, : self.cfg.m].sum(1) + (attn[:, -1] if last > self.cfg.m else 0))).sum())

    def directions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Theorem 1's directions: D_OV[k] = S_k - (1/M) sum_y S_y and D_QK = sum_y S_y S_y^T.

        With a class-independent (``fixed``) query the QK gradient points along (sum_y S_y) x_T^T instead.
        """
        S = self.class_sums
        d_ov = S - S.mean(0, keepdim=True)
        d_qk = S.sum(0)[:, None] * self.query_fixed[None, :] if self.cfg.query == "fixed" else S.T @ S
        return d_ov, d_qk

    def ansatz(self, mu_ov: float, mu_qk: float) -> tuple[torch.Tensor, torch.Tensor]:
        """W_OV = mu_OV D_OV, W_QK = mu_QK D_QK (Theorem 1)."""
        d_ov, d_qk = self.directions()
        return mu_ov * d_ov, mu_qk * d_qk

    def read_mu(self, w_ov: torch.Tensor, w_qk: torch.Tensor) -> tuple[float, float]:
        """Least-squares coefficients of W_OV, W_QK on the ansatz directions."""
        d_ov, d_qk = self.directions()
        return float((w_ov * d_ov).sum() / (d_ov * d_ov).sum()), float((w_qk * d_qk).sum() / (d_qk * d_qk).sum())


def _rng_orthonormal(d: int, k: int, gen: torch.Generator) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(d, k, generator=gen, dtype=torch.float64))
    return q.T  # k orthonormal rows


def _vectors(cfg: InstanceConfig) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Class tokens [M, b, d], background vectors [2q, d] and a fixed query vector [d] (orthogonal to all tokens)."""
    gen = torch.Generator().manual_seed(cfg.seed)
    n_class = cfg.M * cfg.b
    d = n_class + cfg.q + 1
    basis = _rng_orthonormal(d, d, gen)  # a random orthonormal basis, so nothing hides in coordinate alignment
    if cfg.assumption == "orthonormal":
        tokens = basis[:n_class].reshape(cfg.M, cfg.b, d)
    else:  # for each tau a fresh orthonormal M-frame inside the class subspace: orthogonal across y, not across tau
        frames = [_rng_orthonormal(n_class, cfg.M, gen) @ basis[:n_class] for _ in range(cfg.b)]
        tokens = torch.stack(frames, dim=1)
    tokens = cfg.token_norm * tokens
    u = basis[n_class : n_class + cfg.q] + cfg.overlap * tokens[0, 0] / cfg.token_norm
    background = torch.cat([u, -u]) if cfg.background == "symmetric" else torch.cat([u, 0.5 * u])
    return tokens, background, basis[-1]


def _enumerate(cfg: InstanceConfig, tokens: torch.Tensor, background: torch.Tensor, fixed: torch.Tensor):
    """Every sequence (class tokens, background tokens, query) with its probability; the query is the last row."""
    class_p = cfg.class_probs or (1.0 / cfg.M,) * cfg.M
    xs, xq, ys, ps = [], [], [], []
    n_query = cfg.b if cfg.query == "class_token" else 1
    for y in range(cfg.M):
        for taus in itertools.product(range(cfg.b), repeat=cfg.m):
            for bgs in itertools.product(range(2 * cfg.q), repeat=cfg.n):
                for tq in range(n_query):
                    query = {"class_mean": tokens[y].mean(0), "class_token": tokens[y, tq], "fixed": fixed}[cfg.query]
                    rows = [tokens[y, t] for t in taus] + [background[j] for j in bgs] + [query]
                    xs.append(torch.stack(rows))
                    xq.append(query)
                    ys.append(y)
                    ps.append(class_p[y] / (cfg.b**cfg.m * (2 * cfg.q) ** cfg.n * n_query))
    return (torch.stack(xs), torch.stack(xq), torch.tensor(ys), torch.tensor(ps, dtype=torch.float64))


def theorem_rates(
    inst: OrthogonalInstance, mu_ov: float, mu_qk: float, extra_positions: int = 0, qk_power: int = 2
) -> tuple[float, float]:
    """Theorem 1's d mu_OV/dt, d mu_QK/dt at unit rates; ``extra_positions`` adds to m in alpha (a self-attending
    class-mean query counts as one more class position); ``qk_power=1`` replaces 1/b^2 by 1/b (what a
    class-independent query gives)."""
    c = inst.cfg
    s = OrthogonalSetting(m=c.m + extra_positions, n=c.n, b=c.b, M=c.M)
    d_ov, d_qk = rhs(mu_ov, mu_qk, s)
    return float(d_ov), float(d_qk) * c.b ** (2 - qk_power)


def compare_with_theorem(
    inst: OrthogonalInstance, mu_ov: float, mu_qk: float, extra_positions: int = 0, qk_power: int = 2
) -> dict[str, float]:
    """At the ansatz point (mu_OV, mu_QK): the autograd population gradient against Theorem 1.

    ``ov_closure``/``qk_closure``: norm of the gradient's part outside the ansatz direction over the gradient's norm
    (0 = the ansatz is closed). ``ov_error``/``qk_error``: max entrywise |autograd - theorem| over max |autograd|.
    """
    w_ov, w_qk = inst.ansatz(mu_ov, mu_qk)
    g_ov, g_qk = inst.gradients(w_ov, w_qk)
    d_ov, d_qk = inst.directions()
    r_ov, r_qk = theorem_rates(inst, mu_ov, mu_qk, extra_positions, qk_power)
    out = {
        "mu_ov": mu_ov,
        "mu_qk": mu_qk,
        "alpha_measured": inst.alpha(w_qk),
        "alpha_theorem": float(attention_mass(mu_qk, inst.cfg.m + extra_positions, inst.cfg.n)),
    }
    for name, g, direction, rate in (("ov", g_ov, d_ov, r_ov), ("qk", g_qk, d_qk, r_qk)):
        coef = (g * direction).sum() / (direction * direction).sum()
        scale = g.abs().max().clamp_min(1e-300)
        out[f"{name}_closure"] = float((g - coef * direction).norm() / g.norm().clamp_min(1e-300))
        out[f"{name}_error"] = float((g + rate * direction).abs().max() / scale)
    return out


def worst_case(inst: OrthogonalInstance, points: list[tuple[float, float]], **kw) -> dict[str, float]:
    """The largest closure residual and theorem error over several ansatz points."""
    rows = [compare_with_theorem(inst, mo, mq, **kw) for mo, mq in points]
    keys = ("ov_closure", "qk_closure", "ov_error", "qk_error")
    return {k: max(r[k] for r in rows) for k in keys} | {
        "alpha_gap": max(abs(r["alpha_measured"] - r["alpha_theorem"]) for r in rows)
    }


CHECK_POINTS = [(0.5, 0.0), (1.0, 0.3), (2.0, -0.4), (3.0, 1.5), (0.2, 2.5)]


def flow(
    inst: OrthogonalInstance,
    p0: Params,
    t_eval: np.ndarray,
    rates: dict[str, float] | None = None,
) -> dict[str, np.ndarray]:
    """Population gradient flow of the full matrices of ``p0`` (collapsed or factorised), solved to tolerance;
    at each time of ``t_eval`` the read-outs of mu_OV and mu_QK (least squares on Theorem 1's directions), the
    norm of the part of each circuit outside its direction, alpha and the loss."""
    states = gradient_flow(inst.loss, p0, rates or {}, t_eval)
    d_ov, d_qk = inst.directions()
    rows: dict[str, list] = {k: [] for k in ("mu_ov", "mu_qk", "off_ov", "off_qk", "alpha", "loss")}
    for p in states:
        w_ov, w_qk = collapse(p)
        mo, mq = inst.read_mu(w_ov, w_qk)
        rows["mu_ov"].append(mo)
        rows["mu_qk"].append(mq)
        rows["off_ov"].append(float((w_ov - mo * d_ov).norm()))
        rows["off_qk"].append(float((w_qk - mq * d_qk).norm()))
        rows["alpha"].append(inst.alpha(w_qk))
        rows["loss"].append(float(inst.loss(w_ov, w_qk)))
    return {"t": np.asarray(t_eval)} | {k: np.asarray(v) for k, v in rows.items()}


def zero_start(inst: OrthogonalInstance) -> Params:
    """Theorem 1's initialisation W_OV(0) = W_QK(0) = 0."""
    d = inst.d
    return {"W_OV": torch.zeros(inst.cfg.M, d, dtype=torch.float64), "W_QK": torch.zeros(d, d, dtype=torch.float64)}


# (stable id, name shown in the book, what it tests, config changes, (label, theorem_rates keywords) of a modified
# theorem that then holds)
CASES: list[tuple[str, str, str, dict, tuple[str, dict] | None]] = [
    ("all", "all assumptions, query = class mean", "-", {}, None),
    ("class_token", "query = a class token drawn uniformly", "query token", {"query": "class_token"}, None),
    (
        "mean_self",
        "query = class mean, attends to itself",
        "query self-attention",
        {"self_attend": True},
        (r"$\alpha$ counts the query as one more class position, $m + 1$", {"extra_positions": 1}),
    ),
    (
        "token_self",
        "query = class token, attends to itself",
        "query self-attention",
        {"query": "class_token", "self_attend": True},
        None,
    ),
    (
        "fixed",
        "query = fixed vector orthogonal to all tokens",
        "query token",
        {"query": "fixed"},
        (r"$1/b$ in place of $1/b^2$ in $d\mu_{QK}/dt$", {"qk_power": 1}),
    ),
    (
        "fixed_self",
        "query = fixed vector, attends to itself",
        "query self-attention",
        {"query": "fixed", "self_attend": True},
        None,
    ),
    (
        "literal",
        "Assumption 1 as printed (orthogonal only across classes, for each τ)",
        "Assumption 1",
        {"assumption": "literal"},
        None,
    ),
    ("norm", "class tokens of norm 1.2", "unit-norm tokens", {"token_norm": 1.2}, None),
    ("shifted", "background with non-zero mean", "Assumption 2", {"background": "shifted"}, None),
    ("overlap", "background overlapping a class token (0.3)", "Assumption 3", {"overlap": 0.3}, None),
    ("prior", "class prior (0.5, 0.3, 0.2)", "uniform classes", {"class_probs": (0.5, 0.3, 0.2)}, None),
]
CASE_LABELS = {case_id: name for case_id, name, *_ in CASES}  # stable id -> the row name of ``assumption_cases``
ERRORS = ("ov_closure", "qk_closure", "ov_error", "qk_error", "alpha_gap")  # the measures of ``compare_with_theorem``
ERROR_LABELS = {  # each measure -> what the book calls it (``worst_case`` gives the largest over the check points)
    "ov_closure": "OV gradient off the ansatz",
    "qk_closure": "QK gradient off the ansatz",
    "ov_error": "OV gradient's error",
    "qk_error": "QK gradient's error",
    "alpha_gap": "attention's error",
}


def assumption_cases(base: InstanceConfig | None = None, points: list[tuple[float, float]] = CHECK_POINTS):
    """One row per case of ``CASES``: the worst closure residual and theorem error over ``points`` (0 up to
    rounding when Theorem 1 holds exactly), and, where a modified theorem holds, its worst error."""
    base = base or InstanceConfig()
    rows = []
    for _, name, tests, changes, variant in CASES:
        inst = OrthogonalInstance(replace(base, **changes))
        row = {"case": name, "tests": tests, "sequences": inst.cfg.n_sequences} | worst_case(inst, points)
        row["modified theorem"], row["modified error"] = "-", float("nan")
        if variant:
            w = worst_case(inst, points, **variant[1])
            row["modified theorem"], row["modified error"] = variant[0], max(w.values())
        rows.append(row)
    return pd.DataFrame(rows)


def size_checks(sizes: Sequence[Sequence[int]], seed: int = 0, points: list[tuple[float, float]] = CHECK_POINTS):
    """Theorem 1 against autograd on exact instances of several sizes [M, b, m, n, q], every assumption met."""
    rows = []
    for M, b, m, n, q in sizes:
        inst = OrthogonalInstance(InstanceConfig(M=M, b=b, m=m, n=n, q=q, seed=seed))
        row: dict[str, float] = {"M": M, "b": b, "m": m, "n": n, "q": q, "d": inst.d, "sequences": inst.cfg.n_sequences}
        rows.append(row | worst_case(inst, [(mo, mq) for mo, mq in points]))
    return pd.DataFrame(rows)


def flow_vs_theorem(inst: OrthogonalInstance, ratio: float, t_end: float, n_out: int = 40):
    """Full-matrix population gradient flow from W = 0 (eta_OV = 1, eta_QK = ratio) next to Theorem 1's ODE
    solution for the same sizes: mu_OV, mu_QK, alpha of both, the largest |mu gap| and the off-ansatz norm."""
    c = inst.cfg
    t_eval = np.concatenate([[0.0], np.geomspace(t_end * 1e-4, t_end, n_out - 1)])
    fl = flow(inst, zero_start(inst), t_eval, {"W_QK": ratio})
    s = OrthogonalSetting(m=c.m, n=c.n, b=c.b, M=c.M, eta_ov=1.0, eta_qk=ratio)
    ode_ov, ode_qk = integrate(s, target_loss=1e-12, t_max=t_end, rtol=1e-11, atol=1e-13).at(t_eval)
    out = pd.DataFrame(
        {
            "t": t_eval,
            "mu_ov": fl["mu_ov"],
            "mu_qk": fl["mu_qk"],
            "alpha": fl["alpha"],
            "loss": fl["loss"],
            "ode_mu_ov": ode_ov,
            "ode_mu_qk": ode_qk,
            "ode_alpha": attention_mass(ode_qk, c.m, c.n),
        }
    )
    out["mu_gap"] = np.maximum(np.abs(out["mu_ov"] - out["ode_mu_ov"]), np.abs(out["mu_qk"] - out["ode_mu_qk"]))
    out["off_ansatz"] = np.maximum(fl["off_ov"], fl["off_qk"])
    return out


def flow_comparison(base: InstanceConfig, ratios: list[float], t_end: float):
    """``flow_vs_theorem`` for every ratio, on the instance meeting every assumption and on the same instance with
    Assumption 1 as printed; one long table with columns ``instance`` and ``ratio``."""
    parts = []
    variants: tuple[tuple[str, dict[str, Any]], ...] = (
        ("all assumptions", {}),
        ("Assumption 1 as printed", {"assumption": "literal"}),
    )
    for name, changes in variants:
        inst = OrthogonalInstance(replace(base, **changes))
        parts += [flow_vs_theorem(inst, r, t_end).assign(instance=name, ratio=r) for r in ratios]
    return pd.concat(parts, ignore_index=True)
