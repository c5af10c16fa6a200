"""The HTML of the pages that gather every chapter's results: the scorecard's claim tables, the summary's results
table and lists, and the summary's section that sets this book under ``official`` beside the authors' stored
numbers. The rows and their verdicts come from ``chapters.scorecard``, ``chapters.summary`` and
``metrics.official``; only how they read is here."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping

import pandas as pd

from ..core.contents import title
from ..core.results import BY_HAND
from .claims import note, verdict_table
from .references import page_href

CLAIMS_SECTION = "the-claims-checked"  # the anchor of each chapter's "The claims, checked" section


def claims_link(page: str, text: str, results: object = None) -> str:
    """A link to the section of ``page`` that decides its claims, marked where its results were run by hand."""
    link = f'<a href="{page_href(page, CLAIMS_SECTION)}">{html.escape(text)}</a>'
    return link + (" (run by hand)" if results == BY_HAND else "")


def scorecard_section(part: pd.DataFrame) -> str:
    """The claims of one kind as a table of three columns: the verdict; the claim, with the chapter that decides it
    (a link to its claims) and, for Figure 2's, how it fares across the atlas; this run's numbers, with the authors'
    stored ones where they stored any."""
    if part.empty:
        return "<p>No claims of this kind under this profile.</p>"

    def cells(r: pd.Series) -> tuple[str, str]:
        link = claims_link(r["page"], r["chapter"], r.get("results"))
        atlas_line = f"; across the atlas: {html.escape(r['across the atlas'])}" if r["across the atlas"] else ""
        theirs = str(r["authors"] or "") if pd.notna(r["authors"]) else ""
        return (
            html.escape(r["claim"]) + note(f"decided in {link}{atlas_line}"),
            html.escape(r["this run"]) + (note(f"the authors' notebooks: {html.escape(theirs)}") if theirs else ""),
        )

    return verdict_table(
        ((r["verdict"], cells(r)) for _, r in part.iterrows()),
        ("verdict", "claim", "this run (95% interval over seeds)"),
    )


def folded(summary: str, body: str) -> str:
    """``body`` folded under a line saying what it holds (open on a click)."""
    return f"<details><summary>{html.escape(summary)}</summary>{body}</details>"


def paragraph(text: str) -> str:
    """A sentence or two as a paragraph (``text`` escaped)."""
    return f"<p>{html.escape(text)}</p>" if text else ""


def bullets(items: Iterable[str], lead: str = "") -> str:
    """``items`` (escaped) as a bulleted list, after a paragraph ``lead`` where one is given."""
    return paragraph(lead) + "<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>"


def missing_chapters(missing: Mapping[str, str]) -> str:
    """The chapters that give the scorecard no claim, each with why ('' when none)."""
    if not missing:
        return ""
    items = (f"{title(name)}: {why}" for name, why in missing.items())
    return bullets(items, "Chapters that contribute no claim here:")


def results_html(table: pd.DataFrame) -> str:
    """The summary's results table, three columns: the verdict (a coloured word); the claim, with why and a link to
    the chapter section that decides it; this build's numbers over the authors' stored ones. Cells stack into cards
    on a narrow screen."""

    def cells(r: pd.Series) -> tuple[str, str]:
        link = claims_link(r["page"], title(r["page"]), r.get("results"))
        return (
            html.escape(r["claim"]) + note(f"why: {html.escape(r['reason'])}; see {link}"),
            (html.escape(r["this run"]) or "none") + note(f"the authors' notebooks: {html.escape(r['authors'])}"),
        )

    return verdict_table(
        ((r["verdict"], cells(r)) for _, r in table.iterrows()),
        ("verdict", "the paper's claim", "this build (95% interval over seeds)"),
        "qkov-summary",
    )


def official_missing(page: str, profile: str, why: str, command: str) -> str:
    """A chapter with no results under ``profile`` (official): why, and the command that computes them."""
    return (
        f'<p><strong><a href="{page_href(page)}">{html.escape(title(page))}</a></strong>: no results under '
        f"<code>{html.escape(profile)}</code> ({html.escape(why)}). <code>{html.escape(command)}</code> computes "
        f"them; this page shows them when it is next built.</p>"
    )


def official_chapter(page: str, table: pd.DataFrame, verdict: str, line: str) -> str:
    """A chapter's stored numbers beside ``official``'s, folded under its title (a link to its page), how many
    there are and ``line`` (its tally); each row led by its verdict (the ``verdict`` column)."""
    headers = (verdict, "stored number", *table.columns.drop(verdict))
    rows = (
        (
            r[verdict],
            (
                html.escape(f"{quantity}, {condition}"),
                *(html.escape(str(r[c])) for c in table.columns.drop(verdict)),
            ),
        )
        for (quantity, condition), r in table.iterrows()
    )
    return (
        f'<details class="qkov-official" style="margin: 0.6em 0"><summary><strong><a href="{page_href(page)}">'
        f"{html.escape(title(page))}</a></strong>: {len(table)} stored numbers; {html.escape(line)}</summary>"
        f"{verdict_table(rows, headers, 'qkov-official')}</details>"
    )


def official_total(tally: str) -> str:
    """The book's tally over every chapter's stored numbers."""
    return f"<p><strong>All chapters</strong>: {html.escape(tally)}.</p>"
