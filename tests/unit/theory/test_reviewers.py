"""The reviewers' tests: factorised against collapsed trajectories, the falsifier, the corollaries, AdamW."""

import numpy as np
import pandas as pd
import pytest
import torch

from qkov_lib.chapters import corollaries, factorised_dynamics
from qkov_lib.core.chapter import ParameterError
from qkov_lib.metrics import mean_ci, paired_effects
from qkov_lib.runner.catalog import resolve
from qkov_lib.runs.synthetic_runs import SyntheticSetup
from qkov_lib.theory import OrthogonalSetting, rhs
from qkov_lib.theory.factorised import collapse, imbalance
from qkov_lib.theory.instance import InstanceConfig, OrthogonalInstance
from qkov_lib.theory.trajectories import compare_models, falsifier, ode_errors, starting_point


def test_rescaled_ode_multiplies_each_rate_by_the_scale():
    s = OrthogonalSetting(b=50)
    f = OrthogonalSetting(b=50, factorised=True)
    (co, cq), (fo, fq) = rhs(1.5, 0.4, s), rhs(1.5, 0.4, f)
    assert fo == pytest.approx(2 * np.sqrt(50) * 1.5 * co) and fq == pytest.approx(2 * 50 * 0.4 * cq)


def test_starting_point_has_equal_products_and_balanced_factors():
    inst = OrthogonalInstance(InstanceConfig())
    for start in ("ansatz", "random"):
        collapsed, factors, mu_ov, mu_qk = starting_point(inst, start, 0.05, 1)
        w_ov, w_qk = collapse(factors)
        torch.testing.assert_close(w_ov, collapsed["W_OV"])
        torch.testing.assert_close(w_qk, collapsed["W_QK"])
        assert max(imbalance(factors)) < 1e-12
    assert (mu_ov, mu_qk) != (0.05, 0.05)  # random products are off the ansatz
    with pytest.raises(ValueError, match="start must be"):
        starting_point(inst, "zero", 0.05, 0)
    with pytest.raises(ValueError, match="never move"):
        starting_point(inst, "ansatz", 0.0, 0)


def test_factorised_model_follows_the_rescaled_ode_from_the_ansatz():
    curves = compare_models(OrthogonalInstance(InstanceConfig()), 10.0, 300.0, "ansatz", 0.05, 0, n_out=10)
    err = ode_errors(curves).set_index(["model", "ODE"])
    assert err.loc[("factorised", "rescaled ODE"), "mu_OV error"] < 1e-6
    assert err.loc[("collapsed", "collapsed ODE"), "mu_QK error"] < 1e-6
    assert err.loc[("factorised", "collapsed ODE"), "mu_OV error"] > 0.05


def test_falsifier_and_its_claims():
    base = OrthogonalSetting(mu0_ov=0.01, mu0_qk=0.01)
    matched, after = falsifier(base, [0.01, 100.0], [1e-1, 1e-3], [1.0, 100.0])
    assert set(matched["model"]) == {"collapsed (Theorem 1)", "factorised (rescaled ODE)"}
    fac = matched[matched["model"].str.startswith("factorised")]
    assert (fac["effective ratio"] != fac["ratio"]).all()
    errors = pd.DataFrame(
        [
            {
                "start": "ansatz",
                "ratio": 1.0,
                "model": m,
                "ODE": o,
                "mu_OV error": e,
                "mu_QK error": e,
                "alpha error": e,
                "max off-ansatz": 0.0,
            }
            for m, o, e in (
                ("collapsed", "collapsed ODE", 1e-9),
                ("factorised", "rescaled ODE", 1e-9),
                ("factorised", "collapsed ODE", 0.5),
                ("collapsed", "rescaled ODE", 0.5),
            )
        ]
    )
    table = factorised_dynamics.claims(errors, matched, after, base.alpha0)
    assert (table["verdict"] == "holds").all() and (table["kind"] == "review").all()
    worse = errors.assign(**{"mu_OV error": 0.5, "mu_QK error": 0.5})
    assert factorised_dynamics.claims(worse, matched, after, base.alpha0)["verdict"].iloc[0] == "fails"


def test_effective_ratio_summary():
    setup = SyntheticSetup(lr=0.1, ramp_steps=1, max_steps=1)
    runs = [setup.panel("a", "FAFO"), setup.panel("b", "FAFO", qk_mult=10.0)]
    rows = [
        {"panel": p, "seed": m, "step": s, "effective_ratio": r * (1 + m)}
        for p, r in (("a", 1.0), ("b", 5.0))
        for m in range(3)
        for s in range(4)
    ]
    table = corollaries.effective_ratios(pd.DataFrame(rows), runs).set_index("panel")
    assert (
        table.loc["a", "effective, whole run"] == pytest.approx(2.0) and table.loc["a", "records, fewest a seed"] == 4
    )
    assert table.loc["b", "nominal ratio"] == 10.0 and table.loc["b", "effective, whole run"] == pytest.approx(10.0)


def test_corollary_runs_scale_the_cap_of_the_slow_ov_run():
    _, setup = resolve("corollaries", "smoke", {})
    runs = {panel.key: panel for panel in corollaries.runs(setup)}
    assert runs["OV lr"].max_steps == round(setup.max_steps / setup.ov_mult)
    assert runs["OV lr"].label.endswith("OV lr x0.1") and runs["OV decay"].ov_decay == setup.ov_decay
    assert {panel.optimizer for panel in runs.values()} == {"sgd", "adamw"}
    assert runs["AdamW 0.001"].max_steps == setup.adam_max_steps and runs["AdamW 0.001"].rates.lr == 0.001


def test_runs_whose_attention_stays_uniform_are_named():
    summary = pd.DataFrame(
        {"panel": ["a", "a", "b", "b"], "query_attention %": [100 / 50 * 1.005, 100 / 50, 100 / 50, 1.0]}
    )
    words = corollaries.uniform_words(summary, 50, {"a": "the baseline", "b": "OV x0.1"})
    assert words.startswith("In the baseline, every seed") and "OV x0.1" not in words and "(2%)" in words
    assert corollaries.uniform_words(summary.assign(**{"query_attention %": 1.0}), 50, {}) == ""


def test_official_corollaries_run_on_figure_2s_official_task_under_one_cap():
    _, fig2 = resolve("fig2_dtap", "official", {})
    _, setup = resolve("corollaries", "official", {})
    shared = ("layout", "distinct_weights", "vocab_size", "seq_len", "score_scale", "fresh_batches", "class_draw")
    assert all(getattr(setup, name) == getattr(fig2, name) for name in (*shared, "collapsed_init", "max_steps"))
    assert setup.qk_mult == fig2.mult_e == 20.0 and setup.eval_every == fig2.eval_every
    caps = {panel.key: panel.max_steps for panel in corollaries.runs(setup) if panel.optimizer == "sgd"}
    assert set(caps.values()) == {1_000_000} and len(caps) == 5
    assert 1_000_000 // setup.record_every <= 2000  # rows of the effective ratio a run keeps at most


def test_mean_ci_and_paired_effects():
    mean, half = mean_ci([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.302653 / np.sqrt(3), rel=1e-5)
    assert np.isnan(mean_ci([4.0])[1])
    with pytest.raises(ValueError):
        mean_ci([])
    summary = pd.DataFrame(
        {"panel": ["base"] * 3 + ["x"] * 3, "seed": [0, 1, 2] * 2, "MRTA": [10.0, 20.0, 30.0, 12.0, 23.0, 34.0]}
    )
    e = paired_effects(summary, "base", ["MRTA"]).iloc[0]
    assert e["effect"] == pytest.approx(3.0) and e["ci_low"] < 3.0 < e["ci_high"] and e["seeds"] == 3


def test_corollary_claims_follow_the_confidence_interval():
    effects = pd.DataFrame(
        [
            {
                "panel": "x",
                "metric": m,
                "baseline": 10.0,
                "with change": 20.0,
                "effect": 10.0,
                "ci_low": lo,
                "ci_high": 15.0,
                "seeds": 5,
            }
            for m, lo in (("MRTA", 5.0), ("ACMC", 1.0))
        ]
    )
    setup = SyntheticSetup(lr=0.01, ramp_steps=1, max_steps=1)
    runs = [setup.panel("a", "FAFO", optimizer="adamw"), setup.panel("b", "FAFO", 10.0, optimizer="adamw")]

    def updates(a: float, b: float, records: int = corollaries.MIN_RECORDS) -> pd.DataFrame:
        """Each seed's effective ratio, the same at each of its ``records`` steps."""
        return pd.DataFrame(
            [
                {"panel": p, "seed": s, "step": t, "effective_ratio": r * (1 + 0.01 * s)}
                for p, r in (("a", a), ("b", b))
                for s in range(4)
                for t in range(records)
            ]
        )

    table = corollaries.claims(effects, updates(2.0, 1.0), runs, {"x": "(x) FAFO, OV decay"})
    assert table["verdict"].tolist() == ["holds", "holds"]  # MRTA rises; the realised multiplier is 0.5, not 10
    again = corollaries.claims(effects.assign(ci_low=-1.0), updates(1.0, 10.0), runs, {})
    assert again["verdict"].tolist() == ["undecided", "fails"]  # MRTA's interval straddles 0; 10 is realised
    short = corollaries.claims(effects, updates(2.0, 1.0, records=1), runs, {}).iloc[-1]
    assert short["verdict"] == "undecided" and short["this run"].endswith("only 1 record in a seed's run")


@pytest.mark.parametrize(
    "chapter, override, words",
    [
        ("corollaries", {"ov_mult": 2.0}, "ov_mult"),
        ("corollaries", {"adam_lrs": [-1.0]}, "adam_lrs"),
        ("corollaries", {"record_every": 0}, "every"),
        ("factorised_dynamics", {"starts": ["zero"]}, "starts"),
        ("factorised_dynamics", {"losses": [5.0]}, "losses"),
    ],
)
def test_reviewer_parameters_are_validated(chapter, override, words):
    with pytest.raises(ParameterError, match=words):
        resolve(chapter, "default", override)
