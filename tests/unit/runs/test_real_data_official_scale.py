"""An official run scaled down to fit a CPU (SQuAD's) is not the authors' experiment: the real-data page draws no
verdict from it (every one undecided) and says why below its table, read from this run's parameters or from the
official unit's metadata."""

import pandas as pd
import pytest

from qkov_lib.chapters import squad, sva
from qkov_lib.core.chapter import as_dict, resolve
from qkov_lib.core.results import save
from qkov_lib.data import authors
from qkov_lib.metrics import official
from qkov_lib.metrics.official import AUTHORS_SCALE, INFORMATIVE_COLUMN, authors_parameters, full_size_command
from qkov_lib.metrics.verdicts import OFFICIAL_COLUMN, VERDICT_COLUMN, tally_line
from qkov_lib.runs.real_verdicts import OfficialRun, compared, official_note, official_run, reduction


def squad_per_seed() -> pd.DataFrame:
    """Five seeds per condition whose every interval holds the authors' stored number (it would reproduce)."""
    stored = authors.table()
    rows = []
    for seed, shift in enumerate((-0.02, -0.01, 0.0, 0.01, 0.02)):
        for condition, part in (("baseline", "baseline"), ("faster QK (x20)", "faster")):
            row = {"condition": condition, "seed": 1234 + seed}
            for metric in ("F1", "EM", "MRTA", "AC", "ACMC", "sufficiency", "comprehensiveness"):
                row[metric] = float(stored.loc[f"squad.{metric}.{part}", "value"]) * (1 + shift)
            rows.append(row)
    return pd.DataFrame(rows)


def test_the_sizes_an_official_run_scales_down_are_named_with_the_authors():
    full = authors_parameters(squad)
    assert {k: full[k] for k in AUTHORS_SCALE["squad"]} == {"max_train": None, "max_test": None, "epochs": 100}
    assert reduction(squad, full) is None
    assert reduction(squad, dict(full, max_train=1000, epochs=3)) == (
        "max_train 1,000 (theirs: all), epochs 3 (theirs: 100)"
    )
    assert full_size_command(squad) == (
        "python -m qkov_lib reproduce --profile official --only squad -p max_train None -p max_test None -p epochs 100"
    )


def test_the_squad_official_profile_is_scaled_down_and_says_so_and_the_command_undoes_it():
    setup = resolve(squad, "official")[1]
    why = reduction(squad, as_dict(setup))
    assert why is not None and "(theirs: 100)" in why  # fewer epochs than the authors' 100
    undone = resolve(squad, "official", {"max_train": None, "max_test": None, "epochs": 100})[1]
    assert reduction(squad, as_dict(undone)) is None
    assert set(AUTHORS_SCALE["squad"]) <= set(as_dict(setup))  # every scaled size is a parameter
    kept = {
        "d_model": 300,
        "n_heads": 6,
        "d_mlp": 1200,
        "n_layers": 6,
        "accumulate": 2,
        "clip_norm": 0.5,
        "label_smoothing": 0.1,
        "lr_schedule": "onecycle",
        "qk_params": "wq_wk_bq_bk",
        "batch_size": 32,
    }
    assert {k: getattr(setup, k) for k in kept} == kept  # the authors' model, optimiser and schedule shape kept
    assert len(setup.seeds) == 5


def test_a_scaled_down_official_run_gives_no_verdict_and_the_page_says_why(tmp_path):
    per_seed = squad_per_seed()
    full = compared(per_seed, "squad", OfficialRun(per_seed, evidence=True))
    assert (full[VERDICT_COLUMN] == "reproduces").all()  # at the authors' sizes these numbers give theirs back
    small = OfficialRun(per_seed, evidence=True, reduced="epochs 3 (theirs: 100)")
    table = compared(per_seed, "squad", small)
    assert (table[VERDICT_COLUMN] == "undecided").all()
    assert (table[OFFICIAL_COLUMN] == full[OFFICIAL_COLUMN]).all()  # its numbers are still shown
    note = official_note(squad, small)
    assert "epochs 3 (theirs: 100)" in note and "*undecided*" in note and full_size_command(squad) in note
    assert official_note(squad, OfficialRun(per_seed, evidence=True)) == "" and official_note(squad, None) == ""
    claims = pd.DataFrame({"id": ["F1_comparable"], "verdict": ["holds"]})
    scaled = dict(authors_parameters(squad), epochs=3)
    here = official_run(squad, "official", per_seed, claims, parameters=scaled)  # this run, scaled down
    assert here.reduced == "epochs 3 (theirs: 100)" and not here.comparable
    save(
        tmp_path / "official",
        "squad",
        {"per_seed": per_seed, "claims": claims},
        {"parameters": dict(authors_parameters(squad), max_train=2000)},
    )
    read = official_run(squad, "default", root=tmp_path)  # another profile's page reads the unit's parameters
    assert read.reduced == "max_train 2,000 (theirs: all)"
    assert (compared(per_seed, "squad", read)[VERDICT_COLUMN] == "undecided").all()


def test_a_page_names_why_its_official_models_did_not_learn_where_the_chapter_knows():
    per_seed = squad_per_seed()
    unlearned = official_note(sva, OfficialRun(per_seed, evidence=False))
    assert "not evidence: its models did not learn the task" in unlearned
    assert unlearned.endswith("Why its models did not learn: not measured here. " + unlearned.split("here. ")[-1])
    assert "(`match_steps`) is not in this build" in unlearned  # no stored runs at the authors' steps: no cause
    matched = pd.DataFrame(
        {"condition": ["baseline"] * 2 + ["faster QK (x100)"] * 2, "seed": [1, 2] * 2, "epochs": 36, "steps": 74_628}
        | {"accuracy": [70.5, 62.3, 80.0, 81.0], "majority": 62.3, "learned": [True, False, True, True]}
    )
    measured = official_note(sva, OfficialRun(per_seed, evidence=False, tables={"matched": matched}))
    assert measured.endswith(
        "Why its models did not learn: the number of steps, on some seeds: trained for 74,628 steps (36 epochs), at "
        "least the authors' 73,935, the baseline learned the task on 1 of its 2 seeds (accuracy 70.5, 62.3% against "
        "the majority class's 62.3%)."
    )
    assert "learned the task on 2 of its 2" in sva.not_learned_cause({"matched": matched.assign(learned=True)})
    assert sva.not_learned_cause({"matched": matched.assign(learned=False)}).startswith("not the number of steps")
    assert official_note(sva, OfficialRun(per_seed, evidence=True)) == ""  # learned: nothing to say
    assert "Why its models" not in official_note(squad, OfficialRun(per_seed, evidence=False))  # no cause named


def test_a_quantity_official_cannot_measure_their_way_gets_no_verdict_and_says_how_it_differs():
    per_seed = squad_per_seed()
    full = OfficialRun(per_seed, evidence=True)
    assert (compared(per_seed, "squad", full)[VERDICT_COLUMN] == "reproduces").all()  # the same rows, compared
    table = compared(per_seed, "squad", OfficialRun(per_seed, True, different=squad.DIFFERENT_UNDER_OFFICIAL))
    flat = table.reset_index()
    other = flat["quantity"].isin(flat["quantity"][flat[INFORMATIVE_COLUMN].str.startswith("no: another quantity")])
    assert other.sum() == 2 * len(squad.DIFFERENT_UNDER_OFFICIAL)  # both conditions of each such quantity
    assert (flat.loc[other, VERDICT_COLUMN] == "undecided").all()
    assert (flat.loc[~other, VERDICT_COLUMN] == "reproduces").all()  # F1 and EM are still compared
    assert official.tally(table[VERDICT_COLUMN], table[INFORMATIVE_COLUMN]).startswith("reproduces 4 of 4 informative")
    line = tally_line(table)  # below the table, each such quantity once with how the two differ
    assert (
        f"Another quantity under official, so no verdict: {authors.table().loc['squad.MRTA.baseline', 'quantity']}"
        in line
    )
    assert line.count(squad.READ_AT) == 3 and line.count(squad.ERASED) == 2  # MRTA, AC, ACMC; the two erasures


def test_the_sva_official_profile_measures_as_the_authors_and_names_what_it_cannot():
    setup = sva.Setup(**sva.PROFILES["official"])
    assert (setup.measure, setup.k_percents, setup.max_len) == ("authors", (5.0,), 128)
    assert set(sva.DIFFERENT_UNDER_OFFICIAL) == {"MRTA", "AC", "above_10"}  # accuracy, sufficiency and
    # comprehensiveness are measured their way (on other data, a line of the deviations page)
    keys = set(authors.table().index[authors.table()["chapter"] == "sva"])
    assert {k.rsplit(".", 2)[1] for k in keys} >= set(sva.DIFFERENT_UNDER_OFFICIAL)


def test_the_run_at_the_authors_steps_trains_the_fewest_epochs_that_reach_them():
    examples = 66_356  # the offline prefixes
    assert sva.matched_epochs(sva.Setup(), examples, sva.AUTHORS_STEPS) == 36  # 2,073 steps an epoch; 35 make 72,555
    assert sva.at_matched_steps(sva.Setup(), None, examples) is None  # no match_steps: no such run
    with pytest.raises(ValueError, match="match_steps must be an integer >= 1"):
        sva.Setup(match_steps=0)
