"""Theorem 1's checks (Section 6.1, Appendix B) on hand-made tables: each holds or fails at its tolerance
(``EXACT`` for the exact instances and Assumption 1, ``ODE_MATCH`` for the full-matrix flow), reading only the
rows it names."""

import pandas as pd

from qkov_lib.chapters import theorem1
from qkov_lib.metrics.verdicts import EXACT, ODE_MATCH

ERRS = ["ov_closure", "qk_closure", "ov_error", "qk_error"]


def tables(
    proved=(True, True, True),
    worst: float = 1e-14,
    literal: float = 1e-15,
    gap: float = 1e-8,
    off: float = 1e-9,
) -> tuple[pd.DataFrame, ...]:
    """Sympy's identities, two instance sizes (one error ``worst``), the cases (Assumption 1 as printed with error
    ``literal``, a broken case far off), and two flows (the one meeting every assumption with ``gap``, ``off``)."""
    symbolic = pd.DataFrame({"identity": [f"eq{i}" for i in range(len(proved))], "holds": list(proved)})
    sizes = pd.DataFrame([{e: 1e-16 for e in ERRS}, {**{e: 1e-16 for e in ERRS}, "qk_error": worst}])
    cases = pd.DataFrame(
        [
            {"case": "as printed", "tests": "Assumption 1", **{e: 0.0 for e in ERRS}, "ov_error": literal},
            {"case": "classes unequal", "tests": "Assumption 3", **{e: 0.5 for e in ERRS}},
        ]
    )
    flows = pd.DataFrame(
        [
            {"instance": "all assumptions", "mu_gap": gap, "off_ansatz": off},
            {"instance": "no orthogonality", "mu_gap": 1.0, "off_ansatz": 1.0},  # not the one the claim reads
        ]
    )
    return symbolic, sizes, cases, flows


def verdicts(**kw) -> pd.Series:
    return theorem1.claims(*tables(**kw)).set_index("id")["verdict"]


def test_every_check_holds_within_its_tolerance_and_reports_its_numbers():
    table = theorem1.claims(*tables()).set_index("id")
    assert (table["verdict"] == "holds").all() and len(table) == 4
    assert table.loc["symbolic_reduction", "this run"].startswith("3 of 3 identities")
    assert table.loc["exact_instances", "estimate"] == 1e-14  # the largest error over both sizes and four measures
    assert "2 instance sizes" in table.loc["exact_instances", "this run"]
    assert table.loc["assumptions_as_printed", "estimate"] == 1e-15


def test_each_check_fails_past_its_tolerance():
    assert verdicts(proved=(True, False, True))["symbolic_reduction"] == "fails"
    assert verdicts(worst=EXACT)["exact_instances"] == "fails"  # below EXACT holds; EXACT itself does not
    assert verdicts(worst=0.9 * EXACT)["exact_instances"] == "holds"
    printed = theorem1.claims(*tables(literal=0.25)).set_index("id").loc["assumptions_as_printed"]
    assert printed["verdict"] == "fails" and printed["estimate"] == 0.25 and "error is 0.25" in printed["this run"]
    assert verdicts(gap=2 * ODE_MATCH)["full_matrix_flow"] == "fails"
    assert verdicts(off=2 * ODE_MATCH)["full_matrix_flow"] == "fails"
