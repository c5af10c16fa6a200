"""Appendix D: factorised circuits against collapsed ones (Propositions 1-2, Lemmas 1, 2, 4, 5), checked by autograd.

Shapes follow the paper: W_O [M, d], W_V [d, d] with W_OV = W_O W_V; W_K, W_Q [d, d] with W_QK = W_K W_Q^T;
scores s = X W_QK x_T. ``vec`` stacks columns (the convention under which the printed Omega is right).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import torch
from scipy.integrate import solve_ivp

from .model import attention, weighted_loss

Params = dict[str, torch.Tensor]


def vec(a: torch.Tensor) -> torch.Tensor:
    """Column-stacking vec(A)."""
    return a.T.reshape(-1)


def vec_rows(a: torch.Tensor) -> torch.Tensor:
    """Row-stacking vec (numpy's ravel), for contrast."""
    return a.reshape(-1)


def omega(c: torch.Tensor) -> torch.Tensor:
    """Omega(C) = (C^T C)^{1/2} (x) I_rows + I_cols (x) (C C^T)^{1/2} (Lemmas 2 and 5), for column-stacking vec.

    The square roots come from the SVD C = U S V^T: (C^T C)^{1/2} = V S V^T, (C C^T)^{1/2} = U S U^T.
    """
    rows, cols = c.shape
    u, s, vh = torch.linalg.svd(c, full_matrices=False)
    right, left = (vh.T * s) @ vh, (u * s) @ u.T
    return torch.kron(right, torch.eye(rows, dtype=c.dtype)) + torch.kron(torch.eye(cols, dtype=c.dtype), left)


def balanced_pair(c: torch.Tensor, inner: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Factors A [rows, inner], B [inner, cols] with A B = C and A^T A = B B^T (balanced, Lemmas 1 and 4).

    C = U S V^T gives A = U S^{1/2} R^T, B = R S^{1/2} V^T for a random R with orthonormal columns.
    """
    u, s, vh = torch.linalg.svd(c, full_matrices=False)
    if inner < s.numel():
        raise ValueError(f"inner dimension {inner} is smaller than rank bound {s.numel()} of C")
    q, _ = torch.linalg.qr(torch.randn(inner, s.numel(), generator=gen, dtype=c.dtype))
    root = s.sqrt()
    return (u * root) @ q.T, (q * root) @ vh


def factorise(w_ov: torch.Tensor, w_qk: torch.Tensor, gen: torch.Generator) -> Params:
    """Balanced FAFO factors of given collapsed circuits: W_O W_V = W_OV, W_K W_Q^T = W_QK."""
    d = w_qk.shape[0]
    w_o, w_v = balanced_pair(w_ov, d, gen)
    w_k, w_qt = balanced_pair(w_qk, d, gen)
    return {"W_O": w_o, "W_V": w_v, "W_K": w_k, "W_Q": w_qt.T}


def collapse(p: Params) -> tuple[torch.Tensor, torch.Tensor]:
    """(W_OV, W_QK) of a parameter dict, factorised or collapsed."""
    w_ov = p["W_OV"] if "W_OV" in p else p["W_O"] @ p["W_V"]
    w_qk = p["W_QK"] if "W_QK" in p else p["W_K"] @ p["W_Q"].T
    return w_ov, w_qk


def grads(loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], p: Params) -> Params:
    """Autograd gradients of loss_fn(W_OV, W_QK) with respect to every entry of ``p``."""
    leaves = {k: v.detach().requires_grad_() for k, v in p.items()}
    g = torch.autograd.grad(loss_fn(*collapse(leaves)), list(leaves.values()))
    return dict(zip(leaves, g))


def imbalance(p: Params) -> tuple[float, float]:
    """Frobenius norms of W_O^T W_O - W_V W_V^T (Lemma 1) and W_Q^T W_Q - W_K^T W_K (Lemma 4)."""
    return (
        float((p["W_O"].T @ p["W_O"] - p["W_V"] @ p["W_V"].T).norm()),
        float((p["W_Q"].T @ p["W_Q"] - p["W_K"].T @ p["W_K"]).norm()),
    )


def gradient_flow(
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    p0: Params,
    rates: dict[str, float],
    t_eval: np.ndarray,
    rtol: float = 1e-10,
    atol: float = 1e-12,
) -> list[Params]:
    """Solve dP/dt = -rate(P) dL/dP to tolerance (RK45) for every parameter of ``p0``; the states at ``t_eval``.

    ``rates`` maps a parameter name to its learning rate (names absent get 1).
    """
    names, shapes = list(p0), [p0[k].shape for k in p0]
    sizes = [int(np.prod(s)) for s in shapes]
    scale = np.concatenate([np.full(n, rates.get(k, 1.0)) for k, n in zip(names, sizes)])

    def unpack(y: np.ndarray) -> Params:
        parts = np.split(y, np.cumsum(sizes)[:-1])
        return {k: torch.from_numpy(v.copy()).reshape(s) for k, v, s in zip(names, parts, shapes)}

    def f(_t: float, y: np.ndarray) -> np.ndarray:
        g = grads(loss_fn, unpack(y))
        return -scale * np.concatenate([g[k].numpy().ravel() for k in names])

    y0 = np.concatenate([p0[k].detach().numpy().ravel() for k in names])
    sol = solve_ivp(f, (0.0, float(t_eval[-1])), y0, t_eval=t_eval, rtol=rtol, atol=atol, method="RK45")
    if not sol.success:
        raise RuntimeError(f"gradient flow failed: {sol.message}")
    return [unpack(y) for y in sol.y.T]


def gradient_descent(
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], p0: Params, lr: float, steps: int
) -> Params:
    """Plain full-batch gradient descent, lr per step, on every parameter."""
    p = {k: v.detach().clone() for k, v in p0.items()}
    for _ in range(steps):
        g = grads(loss_fn, p)
        p = {k: p[k] - lr * g[k] for k in p}
    return p


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max |b|."""
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


# --- the checks: each returns numbers, so a chapter and a test can both assert on them -------------------------------


def random_problem(seed: int = 0, S: int = 16, T: int = 6, d: int = 5, M: int = 3):
    """Random sequences, queries, labels and uniform weights: the generic setting of Appendix D."""
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(S, T, d, generator=gen, dtype=torch.float64)
    return X, X[:, -1], torch.randint(0, M, (S,), generator=gen), torch.full((S,), 1.0 / S, dtype=torch.float64)


def proposition_checks(seed: int = 0, d: int = 5, M: int = 3) -> dict[str, float]:
    """Propositions 1 and 2 on one sequence: the printed formulas against autograd (relative max errors)."""
    X, xq, y, w = random_problem(seed, S=1, d=d, M=M)
    gen = torch.Generator().manual_seed(seed + 1)
    p = {
        k: 0.5 * torch.randn(*s, generator=gen, dtype=torch.float64)
        for k, s in {"W_O": (M, d), "W_V": (d, d), "W_K": (d, d), "W_Q": (d, d)}.items()
    }
    loss_fn = lambda a, b: weighted_loss(X, xq, y, w, a, b)  # noqa: E731
    g = grads(loss_fn, p)
    w_ov, w_qk = collapse(p)
    g_ov, g_qk = grads(loss_fn, {"W_OV": w_ov, "W_QK": w_qk}).values()
    a = attention(X, xq, w_qk, False)[0]
    x = X[0]
    y_tilde = torch.softmax(w_ov @ x.T @ a, 0) - torch.nn.functional.one_hot(y[0], M)  # (y~ - y)
    x_tilde = x.T @ a
    Z = torch.diag(a) - torch.outer(a, a)
    G_printed = torch.outer(xq[0], y_tilde) @ w_ov @ x.T @ Z @ x  # eq. (45) as printed
    return {
        "eq30": rel(torch.outer(y_tilde, x_tilde), g_ov),
        "eq31": rel(g_ov @ p["W_V"].T, g["W_O"]),
        "eq32": rel(p["W_O"].T @ g_ov, g["W_V"]),
        "eq33_printed": rel(torch.outer(y_tilde, x_tilde), -g_ov),
        "eq45_printed": rel(G_printed, g_qk),
        "eq45_transposed": rel(G_printed.T, g_qk),
        "eq46_printed_G": rel(G_printed.T @ p["W_K"], g["W_Q"]),
        "eq47_printed_G": rel(G_printed @ p["W_Q"], g["W_K"]),
        "eq46_true_G": rel(g_qk.T @ p["W_K"], g["W_Q"]),
        "eq47_true_G": rel(g_qk @ p["W_Q"], g["W_K"]),
    }


def _balanced_random(seed: int, d: int, M: int, scale: float) -> Params:
    gen = torch.Generator().manual_seed(seed)
    c_ov = scale * torch.randn(M, d, generator=gen, dtype=torch.float64)
    c_qk = scale * torch.randn(d, d, generator=gen, dtype=torch.float64)
    return factorise(c_ov, c_qk, gen)


def conservation_checks(
    seed: int = 0, d: int = 5, M: int = 3, t_end: float = 5.0, lrs: tuple[float, ...] = (0.1, 0.01, 0.001)
) -> dict[str, float]:
    """Lemmas 1 and 4: the imbalance after gradient flow (to tolerance) and after GD at several step sizes over the
    same time span, from a balanced random start (imbalance 0 up to rounding)."""
    X, xq, y, w = random_problem(seed, d=d, M=M)
    loss_fn = lambda a, b: weighted_loss(X, xq, y, w, a, b)  # noqa: E731
    p0 = _balanced_random(seed, d, M, 0.7)
    size = float(sum(v.norm() ** 2 for v in p0.values()))
    out = {"start": max(imbalance(p0)) / size}
    p_flow = gradient_flow(loss_fn, p0, {}, np.array([0.0, t_end]))[-1]
    out["flow"] = max(imbalance(p_flow)) / size
    out["flow_moved"] = float(sum((p_flow[k] - p0[k]).norm() ** 2 for k in p0) ** 0.5 / size**0.5)
    for lr in lrs:
        out[f"gd_{lr}"] = max(imbalance(gradient_descent(loss_fn, p0, lr, round(t_end / lr)))) / size
    return out


def preconditioning_checks(seed: int = 0, d: int = 5, M: int = 3) -> dict[str, float]:
    """Lemmas 2 and 5 at a balanced point: the velocity of the product under factorised gradient flow against
    -Omega(C) vec(grad L1(C)); with row-stacking vec and at an unbalanced point for contrast; homogeneity."""
    X, xq, y, w = random_problem(seed, d=d, M=M)
    loss_fn = lambda a, b: weighted_loss(X, xq, y, w, a, b)  # noqa: E731
    p = _balanced_random(seed, d, M, 0.7)
    out = {}
    for label, q in (
        ("balanced", p),
        ("unbalanced", p | {"W_O": 2 * p["W_O"], "W_V": p["W_V"] / 2, "W_K": 2 * p["W_K"], "W_Q": p["W_Q"] / 2}),
    ):
        g = grads(loss_fn, q)
        w_ov, w_qk = collapse(q)
        g_ov, g_qk = grads(loss_fn, {"W_OV": w_ov, "W_QK": w_qk}).values()
        v_ov = -(g["W_O"] @ q["W_V"] + q["W_O"] @ g["W_V"])  # d(W_O W_V)/dt
        v_qk = -(g["W_K"] @ q["W_Q"].T + q["W_K"] @ g["W_Q"].T)  # d(W_K W_Q^T)/dt
        out[f"lemma2_{label}"] = rel(-omega(w_ov) @ vec(g_ov), vec(v_ov))
        out[f"lemma5_{label}"] = rel(-omega(w_qk) @ vec(g_qk), vec(v_qk))
        if label == "balanced":
            out["lemma2_row_vec"] = rel(-omega(w_ov) @ vec_rows(g_ov), vec_rows(v_ov))
            out["lemma5_eq56_printed_G"] = rel(-omega(w_qk) @ vec(g_qk.T), vec(v_qk))
            out["omega_2C"] = rel(omega(2 * w_ov), 2 * omega(w_ov))
            out["omega_neg2C_printed"] = rel(omega(-2 * w_ov), -2 * omega(w_ov))
            out["omega_neg2C_abs"] = rel(omega(-2 * w_ov), 2 * omega(w_ov))
    return out


LABELS = {  # each check's stable id -> the label the book shows (equation numbers of Appendix D), LaTeX in $...$
    "eq30": r"eq. (30): $\partial L/\partial \mathbf W_{OV} = (\tilde y - y)\,\tilde x^\top$",
    "eq31": r"eqs. (31), (3): $\partial L/\partial \mathbf W_O = \nabla L_1\,\mathbf W_V^\top$",
    "eq32": r"eqs. (32), (3): $\partial L/\partial \mathbf W_V = \mathbf W_O^\top\,\nabla L_1$",
    "eq33_printed": r"eq. (33) as printed, $d\mathbf W_{OV}/dt = (\tilde y - y)\,\tilde x^\top$, against "
    r"$-\partial L/\partial \mathbf W_{OV}$",
    "eq45_printed": r"eq. (45): $G$ as printed, against $\partial L/\partial \mathbf W_{QK}$",
    "eq45_transposed": r"eq. (45): $G^\top$, against $\partial L/\partial \mathbf W_{QK}$",
    "eq46_printed_G": r"eq. (46): $\partial L/\partial \mathbf W_Q = G^\top \mathbf W_K$, $G$ as printed",
    "eq47_printed_G": r"eq. (47): $\partial L/\partial \mathbf W_K = G\,\mathbf W_Q$, $G$ as printed",
    "eq46_true_G": r"eq. (46): $\partial L/\partial \mathbf W_Q = G^\top \mathbf W_K$, "
    r"$G = \partial L/\partial \mathbf W_{QK}$",
    "eq47_true_G": r"eq. (47): $\partial L/\partial \mathbf W_K = G\,\mathbf W_Q$, "
    r"$G = \partial L/\partial \mathbf W_{QK}$",
    "start": "at the start",
    "flow": "after gradient flow",
    "flow_moved": r"how far gradient flow moved the weights, $\lVert W(T) - W(0)\rVert / \lVert W(0)\rVert$",
    "lemma2_balanced": "Lemma 2 (OV), balanced factors",
    "lemma5_balanced": "Lemma 5 (QK), balanced factors",
    "lemma2_unbalanced": "Lemma 2 (OV), unbalanced factors",
    "lemma5_unbalanced": "Lemma 5 (QK), unbalanced factors",
    "lemma2_row_vec": r"Lemma 2 (OV), $\operatorname{vec}$ stacking rows",
    "lemma5_eq56_printed_G": r"Lemma 5 (QK), eq. (56) with $G$ as printed",
    "omega_2C": r"$\Omega(2C) = 2\,\Omega(C)$",
    "omega_neg2C_printed": r"$\Omega(-2C) = -2\,\Omega(C)$ (as printed: $\Omega(aC) = a\,\Omega(C)$)",
    "omega_neg2C_abs": r"$\Omega(-2C) = \lvert -2\rvert\,\Omega(C)$",
}


def label(check: str) -> str:
    """The book's label of a check id (``gd_<lr>``: gradient descent at that step size)."""
    return f"gradient descent, step {check[3:]}" if check.startswith("gd_") else LABELS[check]


def tidy_checks(groups: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Every group's checks in one long table (check label, value, group), as the chapter stores them."""
    return pd.concat(
        [
            pd.DataFrame({"check": [label(k) for k in c], "value": list(c.values()), "group": g})
            for g, c in groups.items()
        ]
    )
