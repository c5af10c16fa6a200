"""The atlas's ablation from the paper's text to the authors' code (Section 4 against their notebooks): its factors
cover exactly the official profile's keys, its runs are the ones it claims (both directions, both end points), its
budget rescales what it says, and the factor x claim table and its reading are right on a hand-made verdicts table;
plus the page's labels and figures."""

from dataclasses import asdict

import pandas as pd
import pytest

from qkov_lib.chapters import fig2_dtap
from qkov_lib.chapters.atlas import ablation, claims, pages
from qkov_lib.chapters.atlas.grid import RUN
from qkov_lib.chapters.atlas.setup import FACTOR_KEYS, FACTORS, shared
from qkov_lib.runs import fig2_panels
from qkov_lib.core.chapter import ParameterError
from qkov_lib.present.tables import listed
from qkov_lib.runner.catalog import resolve

CLAIMS = ("collapsed_ov_top_right", "fafo_top_left", "faster_qk_top_right", "prediction_kept")


def test_the_factors_cover_exactly_the_official_profiles_keys():
    keys = [k for f in FACTORS for k in f.keys]
    assert len(keys) == len(set(keys)), "a key of the official profile is in two factors"
    assert set(keys) == set(fig2_dtap.PROFILES["official"]), (
        "every key of fig2_dtap's official profile must be in exactly one of atlas.setup.FACTORS"
    )
    assert len(FACTORS) == 9 and len(set(FACTOR_KEYS)) == 9


def test_an_official_key_no_factor_names_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(fig2_panels, "OFFICIAL", {**fig2_panels.OFFICIAL, "gamma": 0.5})
    with pytest.raises(ValueError, match=r"official profile sets \['gamma'\], which no factor .* atlas.setup.FACTORS"):
        ablation.factor_changes(["layout"])


def test_the_runs_are_both_directions_and_both_end_points():
    runs = ablation.runs()
    every = set(FACTOR_KEYS)
    assert [r.key for r in runs] == (
        ["paper"] + [f"paper+{f}" for f in FACTOR_KEYS] + ["authors"] + [f"authors-{f}" for f in FACTOR_KEYS]
    )
    by_key = {r.key: r for r in runs}
    assert by_key["paper"].on == () and set(by_key["authors"].on) == every
    for f in FACTOR_KEYS:
        assert by_key[f"paper+{f}"].on == (f,) and by_key[f"paper+{f}"].start == "paper"
        assert set(by_key[f"authors-{f}"].on) == every - {f} and by_key[f"authors-{f}"].start == "authors"
        assert by_key[f"paper+{f}"].factor == by_key[f"authors-{f}"].factor == f
    some = ablation.runs(["scaling", "fresh"])
    assert [r.key for r in some] == [
        "paper",
        "paper+scaling",
        "paper+fresh",
        "authors",
        "authors-scaling",
        "authors-fresh",
    ]
    assert set(some[3].on) == every  # the authors' end point keeps every factor, whichever are switched


def _setup(cell_key: str, speedup: int = 1, cap: int | None = None, profile: str = "paper"):
    setup = resolve("atlas", profile)[1]
    run = next(r for r in ablation.runs() if r.key == cell_key)
    cell = {RUN: run.key, "on": list(run.on), "speedup": speedup, "cap": cap}
    return ablation.run_setup(cell, shared(setup))


def test_the_end_points_are_the_papers_setup_and_the_authors_profile():
    assert _setup("paper") == fig2_dtap.Setup()
    assert _setup("authors") == resolve("fig2_dtap", "official")[1]
    one = asdict(_setup("paper+scaling"))
    assert {k for k, v in one.items() if v != asdict(fig2_dtap.Setup())[k]} == {"score_scale"}
    official = asdict(resolve("fig2_dtap", "official")[1])
    for factor, keys in {
        "budgets": {"panel_steps", "panel_stop", "max_steps", "eval_every"},
        "init": {"pytorch_init"},
        "multipliers": {"mult_e", "ramp_f"},
        "collapsed": {"collapsed_init"},
        "classes": {"class_draw"},
    }.items():
        off = asdict(_setup(f"authors-{factor}"))
        assert {k for k, v in off.items() if v != official[k]} == keys, factor


def test_the_budget_is_rescaled_by_the_speedup_and_capped():
    fast = _setup("authors", speedup=10)
    full = resolve("fig2_dtap", "official")[1]
    assert fast.lr == pytest.approx(10 * full.lr) and fast.ramp_steps == full.ramp_steps // 10
    assert fast.max_steps == full.max_steps // 10
    assert fast.panel_steps == {k: v // 10 for k, v in full.panel_steps.items()}
    assert fast.panel_stop == full.panel_stop and fast.eval_every == full.eval_every  # how often it checks: kept
    capped = _setup("paper", speedup=10, cap=5000)
    assert capped.max_steps == 5000 and capped.ramp_steps == 5000 and capped.lr == pytest.approx(0.1)
    default = resolve("atlas", "default")[1]
    budget = ablation.budget(default.ablation_speedup, default.ablation_cap, shared(default))
    assert budget["lr"] == pytest.approx(0.1) and budget["authors"]["caps"]["c"] == 100_000
    assert budget["authors"]["full caps"]["c"] == 1_000_000 and budget["paper"]["caps"]["a"] == 70_000


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"ablation_factors": ["layout", "colour"]}, "ablation_factors must be a non-empty list of distinct factors"),
        ({"ablation_factors": []}, "ablation_factors must be a non-empty list"),
        ({"ablation_factors": ["fresh", "fresh"]}, "distinct factors from layout, weights"),
        ({"ablation_speedup": 0}, "ablation_speedup must be an integer >= 1"),
        ({"ablation_cap": 0}, "ablation_cap must be None .* or an integer >= 1"),
    ],
)
def test_bad_ablation_parameters_are_one_error_naming_the_fix(overrides, message):
    with pytest.raises(ParameterError, match=message):
        resolve("atlas", "smoke", overrides)


def _hand_made(verdicts: dict[str, dict[str, str]]) -> pd.DataFrame:
    """An ablation verdicts table: run key -> claim id -> verdict, every other (run, claim) 'fails'."""
    rows = []
    for r in ablation.runs():
        for cid in CLAIMS:
            rows.append(
                {
                    RUN: r.key,
                    "start": r.start,
                    "factor": r.factor,
                    "claim_id": cid,
                    "claim": cid,
                    "this run": "",
                    "verdict": verdicts.get(r.key, {}).get(cid, "fails"),
                    "capped models": 0,
                    "models": 40,
                }
            )
    return pd.DataFrame(rows)


def test_the_flip_table_on_a_hand_made_verdicts_table():
    table = _hand_made(
        {
            "paper+scaling": {"faster_qk_top_right": "holds"},  # on from the paper's: fails -> holds
            "authors": {"faster_qk_top_right": "holds", "prediction_kept": "holds"},
            "authors-layout": {"faster_qk_top_right": "holds", "prediction_kept": "holds"},
            "authors-weights": {"faster_qk_top_right": "holds", "prediction_kept": "holds"},
            "authors-fresh": {"faster_qk_top_right": "holds", "prediction_kept": "undecided"},
            **{
                f"authors-{f}": {"faster_qk_top_right": "holds", "prediction_kept": "holds"}
                for f in ("classes", "collapsed", "init", "multipliers", "budgets")
            },
            # authors-scaling: both 'fails', so scaling off flips faster QK and prediction kept from holds to fails
        }
    )
    f = claims.flips(table).set_index(["factor", "claim_id"])
    assert len(f) == 9 * 4
    assert f.loc[("scaling", "faster_qk_top_right"), "from the paper's"] == "flips"
    assert f.loc[("scaling", "faster_qk_top_right"), "from the authors'"] == "flips"
    assert f.loc[("scaling", "prediction_kept"), ["from the paper's", "from the authors'"]].tolist() == [
        "no change",
        "flips",
    ]
    assert f.loc[("fresh", "prediction_kept"), "from the authors'"] == "unclear"  # holds -> undecided
    assert f.loc[("layout", "faster_qk_top_right"), ["from the paper's", "from the authors'"]].tolist() == [
        "no change",
        "no change",
    ]
    assert f.loc[
        ("weights", "prediction_kept"), ["paper", "paper + factor", "authors", "authors - factor"]
    ].tolist() == ["fails", "fails", "holds", "holds"]
    assert "switched on in the paper's settings (default, rate 0.1)" in pages.flip_table(table, "default, rate 0.1")
    shown = pages.flip_table(table)
    assert shown.loc[("score scaling", "faster QK top-right"), "flips it"] == "from both ends"
    assert shown.loc[("score scaling", "prediction kept"), "flips it"] == "from the authors'"
    assert (
        shown.loc[("fresh batches", "prediction kept"), "switched off in the authors' settings"] == "holds → undecided"
    )
    assert shown.loc[("token layout", "collapsed OV top-right"), "flips it"] == "no"
    assert not any("_" in str(c) for c in shown.columns) and not any("_" in str(i) for i in shown.index.levels[1])


def test_the_reading_is_generated_from_the_table():
    text = pages.reading(
        _hand_made({"paper+scaling": {"faster_qk_top_right": "holds"}, "authors": {"faster_qk_top_right": "holds"}})
    )
    lines = text.splitlines()
    assert len(lines) == 4 and all(line.startswith("- **") for line in lines)
    qk = next(line for line in lines if "faster QK top-right" in line)
    assert "fails in the paper's settings and holds in the authors'" in qk
    assert "Switching on the authors' score scaling alone flips it from fails to holds;" in qk
    assert (
        "switching off the authors' token layout, distinct-token weights, score scaling, fresh batches, "
        "random classes, collapsed start, per-panel initialisation, the code's multipliers or per-panel budgets "
        "and stop rule alone flips it from holds to fails."
    ) in qk  # each factor is on at the authors' end
    assert "No single factor flips it." in next(line for line in lines if "FAFO top-left" in line)
    assert listed(["a", "b"], "or") == "a or b"
    together = pages.reading(
        _hand_made(
            {"authors": {"fafo_top_left": "holds"}} | {f"authors-{f}": {"fafo_top_left": "holds"} for f in FACTOR_KEYS}
        )
    )
    assert "No single factor flips it: it takes several together." in together.splitlines()[1]


def test_the_ablation_rows_must_all_be_there():
    table = _hand_made({})
    rows = pd.DataFrame(
        [
            {RUN: "paper", "panel": p, "seed": s, "ACMC": 0.0, "top_left": 0.0, "accuracy": 0.0, "hit_cap": False}
            for p in fig2_dtap.PANEL_KEYS
            for s in (0, 1)
        ]
    )  # the paper's run alone
    with pytest.raises(ValueError, match="no run 'paper\\+layout'; rerun the chapter"):
        claims.claims_per_run(rows)
    assert claims.decided(table) == {"decided": 80, "undecided": 0, "verdicts": 80}  # 20 runs x 4 claims


def test_labels_read_as_words():
    assert pages.init_label("identity", 1e-6) == "identity ×10⁻⁶"
    assert pages.init_label("balanced", 0.1) == "balanced ×0.1"
    assert pages.init_label("pytorch", 1.0) == "PyTorch default"
    assert (
        pages.rate_label(0.1, True) == "rate 0.1, scores ×1/√d" and pages.rate_label(1.0, False) == "rate 1, unscaled"
    )
    assert (
        pages.run_label("paper+fresh") == "+ fresh batches"
        and pages.run_label("authors-budgets") == "− per-panel budgets and stop rule"
    )
    assert pages.clock(resolve("atlas", "default")[1]) == "rate 0.1, step counts ÷10"
    assert pages.clock(resolve("atlas", "official")[1]) == "rate 0.01, full budgets"
    assert pages.reading(_hand_made({}), "profile `default` (rate 0.1)").startswith(
        "Every run below trained at profile `default` (rate 0.1)."
    )
    assert (
        pages.panel_label({"panel": "f", "parameterisation": "FAFO", "qk_mult": 20.0, "qk_schedule": "ramp"})
        == "(f) FAFO, QK 1→20"
    )
    assert listed(["a", "b", "c"]) == "a, b and c" and listed(["a"]) == "a"


def test_the_ablation_figure_has_a_row_per_run_and_a_column_per_claim():
    fig = pages.ablation_figure(_hand_made({"paper": {"fafo_top_left": "holds"}}))
    assert len(fig.data) == 2  # the paper's settings, the authors'
    paper, authors = fig.data
    assert len(paper.y) == len(authors.y) == 10 and len(paper.x) == 5  # four claims and the step cap
    assert paper.text[0][1] == "✓" and paper.text[0][0] == "✗" and paper.text[0][4] == "0/40"
    assert not fig.layout.title.text  # titled by its caption


def test_the_cost_under_official_is_estimated_from_the_stored_default_runs(tmp_path, monkeypatch):
    from qkov_lib.chapters.atlas import cost
    from qkov_lib.core import paths

    found = cost.default_compute_s()
    assert found is not None and min(found) > 0  # the committed default store holds both parts
    words = cost.official_cost()
    grid, ablation = found
    assert f"{grid:,.0f} CPU seconds for the grid" in words and f"{ablation:,.0f} for the ablation" in words
    hours = (grid + 10 * ablation) / 3600 / 2  # ten times the ablation's steps, on two cores
    assert f"{hours:.1f} hours on 2 cores" in words
    assert ("does not hold it" in words) == (hours > cost.HOURS_ALLOWED)
    monkeypatch.setattr(paths, "STORE_ROOT", tmp_path)  # no store: the cost is said to be unknown
    assert cost.default_compute_s() is None and "not known" in cost.official_cost()
