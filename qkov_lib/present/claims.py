"""A verdict as a reader sees it, in HTML: the word in its colour (``metrics.verdicts.COLOURS``), a claim table whose
rows stack into cards on a narrow screen (the book's style sheet), a cell's grey second line. The verdicts and their
rules are computed in ``metrics.verdicts``; only their HTML is here."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence

import pandas as pd
from IPython.display import HTML

from ..metrics.verdicts import CLAIM_COLUMNS, COLOURS
from .text import math_html


def word(verdict: str) -> str:
    """A verdict as HTML: the word in its colour (readable without the book's style sheet too)."""
    return (
        f'<span class="qkov-verdict qkov-{verdict.replace(" ", "-")}" style="color: {COLOURS[verdict]}; '
        f'font-weight: 600; white-space: nowrap">{html.escape(verdict)}</span>'
    )


def present(table: pd.DataFrame, columns: Sequence[tuple[str, str]] = CLAIM_COLUMNS, raw: Sequence[str] = ()) -> HTML:
    """A claim table for reading: the verdict first, as a coloured word, then ``columns`` ((key, header) pairs), the
    keys in ``raw`` holding HTML already (links); no ids. On a narrow screen each row stacks into a card (the book's
    style sheet)."""
    return HTML(claims_html(table, columns, raw))


def claims_html(
    table: pd.DataFrame, columns: Sequence[tuple[str, str]] = CLAIM_COLUMNS, raw: Sequence[str] = ()
) -> str:
    """``present``'s HTML."""

    def cell(key: str, header: str, value: object, why: object = None) -> str:
        text = "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
        shown = text if key in raw else html.escape(text)
        if key == "rule" and isinstance(why, str) and why:  # a compound claim: the parts that decide it
            shown += "<br>" + note(html.escape(f"Here: {why}."))
        return f'<td data-label="{html.escape(header)}">{shown}</td>'

    head = "".join(f"<th>{html.escape(h)}</th>" for h in ("verdict", *(h for _, h in columns)))
    body = "".join(
        "<tr>"
        + f'<td data-label="verdict">{word(r["verdict"])}</td>'
        + "".join(cell(k, h, r[k], r.get("why")) for k, h in columns)
        + "</tr>"
        for _, r in table.iterrows()
    )
    return f'<table class="qkov-claims"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def note(text: str) -> str:
    """A cell's second line (why; where it is decided; the authors' numbers), smaller and grey: raw HTML."""
    return f'<span class="qkov-note">{text}</span>'


def verdict_table(rows: Iterable[tuple[str, Sequence[str]]], headers: Sequence[str], css: str = "") -> str:
    """A table of verdicts: each row a verdict (shown as its coloured word, first) and its other cells (raw HTML),
    under ``headers`` (the verdict's included); its cells stack into cards on a narrow screen."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td data-label="{html.escape(h)}">{c}</td>' for h, c in zip(headers, (word(v), *cells)))
        + "</tr>"
        for v, cells in rows
    )
    return f'<table class="qkov-claims {css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


ERRATA_COLUMNS = (("formula", "as the paper prints it, and corrected"), ("evidence", "evidence (this run)"))


def errata(table: pd.DataFrame) -> HTML:
    """The errata (``chapters.errata``) for reading, as a verdict table (each row a card on a phone): the verdict
    on the formula as printed, then where and what the paper prints above the corrected form, and the evidence,
    their formulas typeset."""
    shown = pd.DataFrame(
        {
            "verdict": table["verdict"],
            "formula": [
                f"<strong>{math_html(w)}</strong>: {math_html(p)}<br><em>Corrected:</em> {math_html(c)}"
                for w, p, c in zip(table["where"], table["as printed"], table["corrected"])
            ],
            "evidence": table["evidence"].map(math_html),
        }
    )
    return HTML(claims_html(shown, ERRATA_COLUMNS, raw=[key for key, _ in ERRATA_COLUMNS]))
