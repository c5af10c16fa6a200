"""The report's own HTML (``runner.report`` assembles it from the built book and prints it): its title page, its
contents, each numbered section, the results table with both verdicts, the figures numbered across the report, how
to rerun it, the page around it and the footer the printer puts on every page."""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from typing import Protocol

import pandas as pd
from bs4 import BeautifulSoup

from ..core.contents import title
from ..metrics.official import CODE_RULE, OFFICIAL
from ..metrics.verdicts import FAILS, HOLDS, REPLICATION_RULE, counts
from .claims import word

SECTIONS = ("Summary", "Results", "Figures", "Deviations", "Errata", "How to rerun", "References")
PAGE_MARK = "qkov-page"  # a contents entry's page number, filled in after the first print
# what stands in the summary's place for its results table, which the Results section shows with both verdicts
SEE_RESULTS = "<p><em>Each claim and its verdicts: see the Results.</em></p>"
HEADER = "<div></div>"  # no header on the printed pages
FOOTER = (
    '<div style="font-size: 8px; width: 100%; text-align: center; color: #57606a; font-family: sans-serif">'
    '<span class="pageNumber"></span> / <span class="totalPages"></span></div>'
)


class Shown(Protocol):
    """A figure as the report shows it (``runner.report.Figure``): its chapter and its HTML."""

    @property
    def page(self) -> str: ...

    @property
    def html(self) -> str: ...


def title_page(
    cff: dict, mark: str, ours: pd.DataFrame, profile: str, commit: str, code: tuple[str | None, str]
) -> str:
    """The title ([Re] or [¬Re] under the paper's text, and the paper's title), the authors, the reproduced paper,
    and each question's rule with its count: the headline claims, and the stored numbers under the authors' code
    (``code``: its mark, None before an official run, and its count). ``cff``: the book's ``CITATION.cff``."""
    paper = cff["references"][0]
    names = ", ".join(a["name"] for a in cff["authors"])
    paper_names = ", ".join(a["name"] for a in paper["authors"])
    tally = counts(ours["verdict"])
    return (
        f'<header class="qkov-title"><p class="qkov-kind">A reproduction report</p>'
        f"<h1>{html.escape(mark)} {html.escape(paper['title'])}</h1>"
        f'<p class="qkov-authors">{html.escape(names)}</p>'
        f'<p class="qkov-paper">Reproduced: {html.escape(paper_names)}, "{html.escape(paper["title"])}", '
        f"{html.escape(paper['conference']['name'])}, {paper['year']}, "
        f'<a href="{html.escape(paper["url"])}">{html.escape(paper["url"])}</a>.</p>'
        f'<p class="qkov-rule"><strong>{html.escape(mark)}</strong>: {html.escape(REPLICATION_RULE)}. In this '
        f"build {tally[HOLDS]} of the {len(ours)} headline claims hold and {tally[FAILS]} fail.</p>"
        f'<p class="qkov-rule"><strong>{html.escape(code[0] or "No mark yet")}</strong> under the authors\' code '
        f"(the <code>official</code> profile against the numbers their notebooks stored): {html.escape(code[1])}; "
        f"{html.escape(CODE_RULE)}.</p>"
        f'<p class="qkov-built">Profile <code>{html.escape(profile)}</code>, commit '
        f"<code>{html.escape(commit)}</code>, built {time.strftime('%Y-%m-%d', time.gmtime())}.</p></header>"
    )


def contents(pages: dict[str, int] | None) -> str:
    """The contents list: each section and its page (a blank of the same width before the first print)."""
    items = "".join(
        f'<li><span>{i}. {s}</span><span class="{PAGE_MARK}">{pages.get(s, "") if pages else ""}</span></li>'
        for i, s in enumerate(SECTIONS, 1)
    )
    return f'<nav class="qkov-contents"><h2>Contents</h2><ol>{items}</ol></nav>'


def section(number: int, name: str, body: str, lead: str = "") -> str:
    lead_html = f'<p class="qkov-lead">{lead}</p>' if lead else ""
    return f'<section class="qkov-part"><h2>{number}. {name}</h2>{lead_html}{body}</section>'


def results_html(ours: pd.DataFrame, profile: str, official: pd.DataFrame | None) -> str:
    """Each headline claim with both its verdicts: under the paper's text (``profile``) and under the authors'
    code (``official``, or 'not run'), and this build's numbers over the authors' stored ones."""
    theirs = dict(zip(official["claim"], official["verdict"])) if official is not None else {}
    rows = []
    for _, r in ours.iterrows():
        other = word(theirs[r["claim"]]) if r["claim"] in theirs else "not run"
        numbers = html.escape(r["this run"]) or "none"
        rows.append(
            f"<tr><td>{html.escape(r['claim'])}</td><td>{word(r['verdict'])}</td><td>{other}</td>"
            f"<td>{numbers}<span class='qkov-note'>the authors' notebooks: {html.escape(r['authors'])}</span></td>"
            "</tr>"
        )
    head = (
        f"<tr><th>the paper's claim</th><th>the paper's text ({html.escape(profile)})</th>"
        f"<th>the authors' code ({OFFICIAL})</th><th>this build's numbers</th></tr>"
    )
    return f'<table class="qkov-results"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def figures_html(found: Sequence[Shown]) -> str:
    """The figures in order, each numbered across the report and named by its chapter."""
    parts = []
    for i, f in enumerate(found, 1):
        soup = BeautifulSoup(f.html, "html.parser")
        number = soup.select_one(".caption-number")
        if number is not None:
            number.string = f"Figure {i} (from “{title(f.page)}”). "
        parts.append(str(soup))
    return "".join(parts)


def rerun_html(profile: str, commit: str) -> str:
    head = commit.removesuffix("+dirty")
    return (
        f"<p>This report was built at commit <code>{html.escape(commit)}</code>. To compute every number again and "
        f"rebuild the book it reads from, check that commit out and run:</p>"
        f"<pre>git checkout {html.escape(head)}\npython -m qkov_lib reproduce --profile {html.escape(profile)}\n"
        f"python -m qkov_lib book</pre><p>and <code>python -m qkov_lib report --profile {html.escape(profile)}</code> "
        f"prints this report again.</p>"
    )


def document(body: Sequence[str], maths: str) -> str:
    """The report's page: the book's style sheets and the report's, ``maths`` (the book's MathJax scripts), plotly,
    and ``body``'s parts in order."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title('summary'))}</title>"
        '<link rel="stylesheet" href="_static/qkov.css"><link rel="stylesheet" href="_static/report.css">'
        f'{maths}<script src="_static/plotly.min.js"></script></head>'
        f'<body><main class="qkov-report">{"".join(body)}</main></body></html>\n'
    )
