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
import html
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
from ..core.contents import chapter_names, title
from ..core.paths import BOOK_CHAPTERS, HTML, REPO_ROOT
from ..core.results import git_commit, results_root
from ..metrics.official import CODE_RULE, OFFICIAL
from ..metrics.verdicts import FAILS, HOLDS, REPLICATION_RULE, counts, replication
from ..present.claims import word
from . import report_print

PDF_NAME = "report.pdf"  # beside the book's index.html, so the published site holds it at <site>/<profile>/
REPORT_HTML = "report.html"  # written beside the book's index.html, so the book's _static and _images resolve
CSS = Path(__file__).with_name("report.css")
CHROME = ("a.headerlink", "p.qkov-launch", "button", "div.cell_input", ".toggle", "script[type='math/tex']")
SECTIONS = ("Summary", "Results", "Figures", "Deviations", "Errata", "How to rerun", "References")
PAGE_MARK = "qkov-page"  # a contents entry's page number, filled in after the first print


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


def title_page(mark: str, ours: pd.DataFrame, profile: str, commit: str, code: tuple[str | None, str]) -> str:
    """The title ([Re] or [¬Re] under the paper's text, and the paper's title), the authors, the reproduced paper,
    and each question's rule with its count: the headline claims, and the stored numbers under the authors' code
    (``code``: its mark, None before an official run, and its count)."""
    cff = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text(encoding="utf-8"))
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


def figures_html(found: Sequence[Figure]) -> str:
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


def assemble(html_dir: Path, profile: str, root: Path, pages: dict[str, int] | None = None) -> tuple[str, int]:
    """The report's HTML, and how many figures it holds."""
    ours = headline_table(profile, root)
    if ours is None:
        raise ReportError(
            f"no results under profile {profile!r}; run 'python -m qkov_lib reproduce --profile {profile}'"
        )
    commit = git_commit() or "unknown"
    first = article(html_dir, "summary")
    for table in first.select("table.qkov-summary"):
        table.replace_with(
            BeautifulSoup("<p><em>Each claim and its verdicts: see the Results.</em></p>", "html.parser")
        )
    found = figures(html_dir, [n for n in chapter_names() if n not in ("summary", "scorecard")])
    body = [
        title_page(replication(ours["verdict"]), ours, profile, commit, summary.code_mark(root, profile)),
        contents(pages),
        section(1, SECTIONS[0], str(first)),
        section(2, SECTIONS[1], results_html(ours, profile, headline_table(OFFICIAL, root))),
        section(3, SECTIONS[2], figures_html(found)),
        section(4, SECTIONS[3], str(article(html_dir, "deviations"))),
        section(5, SECTIONS[4], str(article(html_dir, "errata"))),
        section(6, SECTIONS[5], rerun_html(profile, commit)),
        section(7, SECTIONS[6], str(article(html_dir, "references"))),
    ]
    maths = mathjax_scripts(html_dir)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title('summary'))}</title>"
        '<link rel="stylesheet" href="_static/qkov.css"><link rel="stylesheet" href="_static/report.css">'
        f'{maths}<script src="_static/plotly.min.js"></script></head>'
        f'<body><main class="qkov-report">{"".join(body)}</main></body></html>\n',
        len(found),
    )


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
