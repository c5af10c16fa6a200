"""A compound claim's reason names the parts that decide it (``metrics.compound``): the two false reasons a reader
found, 'ACMC of (b) and of (d) lies below 50%' beside (b) = 100.0, and 'each faster panel ... at or below 0'
beside (f) = +99.1, now cite the failing part with its numbers and say that the others hold."""

import pandas as pd
from fake_chapters import fig2_rows

from qkov_lib.chapters import fig2_dtap
from qkov_lib.chapters.summary import _why
from qkov_lib.metrics.compound import clause, each
from qkov_lib.metrics.verdicts import FAILS, HOLDS, UNDECIDED, Interval, above, at_least, rule

AT_LEAST_50 = rule("at least", "ACMC of (b) and of (d)", "50%")


def test_the_rules_clause_for_each_verdict():
    assert clause(FAILS, AT_LEAST_50) == "lies below 50%"
    assert clause(UNDECIDED, AT_LEAST_50) == "straddles 50% or the run has one seed (no interval)"
    assert clause(HOLDS, "holds if x; fails if y") == ""


def test_a_failing_part_is_named_with_its_numbers_and_the_others_said_to_hold():
    parts = {"(b)": Interval.of([100.0, 100.0, 100.0]), "(d)": Interval.of([12.0, 12.5, 13.0])}
    verdict, why = each(parts, lambda i: at_least(i, 50.0), AT_LEAST_50)
    assert verdict == FAILS and why == "(d) 12.5 [11.3, 13.7]: lies below 50%; (b) holds"
    assert each({"(b)": parts["(b)"]}, lambda i: at_least(i, 50.0), AT_LEAST_50) == (HOLDS, "")


def test_an_undecided_part_is_named_and_a_failure_names_the_undecided_too():
    gains = {
        "(e) vs (a)": Interval.of([-2.1, -2.0, -1.9]),
        "(f) vs (a)": Interval.of([98.0, 99.1, 100.2]),
        "(g) vs (d)": Interval.of([-5.0, 1.0, 7.0]),
    }
    above_0 = rule("above", "ACMC of each faster panel and its base panel", "0", paired=True)
    verdict, why = each(gains, lambda i: above(i, 0.0), above_0, signed=True)
    assert verdict == FAILS
    assert why == "(e) vs (a) -2.0 [-2.2, -1.8]: lies at or below 0; (f) vs (a) holds; (g) vs (d) undecided"
    verdict, why = each({k: v for k, v in gains.items() if k != "(e) vs (a)"}, lambda i: above(i, 0.0), above_0)
    assert (
        verdict == UNDECIDED and why.startswith("(g) vs (d) 1.0 [") and why.endswith(": straddles 0; (f) vs (a) holds")
    )


def test_figure_2s_failing_claim_gives_its_failing_panel_and_the_summary_reads_it():
    rows = fig2_rows(acmc={"d": [12.0, 12.5, 13.0]})  # (d) far below 50%, (b) at 80%
    table = fig2_dtap.claims(rows).set_index("id")
    collapsed = table.loc["collapsed_ov_top_right"]
    assert collapsed["verdict"] == FAILS and collapsed["why"] == "(d) 12.5 [11.3, 13.7]: lies below 50%; (b) holds"
    assert _why(collapsed) == collapsed["why"]
    assert table.loc["fafo_top_left", "why"] == ""  # one part: the rule's clause says it
    assert (
        _why(table.loc["fafo_top_left"].copy())
        == "the 95% interval over seeds of the top-left share of (a) lies at or above 25%"
    )
    assert _why(pd.Series({"verdict": FAILS, "rule": AT_LEAST_50, "why": float("nan")})) == (
        "the 95% interval over seeds of ACMC of (b) and of (d) lies below 50%"
    )  # a unit saved before claims had reasons of their own


def test_the_page_shows_the_deciding_parts_under_the_rule():
    from qkov_lib.present.claims import claims_html

    table = fig2_dtap.claims(fig2_rows(acmc={"d": [12.0, 12.5, 13.0]}))
    shown = claims_html(table)
    assert shown.count("Here: ") == 1 and "Here: (d) 12.5 [11.3, 13.7]: lies below 50%; (b) holds." in shown
