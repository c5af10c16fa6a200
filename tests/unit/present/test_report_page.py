"""The report's own HTML (``present.report_page``): both verdicts of a claim, or 'not run' where the authors' code
has not, and a contents list that keeps its shape when numbered."""

import pandas as pd
from bs4 import BeautifulSoup

from qkov_lib.metrics.verdicts import FAILS, HOLDS
from qkov_lib.present import report_page


def test_each_claim_shows_both_verdicts_or_says_the_authors_code_did_not_run():
    ours = pd.DataFrame(
        {"claim": ["A", "B"], "verdict": [HOLDS, FAILS], "this run": ["1.0", ""], "authors": ["2.0", "3.0"]}
    )
    theirs = ours.assign(verdict=[FAILS, HOLDS])
    rows = BeautifulSoup(report_page.results_html(ours, "smoke", theirs), "html.parser").select("tbody tr")
    assert [[td.get_text(" ", strip=True) for td in r.find_all("td")][1:3] for r in rows] == [
        [HOLDS, FAILS],
        [FAILS, HOLDS],
    ]
    alone = report_page.results_html(ours, "smoke", None)
    assert alone.count("not run") == 2 and "the authors' code (official)" in alone


def test_the_contents_keep_their_shape_when_numbered():
    blank, numbered = (
        report_page.contents(None),
        report_page.contents({s: i + 3 for i, s in enumerate(report_page.SECTIONS)}),
    )

    def shape(text: str) -> list[int]:
        return [len(li.find_all("span")) for li in BeautifulSoup(text, "html.parser").find_all("li")]

    assert shape(blank) == shape(numbered) == [2] * len(report_page.SECTIONS)
    assert ">3</span>" in numbered and ">3</span>" not in blank
