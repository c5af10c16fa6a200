"""The errata of Section 6 and Appendices B-D: each printed formula that is wrong or incomplete, its corrected form,
and the numbers that show it (from the checks in ``factorised`` and ``instance``)."""
from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from .instance import CASE_LABELS


def _e(x: float) -> str:
    return f"{x:.1e}"


def errata_table(props: Mapping[str, float], precond: Mapping[str, float], conservation: Mapping[str, float],
                 cases: pd.DataFrame) -> pd.DataFrame:
    """One row per erratum: where, as printed, corrected, evidence (relative max errors against autograd, or the
    theorem's error on an exact instance; about 1e-15 means exact in float64)."""
    case = cases.set_index("case").rename(index={name: case_id for case_id, name in CASE_LABELS.items()})

    def worst(case_id: str) -> float:
        return float(case.loc[case_id, ["ov_error", "qk_error", "ov_closure", "qk_closure"]].max())

    ok = worst("all")
    rows = [
        ("Eqs. (33)-(35), (48)-(50)", "dW/dt = +dL/dW, e.g. dW_OV/dt = (y~ - y) x~^T",
         "gradient flow descends: dW/dt = -dL/dW, e.g. dW_OV/dt = (y - y~) x~^T (as eq. (43) already writes)",
         f"printed velocity vs -dL/dW_OV: {_e(props['eq33_printed'])}"
         " (2 = opposite sign)"),
        ("Eq. (45)", "dL/dW_QK = x_T (y~ - y)^T W_O W_V X^T Z X =: G",
         "dL/dW_QK = X^T Z X W_OV^T (y~ - y) x_T^T = G^T, for scores s = X W_QK x_T",
         f"printed G vs autograd {_e(props['eq45_printed'])}; "
         f"G^T vs autograd {_e(props['eq45_transposed'])}"),
        ("Eqs. (46)-(47), (56)", "dL/dW_Q = G^T W_K, dL/dW_K = G W_Q with G of (45)",
         "true with G := dL/dW_QK (the transpose of the printed G)",
         f"with printed G: {_e(props['eq46_printed_G'])}, "
         f"{_e(props['eq47_printed_G'])}, eq. (56) "
         f"{_e(precond['lemma5_eq56_printed_G'])}; with G = dL/dW_QK: "
         f"{_e(props['eq46_true_G'])}, "
         f"{_e(props['eq47_true_G'])}, {_e(precond['lemma5_balanced'])}"),
        ("Eq. (52)", "d/dt(W_K^T W_K) = W_K^T (dW_K/dt) + (dW_Q/dt)^T W_Q",
         "d/dt(W_K^T W_K) = W_K^T (dW_K/dt) + (dW_K/dt)^T W_K (a typo; eq. (54) and Lemma 4 are right)",
         f"W_Q^T W_Q - W_K^T W_K drifts by {_e(conservation['flow'])} (relative) along gradient flow"),
        ("Lemmas 2 and 5", "Omega(a C) = a Omega(C)", "Omega(a C) = |a| Omega(C) (the square roots are >= 0)",
         f"a = -2: printed {_e(precond['omega_neg2C_printed'])}, "
         f"corrected {_e(precond['omega_neg2C_abs'])}"),
        ("Lemmas 2 and 5", "vec unspecified", "vec must stack columns for the printed Omega; with row-stacking vec "
         "the Kronecker factors swap: I (x) (C^T C)^{1/2} + (C C^T)^{1/2} (x) I",
         f"column vec {_e(precond['lemma2_balanced'])}; row vec {_e(precond['lemma2_row_vec'])}"),
        ("Eq. (38)", "Omega(W_OV) with W_OV 'the collapsed parameter'",
         "Omega is evaluated at the current product W~_OV = W_O W_V and multiplies -grad L1(W~_OV); it needs exact "
         "balancedness", f"balanced {_e(precond['lemma2_balanced'])}; factors rescaled by 2 and 1/2 "
         f"{_e(precond['lemma2_unbalanced'])}"),
        ("Assumption 1", "for each tau, s_1^tau, ..., s_M^tau are mutually orthogonal",
         "all bM class tokens s_y^tau are mutually orthogonal (the proof's eq. (7) uses this)",
         f"Theorem 1 error on an exact instance: printed assumption {_e(worst('literal'))}; "
         f"strong form {_e(ok)}"),
        ("Theorem 1 (unstated)", "token norms not given", "class tokens have unit norm: eq. (7) needs <s, s> = 1",
         f"norm 1.2: error {_e(worst('norm'))}"),
        ("Theorem 1 (unstated)", "the query x_T is never specified",
         "x_T = (1/b) sum_tau s_y^tau (the class mean, as eq. (16) uses) or a class token drawn uniformly, and the "
         "query does not attend to itself. A self-attending class-mean query: alpha = (m+1)e^mu/((m+1)e^mu + n). A "
         "fixed query orthogonal to all tokens: the QK direction is (sum_y S_y) x_T^T and 1/b^2 becomes 1/b",
         f"class mean {_e(ok)}, class token {_e(worst('class_token'))}; "
         f"self-attending class mean {_e(worst('mean_self'))} as printed, "
         f"{_e(case.loc['mean_self', 'modified error'])} with m+1; fixed query "
         f"{_e(case.loc['fixed', 'modified error'])} with 1/b; a "
         f"self-attending class-token query leaves the ansatz "
         f"({_e(case.loc['token_self', 'qk_closure'])})"),
        ("Theorem 1 (unstated)", "the class prior is not given", "classes are equally likely (the proof averages "
         "(1/M) sum_y)", f"prior (0.5, 0.3, 0.2): error {_e(worst('prior'))}"),
    ]
    return pd.DataFrame(rows, columns=["where", "as printed", "corrected", "evidence"])
