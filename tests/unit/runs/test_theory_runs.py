"""The theory chapters' long solves as stored runs (``runs.theory_runs``): the same numbers as the theory's own
functions, to the bit; computed once in a chapter, then read from the store; their keys hold the theory module's
code."""

import pandas as pd
import pytest
import sympy as sp

from qkov_lib.core.chapter import Scope, scoped
from qkov_lib.runs import symbolic_runs, theory_runs
from qkov_lib.theory import factorised, instance, symbolic
from qkov_lib.theory.instance import InstanceConfig
from tests.unit.runs.test_store import roots  # noqa: F401 (the store of the test's own)

SMALL = {"d": 3, "M": 2, "t_end": 0.5, "lrs": (0.1,)}


def test_the_stored_solves_are_the_theorys_numbers_to_the_bit():
    assert theory_runs.conservation(1, **SMALL) == factorised.conservation_checks(1, **SMALL)
    config = InstanceConfig(M=3, b=2, m=2, n=2, q=1)
    pd.testing.assert_frame_equal(
        theory_runs.flows(config, (10.0,), 5.0), instance.flow_comparison(config, [10.0], 5.0), check_exact=True
    )


def test_sympys_proofs_read_back_as_the_same_expressions():
    """Each expression is stored as its ``srepr`` and read back by sympy: the same tree, so the same LaTeX."""
    stored, live = symbolic_runs.symbolic_checks(), symbolic.theorem1_checks()
    assert [(c.name, sp.srepr(c.derived), sp.srepr(c.paper), c.holds) for c in stored] == [
        (c.name, sp.srepr(c.derived), sp.srepr(c.paper), c.holds) for c in live
    ]
    assert [sp.srepr(e) for e in symbolic_runs.norm_rates()] == [sp.srepr(e) for e in symbolic.general_norm_rates()]


@pytest.mark.usefixtures("roots")
def test_a_chapter_computes_them_once_then_reads_them(tmp_path):
    used = []
    for _ in range(2):
        with scoped(Scope("appendix_d", "default")) as scope:
            got = theory_runs.conservation(1, **SMALL)
        used += [u["from_store"] for u in scope.used]
    assert used == [False, True] and got == factorised.conservation_checks(1, **SMALL)
    meta = (tmp_path / "store" / "default" / "appendix_d" / "conservation.json").read_text()
    assert '"qkov_lib.theory.factorised"' in meta and '"qkov_lib.theory.instance"' not in meta
