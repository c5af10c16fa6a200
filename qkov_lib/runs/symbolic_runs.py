"""Theorem 1's symbolic reduction as stored runs (``theory_runs.one_run``): sympy's proofs of the identities and the
rates for tokens of norm c, each expression kept as its ``srepr`` and read back by sympy (the same tree, so the same
LaTeX). Apart from ``theory_runs``, so that only the chapter that reads them imports ``theory.symbolic``."""

from __future__ import annotations

import pandas as pd
import sympy as sp

from ..theory import symbolic
from .theory_runs import one_run


def symbolic_checks() -> list[symbolic.Check]:
    """``symbolic.theorem1_checks``: each identity, the derived and the printed expression, and whether sympy proves
    them equal (Theorem 1's reduction, Appendix B)."""
    table = one_run("symbolic", {}, symbolic.theorem1_checks, (), _checks_table)
    return [
        symbolic.Check(r.identity, sp.sympify(r.derived), sp.sympify(r.paper), bool(r.holds))
        for r in table.itertuples()
    ]


def norm_rates() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """``symbolic.general_norm_rates``: what the derivation gives for tokens of norm c."""
    table = one_run(
        "norm-rates",
        {},
        symbolic.general_norm_rates,
        (),
        lambda rates: pd.DataFrame({"srepr": [sp.srepr(e) for e in rates]}),
    )
    d_ov, d_qk, score = (sp.sympify(text) for text in table["srepr"])
    return d_ov, d_qk, score


def _checks_table(checks: list[symbolic.Check]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"identity": c.name, "derived": sp.srepr(c.derived), "paper": sp.srepr(c.paper), "holds": c.holds}
            for c in checks
        ]
    )
