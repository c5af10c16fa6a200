"""The symbolic and exact checks of Theorem 1, Lemma 3 and Appendix D, and the errata they support."""

import numpy as np
import pytest
import sympy as sp
import torch

from qkov_lib.chapters import appendix_d
from qkov_lib.core.chapter import ParameterError
from qkov_lib.present.text import scientific
from qkov_lib.runner.catalog import resolve
from qkov_lib.theory import OrthogonalSetting, integrate_many, lemma3_tightness, log2_regime_end, symbolic
from qkov_lib.chapters.errata import errata_table
from qkov_lib.theory.factorised import (
    balanced_pair,
    conservation_checks,
    omega,
    preconditioning_checks,
    proposition_checks,
    vec,
)
from qkov_lib.theory.instance import (
    CHECK_POINTS,
    InstanceConfig,
    OrthogonalInstance,
    assumption_cases,
    compare_with_theorem,
    flow_vs_theorem,
    size_checks,
    worst_case,
)

EXACT = 1e-10


def test_every_theorem1_identity_is_proved():
    checks = symbolic.theorem1_checks()
    assert len(checks) >= 10 and all(c.holds for c in checks), [c.name for c in checks if not c.holds]


def test_a_wrong_constant_is_caught():
    _, d_qk, _ = symbolic.theorem1_rates()
    assert not symbolic.check("1/b in place of 1/b^2", d_qk, d_qk * symbolic.b).holds
    assert not symbolic.check("sign", d_qk, -d_qk).holds


def test_token_norm_enters_the_rates():
    d_ov, _, score = symbolic.general_norm_rates()
    assert score == symbolic.c**4 and symbolic.c in d_ov.free_symbols
    assert sp.simplify(d_ov.subs(symbolic.c, 1) - symbolic.theorem1_rates()[0]) == 0


def test_every_lemma3_step_is_proved():
    assert all(c.holds for c in symbolic.lemma3_checks())


def test_theorem1_is_exact_on_instances_of_several_sizes():
    table = size_checks([[3, 2, 2, 2, 1], [2, 3, 2, 1, 2]])
    assert table[["ov_closure", "qk_closure", "ov_error", "qk_error", "alpha_gap"]].to_numpy().max() < EXACT


def test_the_gradient_matches_the_theorem_entry_by_entry():
    inst = OrthogonalInstance(InstanceConfig())
    w_ov, w_qk = inst.ansatz(1.3, 0.7)
    g_ov, g_qk = inst.gradients(w_ov, w_qk)
    d_ov, d_qk = inst.directions()
    s = OrthogonalSetting(m=2, n=2, b=2, M=3)
    a = s.m * np.exp(0.7) / (s.m * np.exp(0.7) + s.n)
    rate_ov = a / (2 * (np.exp(a * 1.3) + 2))  # alpha / (b (e^{alpha mu} + M - 1)) written out
    rate_qk = 2 * a * (1 - a) * 1.3 / (3 * 4 * (np.exp(a * 1.3) + 2))
    torch.testing.assert_close(-g_ov, rate_ov * d_ov, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(-g_qk, rate_qk * d_qk, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    "changes",
    [
        {"assumption": "literal"},
        {"token_norm": 1.2},
        {"background": "shifted"},
        {"overlap": 0.3},
        {"class_probs": (0.5, 0.3, 0.2)},
        {"query": "class_token", "self_attend": True},
    ],
)
def test_breaking_an_assumption_breaks_the_theorem(changes):
    w = worst_case(OrthogonalInstance(InstanceConfig(**changes)), CHECK_POINTS)
    assert max(w["ov_error"], w["qk_error"]) > 0.1


def test_query_variants_hold_in_their_modified_form():
    self_mean = OrthogonalInstance(InstanceConfig(self_attend=True))
    assert worst_case(self_mean, CHECK_POINTS)["qk_error"] > 0.1
    assert max(worst_case(self_mean, CHECK_POINTS, extra_positions=1).values()) < EXACT
    fixed = OrthogonalInstance(InstanceConfig(query="fixed"))
    assert worst_case(fixed, CHECK_POINTS)["qk_error"] > 0.1
    assert max(worst_case(fixed, CHECK_POINTS, qk_power=1).values()) < EXACT
    token = OrthogonalInstance(InstanceConfig(query="class_token"))
    assert max(worst_case(token, CHECK_POINTS).values()) < EXACT


def test_assumption_table_names_each_case_once():
    cases = assumption_cases()
    assert cases["case"].is_unique and len(cases) >= 10
    ok = cases.iloc[0][["ov_closure", "qk_closure", "ov_error", "qk_error"]].max()
    assert ok < EXACT


def test_full_matrix_flow_follows_the_ode_and_literal_assumption_does_not():
    good = flow_vs_theorem(OrthogonalInstance(InstanceConfig()), 10.0, 300.0, n_out=12)
    assert good["mu_gap"].max() < 1e-6 and good["off_ansatz"].max() < 1e-9
    assert good["mu_ov"].iloc[-1] > 1 and good["alpha"].iloc[-1] > good["alpha"].iloc[1]
    bad = flow_vs_theorem(OrthogonalInstance(InstanceConfig(assumption="literal")), 10.0, 300.0, n_out=12)
    assert bad["mu_gap"].max() > 0.1


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"query": "middle"}, "unknown query"),
        ({"b": 5, "m": 5, "n": 5}, "max_sequences"),
        ({"class_probs": (0.5, 0.5)}, "class_probs"),
        ({"M": 1}, "M must be"),
    ],
)
def test_bad_instance_config_is_one_clear_error(kwargs, words):
    with pytest.raises(ValueError, match=words):
        InstanceConfig(**kwargs)


def test_compare_reports_alpha_of_the_theorem():
    out = compare_with_theorem(OrthogonalInstance(InstanceConfig()), 1.0, 0.0)
    assert out["alpha_theorem"] == pytest.approx(0.5) and out["alpha_measured"] == pytest.approx(0.5)


def test_propositions_as_printed_and_corrected():
    p = proposition_checks()
    assert p["eq31"] < EXACT and p["eq32"] < EXACT
    assert p["eq45_transposed"] < EXACT < 0.1 < p["eq45_printed"]
    assert p["eq33_printed"] == pytest.approx(2.0)
    assert p["eq46_true_G"] < EXACT


def test_conservation_is_exact_for_flow_and_first_order_for_gd():
    c = conservation_checks(t_end=2.0, lrs=(0.1, 0.01))
    assert c["flow"] < 1e-8 and c["flow_moved"] > 0.05
    assert 5 < c["gd_0.1"] / c["gd_0.01"] < 20  # drift proportional to the step


def test_preconditioning_holds_only_when_balanced_and_with_column_vec():
    q = preconditioning_checks()
    assert q["lemma2_balanced"] < EXACT and q["lemma5_balanced"] < EXACT
    assert q["lemma2_unbalanced"] > 0.1 and q["lemma2_row_vec"] > 0.1
    assert q["omega_neg2C_abs"] < EXACT < q["omega_neg2C_printed"]


def test_every_check_has_a_label_and_every_case_an_id():
    from qkov_lib.chapters.appendix_d import check_table
    from qkov_lib.theory.factorised import label
    from qkov_lib.theory.instance import CASE_LABELS, CASES

    checks = proposition_checks() | preconditioning_checks() | conservation_checks(t_end=0.5, lrs=(0.1,))
    assert [label(k) for k in checks] and label("gd_0.1") == "gradient descent, step 0.1"
    assert list(check_table(checks).index) == [label(k) for k in checks]
    assert len(CASE_LABELS) == len(CASES) and CASE_LABELS["all"] == "all assumptions, query = class mean"


def test_balanced_pair_and_omega():
    gen = torch.Generator().manual_seed(3)
    c = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    a, b = balanced_pair(c, 5, gen)
    torch.testing.assert_close(a @ b, c)
    torch.testing.assert_close(a.T @ a, b @ b.T)
    x = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    left, right = a @ a.T, b.T @ b  # (C C^T)^{1/2}, (C^T C)^{1/2} under balance
    torch.testing.assert_close(omega(c) @ vec(x), vec(left @ x + x @ right))
    with pytest.raises(ValueError, match="inner dimension"):
        balanced_pair(c, 2, gen)


def test_lemma3_bounds_hold_for_very_long_times_and_log2_regime_ends_earlier_for_large_r():
    trajs = integrate_many(
        [OrthogonalSetting().with_ratio(r) for r in (1.0, 100.0)], target_loss=1e-20, t_max=1e40, n_out=600
    )
    t = lemma3_tightness(trajs)
    assert (t["min mu_OV / lower"] >= 1 - 1e-9).all() and (t["max mu_QK / upper"] <= 1 + 1e-9).all()
    assert (t["min mu_QK / lower"] >= 1 - 1e-9).all() and (t["max mu_OV / upper"] <= 1 + 1e-9).all()
    ends = log2_regime_end(trajs, [0.9]).set_index("ratio")["t"]
    assert ends[100.0] < ends[1.0]


def test_errata_table_carries_computed_evidence():
    table = errata_table(
        proposition_checks(), preconditioning_checks(), conservation_checks(t_end=1.0, lrs=(0.1,)), assumption_cases()
    )
    assert len(table) >= 10 and table["where"].str.contains("Eq. \\(45\\)").any()
    for _, row in table.iterrows():  # each row shows the computed error of the formula as printed
        assert scientific(row["printed error"]) in row["evidence"], row["where"]
    assert table["evidence"].str.contains(r"\d\.\d × 10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+").sum() >= len(table) - 1
    eq45 = table.set_index("where").loc["Eq. (45)"]
    assert scientific(proposition_checks()["eq45_printed"]) in eq45["evidence"]
    assert eq45["printed error"] == proposition_checks()["eq45_printed"]
    assert (table["verdict"] == "fails").all()  # every formula listed is wrong as printed
    assert not table[["as printed", "corrected", "evidence"]].stack().str.contains(r"\*\*|\^T\b|_OV\b").any()


def test_claim_tables_can_fail():
    good = appendix_d.claims(
        proposition_checks(), conservation_checks(t_end=1.0, lrs=(0.1,)), preconditioning_checks()
    )["verdict"]
    assert good.iloc[0] == "holds" and good.iloc[1] == "fails"  # Proposition 1 holds, eq. (45) as printed does not
    fake = {k: 0.0 for k in proposition_checks()}
    forged = appendix_d.claims(fake, {"flow": 1.0}, {"lemma2_balanced": 1.0, "lemma5_balanced": 1.0})
    assert forged["verdict"].tolist() == ["holds", "holds", "fails", "fails"]


def test_theorem1_parameters_are_validated():
    with pytest.raises(ParameterError, match="sizes"):
        resolve("theorem1", "default", {"sizes": [[3, 2, 2]]})
    with pytest.raises(ParameterError, match="max_sequences"):
        resolve("theorem1", "default", {"sizes": [[5, 6, 6, 6, 3]]})
    with pytest.raises(ParameterError, match="levels"):
        resolve("lemma3", "default", {"levels": [1.5]})
    with pytest.raises(ParameterError, match="M <= d"):
        resolve("appendix_d", "default", {"M": 9})
