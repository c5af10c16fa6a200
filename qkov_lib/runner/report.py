"""The report: one article in the ReScience / MLRC form, assembled from the built book and printed to an A4 PDF
(``python -m qkov_lib report``, ``make report``; the publishing job puts it at ``<site>/<profile>/report.pdf``).

Its order: the title, marked [Re] or [¬Re] by ``verdicts.replication`` over the summary's headline verdicts, with
the authors and the reproduced paper (``CITATION.cff``); the contents; the summary page; the results (each headline
claim with its verdict under the paper's text, this profile, and under the authors' code, ``official``); the figures
of every chapter with their captions and text alternatives; the deviations and the errata; how to rerun it (the
commit and the two commands); the references. Every part is read from the built pages (``_build/html``) or the
results the summary reads. The contents list's page numbers come from a first print: each section's heading is found
in its ``pdftotext`` page, and the report printed again with them."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urljoin, urlparse

import pandas as pd
import yaml
from bs4 import BeautifulSoup, Tag

from ..chapters import scorecard, summary
from ..core.chapter import ParameterError, concrete_profile
from ..core.contents import chapter_names
from ..core.paths import BOOK_CHAPTERS, HTML, REPO_ROOT
from ..core.results import git_commit, results_root
from ..metrics.official import OFFICIAL
from ..metrics.verdicts import replication
from ..present.report_page import (
    SECTIONS,
    SEE_RESULTS,
    contents,
    document,
    figures_html,
    rerun_html,
    results_html,
    section,
    title_page,
)
from . import report_print

PDF_NAME = "report.pdf"  # beside the book's index.html, so the published site holds it at <site>/<profile>/
REPORT_HTML = "report.html"  # written beside the book's index.html, so the book's _static and _images resolve
CSS = Path(__file__).with_name("report.css")
CHROME = ("a.headerlink", "p.qkov-launch", "button", "div.cell_input", ".toggle", "script[type='math/tex']")


class ReportError(RuntimeError):
    """The report cannot be built from what is here; the message says what to run first."""


class Figure(NamedTuple):
    """A chapter's figure as the report shows it: the chapter, its ``<figure>`` (ids made unique), its caption's
    text and its text alternative."""

    page: str
    html: str
    caption: str
    alt: str


def page_url(page: str) -> str:
    """A book page's path under the built HTML: a chapter's ``book/chapters/<name>.html``, else ``book/<name>``."""
    return f"book/chapters/{page}.html" if page in chapter_names() else f"book/{page}.html"


def article(html_dir: Path, page: str) -> Tag:
    """The article of a built page (its text, without the theme's navigation)."""
    path = html_dir / page_url(page)
    if not path.is_file():
        raise ReportError(f"the built book has no page {page_url(page)}; run 'python -m qkov_lib book' first")
    found = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser").select_one("article.bd-article")
    if found is None:
        raise ReportError(f"{page_url(page)} has no article (not a page of this book's theme); rebuild the book")
    return clean(found, page_url(page))


def clean(node: Tag, url: str) -> Tag:
    """``node`` without the screen's chrome (heading anchors, launch links, buttons, code inputs), its images'
    addresses made relative to the book's root and its links to other pages made plain text (a PDF has no
    pages to go to); outside links stay."""
    for selector in CHROME:
        for found in node.select(selector):
            found.decompose()
    for folded in node.find_all("details"):
        folded["open"] = ""  # paper does not unfold
    base = "http://book/" + url
    for img in node.find_all("img"):
        img["src"] = urlparse(urljoin(base, str(img.get("src", "")))).path.lstrip("/")
    for link in node.find_all("a"):
        target = str(link.get("href", ""))
        if not target.startswith(("http://", "https://", "mailto:")):
            link.unwrap()
    return node


def book_profile(chapters_dir: Path) -> str | None:
    """The profile the built summary page was executed under (its papermill parameters), None if unknown."""
    path = chapters_dir / "summary.ipynb"
    if not path.is_file():
        return None
    meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    return (meta.get("papermill", {}).get("parameters") or {}).get("profile")


def figures(html_dir: Path, pages: Sequence[str]) -> list[Figure]:
    """Every captioned plotly figure of ``pages`` in order, its element ids prefixed by its page (each chapter
    numbers its figures from 1)."""
    out = []
    for page in pages:
        body = article(html_dir, page)
        for fig in body.select("figure"):
            if not fig.select_one("div.plotly-graph-div"):
                continue
            text = str(fig)
            for div in fig.select("div.plotly-graph-div"):
                old = str(div["id"])
                text = text.replace(f'"{old}"', f'"{page}-{old}"')
            caption = fig.select_one("figcaption .caption-text")
            alt = fig.select_one(".qkov-alt")
            out.append(
                Figure(
                    page,
                    text,
                    caption.get_text(" ", strip=True) if caption else "",
                    alt.get_text(" ", strip=True) if alt else "",
                )
            )
    return out


def headline_table(profile: str, root: Path) -> pd.DataFrame | None:
    """The summary's headline rows (``summary.results_table``) under ``profile``, None where it has no results."""
    folder = root / profile
    if not folder.is_dir():
        return None
    claims, _ = scorecard.gather(folder)
    return summary.results_table(claims) if not claims.empty else None


def assemble(html_dir: Path, profile: str, root: Path, pages: dict[str, int] | None = None) -> tuple[str, int]:
    """The report's HTML, and how many figures it holds."""
    ours = headline_table(profile, root)
    if ours is None:
        raise ReportError(
            f"no results under profile {profile!r}; run 'python -m qkov_lib reproduce --profile {profile}'"
        )
    commit = git_commit() or "unknown"
    cff = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    first = article(html_dir, "summary")
    for table in first.select("table.qkov-summary"):
        table.replace_with(BeautifulSoup(SEE_RESULTS, "html.parser"))
    found = figures(html_dir, [n for n in chapter_names() if n not in ("summary", "scorecard")])
    body = [
        title_page(cff, replication(ours["verdict"]), ours, profile, commit, summary.code_mark(root, profile)),
        contents(pages),
        section(1, SECTIONS[0], str(first)),
        section(2, SECTIONS[1], results_html(ours, profile, headline_table(OFFICIAL, root))),
        section(3, SECTIONS[2], figures_html(found)),
        section(4, SECTIONS[3], str(article(html_dir, "deviations"))),
        section(5, SECTIONS[4], str(article(html_dir, "errata"))),
        section(6, SECTIONS[5], rerun_html(profile, commit)),
        section(7, SECTIONS[6], str(article(html_dir, "references"))),
    ]
    return document(body, mathjax_scripts(html_dir)), len(found)


def mathjax_scripts(html_dir: Path) -> str:
    """The book's MathJax 2 (its configuration and its loader, from the summary page), addressed from the root."""
    page = BeautifulSoup((html_dir / page_url("summary")).read_text(encoding="utf-8"), "html.parser")
    scripts = [s for s in page.find_all("script") if "mathjax" in (str(s.get("src", "")) + s.get_text()).lower()]
    for script in scripts:
        if script.get("src"):
            script["src"] = urljoin("http://book/" + page_url("summary"), str(script["src"])).removeprefix(
                "http://book/"
            )
    return "".join(str(s) for s in scripts)


def section_pages(pdf: Path) -> dict[str, int]:
    """The page (1-based) each section's heading first stands on, after the contents page (``pdftotext``)."""
    if not shutil.which("pdftotext"):
        raise ReportError("no pdftotext to number the contents with; install it: apt-get install poppler-utils")
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    pages = text.split("\f")
    found: dict[str, int] = {}
    for i, s in enumerate(SECTIONS, 1):
        heading = re.compile(rf"^\s*{i}\. {re.escape(s)}\s*$", re.MULTILINE)
        hit = next((n for n, p in enumerate(pages[2:], 3) if heading.search(p)), None)
        if hit is not None:
            found[s] = hit
    return found


def which_profile(asked: str | None, chapters_dir: Path = BOOK_CHAPTERS) -> str:
    """The profile to report on: the one asked for (``auto`` resolved) if the built book ran under it, else the
    built book's; a mismatch is an error naming both."""
    built = book_profile(chapters_dir)
    profile = concrete_profile(asked) if asked else built
    if profile is None:
        raise ReportError("no executed summary page in book/chapters; run 'make book' first")
    if built is not None and built != profile:
        raise ParameterError(
            f"the built book is of profile {built!r}, not {profile!r}; run 'make book PROFILE={profile}' first, or "
            f"ask for --profile {built}"
        )
    return profile


def writable(pdf: Path) -> None:
    """ReportError unless a PDF can be written at ``pdf``: checked before anything is assembled or printed."""
    if pdf.is_dir():
        raise ReportError(f"{pdf} is a folder; name the PDF file with -o, like {pdf / PDF_NAME}")
    try:
        pdf.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=pdf.parent, prefix=f".{pdf.name}.", suffix=".tmp"):
            pass
        if pdf.exists() and not os.access(pdf, os.W_OK):
            raise PermissionError(errno.EACCES, "the file is read-only")
    except OSError as err:
        raise ReportError(
            f"cannot write the report to {pdf} ({err.strerror or err}); name a file in a writable folder with -o"
        ) from None


def write_report(profile: str, pdf: Path, html_dir: Path = HTML, root: Path | None = None) -> dict:
    """Build ``pdf`` from the built book of ``profile``: assemble, print, number the contents from that print and
    print again. Returns what the printer reported, with the contents' pages, the figures and the seconds it
    took."""
    start = time.monotonic()
    root = root or results_root()
    if not (html_dir / "index.html").is_file():
        raise ReportError(f"no built book in {html_dir.name}/; run 'python -m qkov_lib book' first")
    (html_dir / "_static").mkdir(exist_ok=True)
    shutil.copy(CSS, html_dir / "_static" / CSS.name)
    page, pages, ready = html_dir / REPORT_HTML, None, {}
    for _ in range(3):  # the numbers take the blanks' place, so the second print's pages are the first's
        text, n_figures = assemble(html_dir, profile, root, pages)
        page.write_text(text, encoding="utf-8")
        ready = report_print.print_pdf(page, pdf)
        found = section_pages(pdf)
        if found == pages:
            break
        pages = found
    return {**ready, "pages": pages, "figures": n_figures, "seconds": round(time.monotonic() - start, 1)}


def command(profile: str | None, output: Path | None) -> int:
    """``python -m qkov_lib report``: write the PDF and say where, its pages and how long it took; 1 on an error."""
    try:
        chosen = which_profile(profile)
        pdf = output or HTML / PDF_NAME
        writable(pdf)
        done = write_report(chosen, pdf)
    except (ReportError, report_print.PrintError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(
        f"report ({chosen}): {pdf}, {done['figures']} figures, sections on pages {done['pages']}, {done['seconds']} s"
    )
    return 0
