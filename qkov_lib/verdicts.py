"""A claim checked against a run: the claim table every chapter writes, and the numeric tolerances of the checks that
compare a computation with an exact identity or a solver."""
from __future__ import annotations

import pandas as pd

EXACT = 1e-10  # a relative error below this is float64 rounding: the identity holds exactly
SOLVER_SLACK = 1e-9  # a bound is met when value/bound is within the ODE solver's relative tolerance of 1
CONSERVED = 1e-8  # a quantity is conserved by gradient flow when its relative drift stays below this (RK45, 1e-10)
ODE_MATCH = 1e-6  # full-matrix gradient flow and the scalar ODE agree to the solvers' tolerance


def claim_table(rows: list[tuple[str, str, str, bool]]) -> pd.DataFrame:
    """A claim table: a short stable id (what other chapters and the atlas key on), the claim as the book words it,
    what this run measured, and whether the claim is reproduced."""
    return pd.DataFrame(rows, columns=["id", "claim", "this run", "reproduced"])
