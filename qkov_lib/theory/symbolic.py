"""Sympy derivations of Theorem 1 (Appendix B) and Lemma 3 (Appendix C) for general M, b, m, n.

Vectors in the span of the class sums S_1..S_M are handled exactly for symbolic M by their symmetry: the vectors
a e_y + c 1 (coordinates on S_y and on sum_y S_y) form a two-dimensional algebra with <e_y, e_y> = 1, <e_y, 1> = 1,
<1, 1> = M. Token vectors have norm ``c`` (the proof silently takes c = 1), so <S_y, S_y'> = b c^2 [y = y'].
Each check is a :class:`Check`: the derived expression, the paper's, and whether sympy proves them equal.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import sympy as sp

M, b, m, n, c = sp.symbols("M b m n c", positive=True)
alpha, mu_ov, mu_qk, eta_ov, eta_qk, t = sp.symbols("alpha mu_OV mu_QK eta_OV eta_QK t", positive=True)
x, delta, a0 = sp.symbols("x delta alpha_0", positive=True)


@dataclass(frozen=True)
class Check:
    """One symbolic identity: ``derived`` (from the model) against ``paper`` (as printed); ``holds`` when equal."""

    name: str
    derived: sp.Expr
    paper: sp.Expr
    holds: bool


def as_table(checks: list[Check], latex: bool = False):
    """The checks as a DataFrame: identity, derived, paper, holds. Plain: the expressions as sympy strings (the
    tidy table a chapter saves). ``latex``: for reading, columns that fit a page: the identity's name; the derived
    expression above the paper's, each in LaTeX between ``$...$`` (``sympy.latex``); and whether sympy proves them
    equal."""
    if not latex:
        return pd.DataFrame(
            [{"identity": c.name, "derived": str(c.derived), "paper": str(c.paper), "holds": c.holds} for c in checks]
        )
    return pd.DataFrame(
        [
            {
                "identity": LATEX_NAMES.get(c.name, c.name),
                "derived here, and as the paper prints it": f"derived: $\\displaystyle {sp.latex(c.derived)}$\n"
                f"printed: $\\displaystyle {sp.latex(c.paper)}$",
                "proved": c.holds,
            }
            for c in checks
        ]
    )


LATEX_NAMES = {  # each check's name -> the same in words and LaTeX, for reading
    "softmax on the ansatz, p_y (eq. 9)": r"softmax on the ansatz, $p_y$ (eq. 9)",
    "OV gradient stays on the ansatz: coefficient ratio sum S : S_k": r"the OV gradient stays on the ansatz: its coefficient on $\sum_y S_y$ over its coefficient on $S_k$",
    "d mu_OV/dt (eq. 12-13)": r"$d\mu_{OV}/dt$ (eqs. 12-13)",
    "d mu_OV/dt by the chain rule, -dL/dmu_OV / |D_OV|^2": r"$d\mu_{OV}/dt$ by the chain rule, $-\dfrac{\partial L/\partial\mu_{OV}}{\lVert D_{OV}\rVert^2}$",
    "(e_y - 1/M)^T (p - e_y) = p_y - 1 (eq. 15)": r"$(e_y - \tfrac1M\mathbf 1)^\top (p - e_y) = p_y - 1$ (eq. 15)",
    "d mu_QK/dt (eqs. 21-23)": r"$d\mu_{QK}/dt$ (eqs. 21-23)",
    "d mu_QK/dt by the chain rule, -dL/dmu_QK / |D_QK|^2 with dalpha/dmu_QK = alpha(1-alpha)": r"$d\mu_{QK}/dt$ by the chain rule, $-\dfrac{\partial L/\partial\mu_{QK}}{\lVert D_{QK}\rVert^2}$ with "
    r"$\dfrac{d\alpha}{d\mu_{QK}} = \alpha(1-\alpha)$",
    "class-token score x_j^T W_QK x_T / mu_QK": r"class-token score $x_j^\top \mathbf W_{QK}\, x_T / \mu_{QK}$",
    "alpha'(mu_QK) = alpha(1 - alpha)": r"$\alpha'(\mu_{QK}) = \alpha(1 - \alpha)$",
    "|D_OV|^2 = b (M - 1) and |D_QK|^2 = M b^2 (unit tokens)": r"$\lVert D_{OV}\rVert^2 = b(M - 1)$ and $\lVert D_{QK}\rVert^2 = Mb^2$ (unit tokens; their sum)",
    "d mu_QK / d mu_OV (eq. 29)": r"$d\mu_{QK}/d\mu_{OV}$ (eq. 29)",
    "1/(e^x + M - 1) - e^-x / M >= 0 for x >= 0, M > 1 (e^x = 1 + y)": r"$\dfrac{1}{e^x + M - 1} - \dfrac{e^{-x}}{M} \ge 0$ for $x \ge 0$, $M > 1$ (with $e^x = 1 + y$)",
    "e^-x - 1/(e^x + M - 1) >= 0 for x >= 0, M > 1": r"$e^{-x} - \dfrac{1}{e^x + M - 1} \ge 0$ for $x \ge 0$, $M > 1$ (with $e^x = 1 + y$)",
    "upper mu_OV bound solves U' = (eta_OV/b) e^{-alpha_0 U}, U(0) = 0": r"the upper $\mu_{OV}$ bound solves $U' = \tfrac{\eta_{OV}}{b}\, e^{-\alpha_0 U}$, $U(0) = 0$",
    "lower mu_OV bound solves L' = eta_OV alpha_0/(M b) e^{-L}, L(0) = 0": r"the lower $\mu_{OV}$ bound solves $L' = \tfrac{\eta_{OV}\alpha_0}{Mb}\, e^{-L}$, $L(0) = 0$",
    "integrating (29) with 1 - alpha <= 1 - alpha_0": r"integrating (29) with $1 - \alpha \le 1 - \alpha_0$",
    "mu_QK upper bound (26) = that integral at the mu_OV upper bound": r"the $\mu_{QK}$ upper bound (26) is that integral at the $\mu_{OV}$ upper bound",
    "mu_QK lower bound (28) = the delta integral at the mu_OV lower bound": r"the $\mu_{QK}$ lower bound (28) is the $\delta$ integral at the $\mu_{OV}$ lower bound",
}


def _equal(lhs: sp.Expr, rhs: sp.Expr) -> bool:
    return sp.simplify(sp.expand(lhs - rhs)) == 0 or sp.simplify(sp.exp(lhs) - sp.exp(rhs)) == 0


def check(name: str, derived: sp.Expr, paper: sp.Expr) -> Check:
    return Check(name, sp.simplify(derived), paper, _equal(derived, paper))


def _dot(u: tuple, v: tuple) -> sp.Expr:
    """<a1 e_y + c1 1, a2 e_y + c2 1> in class coordinates (the same class y on both sides)."""
    return u[0] * v[0] + u[0] * v[1] + u[1] * v[0] + M * u[1] * v[1]


def softmax_on_ansatz() -> tuple[sp.Expr, sp.Expr]:
    """(p_y, p_k for k != y) for the logits z = mu_OV alpha c^2 (e_y - 1/M) that the OV ansatz gives (eq. 8)."""
    z_same, z_other = mu_ov * alpha * c**2 * (1 - 1 / M), -mu_ov * alpha * c**2 / M
    total = sp.exp(z_same) + (M - 1) * sp.exp(z_other)
    return sp.simplify(sp.exp(z_same) / total), sp.simplify(sp.exp(z_other) / total)


def theorem1_rates() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """Theorem 1 as printed: d mu_OV/dt, d mu_QK/dt, alpha(mu_QK)."""
    denom = sp.exp(alpha * mu_ov) + M - 1
    return (
        eta_ov * alpha / (b * denom),
        eta_qk * (M - 1) * (alpha - alpha**2) * mu_ov / (M * b**2 * denom),
        m * sp.exp(mu_qk) / (m * sp.exp(mu_qk) + n),
    )


def theorem1_checks() -> list[Check]:
    """Appendix B step by step, for symbolic M, b, m, n and token norm c; the paper's forms are those at c = 1."""
    p_same, p_other = softmax_on_ansatz()
    d_ov, d_qk, alpha_of_mu = theorem1_rates()
    at1 = {c: 1}
    loss = -sp.log(p_same)
    # OV: grad row k = (1/M) sum_y (p_k - [k=y]) (alpha/b) S_y = g_k S_k + g_sum sum_y S_y  (eqs. 6, 10-12)
    g_k = alpha / (b * M) * (p_same - 1 - p_other)
    g_sum = alpha / (b * M) * p_other
    ov_rate = -g_k  # the ansatz direction S_k - (1/M) sum S has coefficient 1 on S_k
    # QK: dL/ds_j = a_j (c_j - alpha) (W_OV x_j)^T (p - e_y), W_OV x_j = mu c^2 (e_y - 1/M) for a class token
    logit_dir = _dot((1, -1 / M), (p_same - p_other - 1, p_other)) * mu_ov * c**2
    # E[G | y] = sum_D (alpha/m)(1 - alpha) logit_dir E[x_j] x_T^T = alpha(1-alpha) logit_dir S_y S_y^T / b^2;
    # common positions give E[nu] x_T^T = 0 (Assumption 2). Average over the M classes:
    qk_coef = alpha * (1 - alpha) * logit_dir / (M * b**2)
    score = c**2 * (b * c**2 / b)  # <s, S_y> <S_y, x_T> with x_T = S_y / b
    norm_ov = M * (b * c**2) * (1 - 1 / M)  # |D_OV|_F^2 = sum_k |S_k - (1/M) sum S|^2
    norm_qk = M * (b * c**2) ** 2  # |sum_y S_y S_y^T|_F^2
    chain_ov = -sp.diff(loss, mu_ov) / norm_ov  # = -dL/dmu / |D|^2 when the gradient is parallel to D
    return [
        check(
            "softmax on the ansatz, p_y (eq. 9)",
            p_same.subs(at1),
            sp.exp(alpha * mu_ov) / (sp.exp(alpha * mu_ov) + M - 1),
        ),
        check("population loss on the ansatz", loss.subs(at1), sp.log(1 + (M - 1) * sp.exp(-alpha * mu_ov))),
        check("OV gradient stays on the ansatz: coefficient ratio sum S : S_k", g_sum / g_k, -1 / M),
        check("d mu_OV/dt (eq. 12-13)", (eta_ov * ov_rate).subs(at1), d_ov),
        check("d mu_OV/dt by the chain rule, -dL/dmu_OV / |D_OV|^2", (eta_ov * chain_ov).subs(at1), d_ov),
        check("(e_y - 1/M)^T (p - e_y) = p_y - 1 (eq. 15)", logit_dir / (mu_ov * c**2), p_same - 1),
        check("d mu_QK/dt (eqs. 21-23)", (-eta_qk * qk_coef).subs(at1), d_qk),
        check(
            "d mu_QK/dt by the chain rule, -dL/dmu_QK / |D_QK|^2 with dalpha/dmu_QK = alpha(1-alpha)",
            (-eta_qk * sp.diff(loss, alpha) * alpha * (1 - alpha) / norm_qk).subs(at1),
            d_qk,
        ),
        check("class-token score x_j^T W_QK x_T / mu_QK", score.subs(at1), sp.Integer(1)),
        check("alpha'(mu_QK) = alpha(1 - alpha)", sp.diff(alpha_of_mu, mu_qk), alpha_of_mu * (1 - alpha_of_mu)),
        check(
            "|D_OV|^2 = b (M - 1) and |D_QK|^2 = M b^2 (unit tokens)",
            (norm_ov + norm_qk).subs(at1),
            b * (M - 1) + M * b**2,
        ),
    ]


def general_norm_rates() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """What the derivation gives for tokens of norm c: (d mu_OV/dt, d mu_QK/dt, class-token score / mu_QK)."""
    p_same, p_other = softmax_on_ansatz()
    logit_dir = _dot((1, -1 / M), (p_same - p_other - 1, p_other)) * mu_ov * c**2
    return (
        sp.simplify(eta_ov * alpha * p_other / b),
        sp.simplify(-eta_qk * alpha * (1 - alpha) * logit_dir / (M * b**2)),
        c**4,
    )


def lemma3_checks() -> list[Check]:
    """Appendix C: the ratio (29), the sandwich, the comparison solutions and the integrations."""
    d_ov, d_qk, _ = theorem1_rates()
    upper_ov = sp.log(1 + eta_ov * a0 * t / b) / a0
    lower_ov = sp.log(1 + eta_ov * a0 * t / (M * b))
    y = sp.symbols("y", nonnegative=True)  # e^x = 1 + y, y >= 0 for x >= 0
    gap_low = sp.factor(sp.together(1 / (sp.exp(x) + M - 1) - sp.exp(-x) / M).subs(sp.exp(x), 1 + y))
    gap_high = sp.factor(sp.together(sp.exp(-x) - 1 / (sp.exp(x) + M - 1)).subs(sp.exp(x), 1 + y))
    mu = sp.symbols("u", positive=True)
    k = eta_qk / eta_ov * (M - 1) / (M * b)
    return [
        check("d mu_QK / d mu_OV (eq. 29)", d_qk / d_ov, eta_qk / eta_ov * (M - 1) / (M * b) * (1 - alpha) * mu_ov),
        Check(
            "1/(e^x + M - 1) - e^-x / M >= 0 for x >= 0, M > 1 (e^x = 1 + y)",
            gap_low,
            sp.Integer(0),
            bool(sp.numer(gap_low).subs(M, M + 1).expand().is_nonnegative),
        ),
        Check(
            "e^-x - 1/(e^x + M - 1) >= 0 for x >= 0, M > 1",
            gap_high,
            sp.Integer(0),
            bool(sp.simplify(gap_high.subs(M, M + 1)).is_nonnegative),
        ),
        check(
            "upper mu_OV bound solves U' = (eta_OV/b) e^{-alpha_0 U}, U(0) = 0",
            sp.diff(upper_ov, t),
            eta_ov / b * sp.exp(-a0 * upper_ov),
        ),
        check(
            "lower mu_OV bound solves L' = eta_OV alpha_0/(M b) e^{-L}, L(0) = 0",
            sp.diff(lower_ov, t),
            eta_ov * a0 / (M * b) * sp.exp(-lower_ov),
        ),
        check(
            "integrating (29) with 1 - alpha <= 1 - alpha_0",
            k * (1 - a0) * sp.integrate(mu, (mu, 0, mu_ov)),
            eta_qk / eta_ov * (M - 1) * (1 - a0) / (2 * M * b) * mu_ov**2,
        ),
        check(
            "mu_QK upper bound (26) = that integral at the mu_OV upper bound",
            k * (1 - a0) / 2 * upper_ov**2,
            eta_qk / eta_ov * (M - 1) * (1 - a0) / (2 * M * b * a0**2) * sp.log(1 + eta_ov * a0 * t / b) ** 2,
        ),
        check(
            "mu_QK lower bound (28) = the delta integral at the mu_OV lower bound",
            k * delta / 2 * lower_ov**2,
            eta_qk / eta_ov * (M - 1) * delta / (2 * M * b) * sp.log(1 + eta_ov * a0 * t / (M * b)) ** 2,
        ),
    ]
