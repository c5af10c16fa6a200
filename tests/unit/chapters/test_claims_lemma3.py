"""Lemma 3's checks (Appendix C) on hand-made tables: the proof's steps hold when sympy proves every identity, and
each pair of bounds holds when every ratio's value/bound stays within the solver's tolerance of the bound."""

import pandas as pd

from qkov_lib.chapters import lemma3
from qkov_lib.metrics.verdicts import SOLVER_SLACK

BOUNDS = ["min mu_OV / lower", "max mu_OV / upper", "min mu_QK / lower", "max mu_QK / upper"]


def tightness(changed: dict[str, float]) -> pd.DataFrame:
    """Two ratios whose values sit inside every bound (value/lower 1.2-1.5, value/upper 0.6-0.9); ``changed``:
    column -> its value at the second ratio."""
    rows = [dict(zip(BOUNDS, (1.5, 0.6, 1.4, 0.7))), {**dict(zip(BOUNDS, (1.2, 0.9, 1.3, 0.8))), **changed}]
    return pd.DataFrame(rows).assign(ratio=[0.01, 100.0])


def claims(symbolic=(True, True), **changed: float) -> pd.DataFrame:
    """Lemma 3's claims; ``changed``: 'min_OV_lower' -> the column 'min mu_OV / lower', and so on."""
    columns = {f"{k.split()[0]}_{k.split()[1][3:]}_{k.split()[3]}": k for k in BOUNDS}
    table = tightness({columns[k]: v for k, v in changed.items()})
    return lemma3.claims(pd.DataFrame({"holds": list(symbolic)}), table).set_index("id")


def test_every_check_holds_inside_the_bounds_and_reports_the_tightest_ratios():
    table = claims()
    assert (table["verdict"] == "holds").all() and list(table.index) == ["proof_steps", "mu_ov_bounds", "mu_qk_bounds"]
    assert (
        "smallest value/lower bound 1.200000, largest value/upper bound 0.9000" in table.loc["mu_ov_bounds", "this run"]
    )
    assert "smallest value/lower bound 1.300000" in table.loc["mu_qk_bounds", "this run"]


def test_a_bound_crossed_by_more_than_the_solvers_tolerance_fails_and_within_it_holds():
    assert claims(symbolic=(True, False)).loc["proof_steps", "verdict"] == "fails"
    assert claims(min_OV_lower=1 - 10 * SOLVER_SLACK).loc["mu_ov_bounds", "verdict"] == "fails"
    assert claims(max_OV_upper=1 + 10 * SOLVER_SLACK).loc["mu_ov_bounds", "verdict"] == "fails"
    crossed = claims(min_QK_lower=0.5)
    assert crossed.loc["mu_qk_bounds", "verdict"] == "fails" and crossed.loc["mu_ov_bounds", "verdict"] == "holds"
    assert claims(max_QK_upper=1.1).loc["mu_qk_bounds", "verdict"] == "fails"
    within = claims(min_OV_lower=1 - SOLVER_SLACK / 2, max_QK_upper=1 + SOLVER_SLACK / 2)
    assert (within["verdict"] == "holds").all()  # on the bound, to the solver's tolerance
