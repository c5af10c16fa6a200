"""The summary's "paper's text against the authors' code": for every chapter whose numbers the authors' notebooks
stored, the paper's number, the authors', this book under `official` and under the build's profile, and whether
`official` gives the authors' number back; read from fake official units in a results root."""

import html

import pandas as pd
import pytest

from qkov_lib.chapters.beside import fig4 as fig4_beside
from qkov_lib.chapters.summary import beside
from qkov_lib.core.results import UNAVAILABLE, save
from qkov_lib.data import authors
from qkov_lib.metrics.official import INFORMATIVE_COLUMN, authors_parameters
from qkov_lib.metrics.verdicts import (
    DIFFERS,
    HOLDS,
    NOT_EVIDENCE,
    OFFICIAL_COLUMN,
    REPRODUCES,
    UNDECIDED,
    VERDICT_COLUMN,
    as_printed,
)
from qkov_lib.present.references import page_href


def test_a_number_without_seeds_reproduces_to_the_digits_the_authors_printed():
    assert as_printed(0.149, 0.14883) == REPRODUCES  # rounds to 0.149
    assert as_printed(0.149, 0.1485) == REPRODUCES and as_printed(0.149, 0.1495) == REPRODUCES  # the ends
    assert as_printed(0.149, 0.1484) == DIFFERS and as_printed(0.149, 0.1496) == DIFFERS
    assert as_printed(100.0, 100.04) == REPRODUCES and as_printed(100.0, 100.06) == DIFFERS  # one printed decimal
    assert as_printed(None, 0.149) == UNDECIDED and as_printed(0.149, None) == UNDECIDED  # nothing stored; not run


SHIFTS = (-0.4, -0.1, 0.0, 0.2, 0.3)  # five seeds around a mean: an interval of about +-0.3


def stored(key: str) -> float:
    return float(authors.table().loc[key, "value"])


def claims(verdict: str = HOLDS, ids: tuple[str, ...] = ("a_claim",)) -> pd.DataFrame:
    return pd.DataFrame({"id": list(ids), "claim": list(ids), "verdict": verdict})


def real_per_seed(page: str, accuracy_shift: float = 0.0) -> pd.DataFrame:
    """Five seeds of both conditions: the stored accuracies (the faster one moved by ``accuracy_shift``) and made-up
    attention numbers."""
    rows = []
    for seed, shift in enumerate(SHIFTS):
        for condition, key in (("baseline", "baseline"), ("faster QK (x30)", "faster")):
            acc = stored(f"{page}.accuracy.{key}") + shift + (accuracy_shift if key == "faster" else 0.0)
            rows.append(
                {
                    "condition": condition,
                    "seed": seed,
                    "accuracy": acc,
                    "MRTA": 20.0 + shift,
                    "AC": 5.0,
                    "ACMC": 4.0,
                    "sufficiency": 0.3,
                    "comprehensiveness": 0.4,
                }
            )
    return pd.DataFrame(rows)


def fig2_main(top_right_b: float) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"panel": k, "seed": seed, "top_right_cell": (top_right_b if k == "b" else 50.0) + shift, "accuracy": 100.0}
            for k in "abcdefgh"
            for seed, shift in enumerate(SHIFTS)
        ]
    )


def fig4_main(alphas: dict[float, float]) -> pd.DataFrame:
    """Theorem 1's matched read-out at two losses: the stopping loss the authors printed alpha at, and another."""
    return pd.DataFrame(
        [
            {"ratio": r, "stopping_loss": loss, "alpha": a if loss == fig4_beside.STORED_LOSS else 0.5}
            for r, a in alphas.items()
            for loss in (1e-2, fig4_beside.STORED_LOSS)
        ]
    )


def meta(page: str) -> dict:
    """A unit's metadata as an official run at the authors' settings records it: their parameters."""
    return {"parameters": authors_parameters(beside.BESIDE_OFFICIAL[page].module)}


@pytest.fixture
def root(tmp_path):
    """A results root with official units for Figures 2 and 4, HateXplain (learned) and subject-verb agreement (its
    models did not learn: not evidence), none for Figure 3, SQuAD or Table 5; under default, HateXplain and
    Figure 4 only."""
    official = tmp_path / "official"
    save(
        official,
        "fig2_dtap",
        {"main": fig2_main(stored("fig2.b.top_right_cell")), "claims": claims()},
        meta("fig2_dtap"),
    )
    save(
        official,
        "fig4_mu_trajectories",
        {"main": fig4_main({0.01: 0.14883, 0.1: 0.2921, 100.0: 0.99}), "claims": claims()},
        meta("fig4_mu_trajectories"),
    )
    hate = {"per_seed": real_per_seed("hatexplain", accuracy_shift=10.0), "claims": claims()}
    save(official, "hatexplain", hate, meta("hatexplain"))
    save(official, "sva", {"per_seed": real_per_seed("sva"), "claims": claims(NOT_EVIDENCE)}, meta("sva"))
    default = tmp_path / "default"
    save(default, "hatexplain", {"per_seed": real_per_seed("hatexplain", accuracy_shift=-3.0), "claims": claims()}, {})
    save(
        default,
        "fig4_mu_trajectories",
        {"main": fig4_main({0.01: 0.05, 0.1: 0.2, 100.0: 0.98}), "claims": claims()},
        {},
    )
    return tmp_path


def test_a_chapter_with_official_results_sets_them_beside_the_authors_and_this_profile(root):
    hate = beside.beside_authors(root, "default", "hatexplain")
    assert list(hate.columns) == [
        "the paper",
        "the authors' notebooks",
        OFFICIAL_COLUMN,
        INFORMATIVE_COLUMN,
        "this book under default",
        VERDICT_COLUMN,
    ]
    assert len(hate) == (authors.table()["chapter"] == "hatexplain").sum()  # one row per stored number
    base, fast = hate.loc[("test accuracy", "baseline")], hate.loc[("test accuracy", "faster QK")]
    assert base[VERDICT_COLUMN] == "reproduces" and fast[VERDICT_COLUMN] == "differs"  # the faster one moved by 10
    assert base[OFFICIAL_COLUMN].startswith(f"{stored('hatexplain.accuracy.baseline'):.1f} [")  # with its interval
    assert fast["this book under default"].startswith(f"{stored('hatexplain.accuracy.faster') - 3:.1f}")
    assert hate.loc[("AC", "baseline"), VERDICT_COLUMN] == "undecided"  # the authors stored none
    assert hate.loc[("test accuracy", "baseline"), "the authors' notebooks"] == authors.stored(
        "hatexplain.accuracy.baseline"
    )

    fig2 = beside.beside_authors(root, "default", "fig2_dtap")
    b = fig2.loc[("test sequences at attention >= 0.8 and probability >= 0.8", "(b) FACO")]
    assert b[VERDICT_COLUMN] == "reproduces" and b["this book under default"] == "not run"  # no default unit
    assert (
        fig2.loc[("test sequences at attention >= 0.8 and probability >= 0.8", "(a) FAFO"), VERDICT_COLUMN] == "differs"
    )  # 50 against the authors' 0
    assert fig2.loc[("test accuracy", "(g) CACO QK x5"), VERDICT_COLUMN] == "reproduces"  # 100 within one seed's slack

    fig4 = beside.beside_authors(root, "default", "fig4_mu_trajectories")
    assert list(fig4[VERDICT_COLUMN]) == ["reproduces", "differs", "undecided"]  # 0.149; 0.292 against 0.287; none
    assert list(fig4[OFFICIAL_COLUMN]) == ["0.149", "0.292", "0.990"]
    assert list(fig4["this book under default"]) == ["0.050", "0.200", "0.980"]
    stopped = fig4_main({0.01: 0.05}).query("stopping_loss > 1e-3")  # a run that stopped before the authors' loss
    save(root / "smoke", "fig4_mu_trajectories", {"main": stopped, "claims": claims()}, {})
    assert list(beside.beside_authors(root, "smoke", "fig4_mu_trajectories")["this book under smoke"]) == [
        "stopped before the loss 0.0001",
        "not run",
        "not run",
    ]


def test_a_chapter_without_official_results_says_how_to_compute_them(root):
    save(root / "official", "squad", {}, {"status": UNAVAILABLE})  # stopped for want of its data: no tables
    layers = real_per_seed("hatexplain").assign(layers=4)  # official rows, but none of the depth the authors stored
    save(root / "official", "hatexplain_layers", {"per_seed": layers, "claims": claims()}, meta("hatexplain_layers"))
    save(root / "default", "sva", {}, {"status": UNAVAILABLE})
    for name in ("fig3_incentive", "squad", "hatexplain_layers"):
        assert beside.beside_authors(root, "default", name) is None
    page = beside.official_html(root, "default")
    for name in ("fig3_incentive", "squad", "hatexplain_layers"):
        assert html.escape(f"python -m qkov_lib reproduce --profile official --only {name}") in page
    assert "--only hatexplain<" not in page and page.count("<details") == 4  # the four chapters with official units
    at = [page.index(f'href="{page_href(name)}"') for name in ("fig2_dtap", "hatexplain", "squad")]
    assert at == sorted(at)  # in book order
    squad = page[page.index(f'href="{page_href("squad")}"') :]
    assert "its data was not available where it ran" in squad and "not run yet" in page
    assert (beside.beside_authors(root, "default", "sva")["this book under default"] == "not run").all()


def test_an_official_run_that_is_not_evidence_never_reproduces(root):
    sva = beside.beside_authors(root, "default", "sva")
    assert (sva[VERDICT_COLUMN] == "undecided").all()  # its accuracies equal the authors', but the models did not learn
    assert sva[OFFICIAL_COLUMN].str.endswith("(not evidence: its models did not learn the task)").all()
    assert (sva["this book under default"] == "not run").all()
    page = beside.official_html(root, "default", ["sva"])
    n = int((sva[INFORMATIVE_COLUMN] == "yes").sum())
    told = f"reproduces 0 of {n} informative (0 differ, {n} undecided; 0 compared)"
    assert f"{len(sva)} stored numbers; {told}; undecided: {len(sva)}" in page


def test_under_official_the_page_has_one_column_for_official(root):
    hate = beside.beside_authors(root, "official", "hatexplain")
    assert list(hate.columns) == [
        "the paper",
        "the authors' notebooks",
        OFFICIAL_COLUMN,
        INFORMATIVE_COLUMN,
        VERDICT_COLUMN,
    ]
    assert beside.official_html(root, "official", ["hatexplain"]).count("<th>this book under") == 1


def test_every_chapter_with_stored_numbers_is_compared():
    assert set(beside.BESIDE_OFFICIAL) == set(authors.table()["chapter"])
