"""The book's MyST references as plain Markdown, for a reader of a chapter outside the book (JupyterLab, plain
papermill), where no Sphinx resolves them: jupyterlab-myst shows ``{cite:p}`` and ``{numref}`` as warning markers,
links ``{term}`` to "#" and ``{doc}`` to a file that does not exist. Each becomes what a reader can use there:

- ``{term}`MRTA``` the word itself (the glossary is a page of the book);
- ``{doc}`lemma3``` a link to the chapter's source, which JupyterLab opens (``[Lemma 3 ...](lemma3.md)``), and
  ``{doc}`../deviations``` one to the book page's source (``../book/deviations.md``), titled by its first heading;
- ``{numref}`fig-fig4-trajectories``` "the figure above" or "the figure below", where it is on the page;
- ``{cite:p}`petzold1983lsoda``` "(Petzold, 1983)", ``{cite:t}`` "Petzold (1983)", from ``book/references.bib``.

The book renders the same sources with every reference resolved; nothing here is used in its build."""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import cache
from pathlib import Path

from ..core.paths import BOOK_CHAPTERS, NOTEBOOKS_DIR, REPO_ROOT
from ..core.results import in_runner

BIBLIOGRAPHY = REPO_ROOT / "book" / "references.bib"
ROLE = re.compile(r"\{(term|doc|numref|cite:p|cite:t)\}`([^`]+)`")
_TITLED = re.compile(r"^(.*?)\s*<([^<>]+)>$")  # "shown text <target>"
_ENTRY = re.compile(r"@\w+\{([^,\s]+),(.*?)\n\}", re.S)
_FIELD = r"\b{}\s*=\s*\{{(.*?)\}}\s*,?\s*\n"
_SENTENCE_START = re.compile(r"(?:\A|[.!?]\s+|\n\s*\n|^\s*[-*]\s+)\s*\Z", re.M)  # what precedes a sentence's start
# "the figure below, the figure below and the figure below" -> "the figures below"
_SAME_FIGURES = re.compile(r"\b([Tt])he figure (above|below)(?:, the figure \2)* and the figure \2\b")


def _titled(text: str) -> tuple[str | None, str]:
    """A role's content: (its own shown text or None, its target)."""
    match = _TITLED.match(text.strip())
    return (match.group(1), match.group(2)) if match else (None, text.strip())


@cache
def _bibliography() -> dict[str, tuple[list[str], str]]:
    """Each entry of ``book/references.bib``: (the authors' surnames, the year)."""
    found = {}
    for key, body in _ENTRY.findall(BIBLIOGRAPHY.read_text(encoding="utf-8")):
        author = re.search(_FIELD.format("author"), body, re.S)
        year = re.search(_FIELD.format("year"), body, re.S)
        names = [" ".join(a.split()) for a in re.split(r"\s+and\s+", author.group(1))] if author else []
        surnames = [_surname(n) for n in names]
        found[key] = (surnames, year.group(1) if year else "n.d.")
    return found


def _surname(name: str) -> str:
    """'Petzold, Linda' or 'Linda Petzold' -> 'Petzold'; a braced name ('{The authors of ...}') whole."""
    if name.startswith("{") and name.endswith("}"):
        return name[1:-1].strip("{}")
    return name.split(",")[0].strip() if "," in name else name.split()[-1]


def _authors(surnames: list[str]) -> str:
    if len(surnames) > 2:
        return f"{surnames[0]} et al."
    return " and ".join(surnames) or "Anonymous"


def citation(keys: str, textual: bool = False) -> str:
    """``{cite:p}`` (``textual``: ``{cite:t}``) of the comma-separated ``keys``, in author-year words."""
    bib = _bibliography()
    parts = []
    for key in (k.strip() for k in keys.split(",")):
        surnames, year = bib.get(key, ([key], ""))
        parts.append(f"{_authors(surnames)} ({year})" if textual else f"{_authors(surnames)}, {year}")
    return "; ".join(parts) if textual else f"({'; '.join(parts)})"


@cache
def _heading(path: Path) -> str:
    """The first level-one heading of a Markdown source, or its name."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def document_link(target: str, shown: str | None = None) -> str:
    """``{doc}`target``` (relative to the book's chapters) as a Markdown link to its source, relative to the
    chapters' sources (``notebooks/``); plain text when there is no such source."""
    page = (BOOK_CHAPTERS / target).resolve()
    source = NOTEBOOKS_DIR / f"{page.name}.md" if page.parent == BOOK_CHAPTERS else page.with_suffix(".md")
    if not source.exists():
        return shown or target
    relative = Path(*[".."] * (len(NOTEBOOKS_DIR.relative_to(REPO_ROOT).parts))) / source.relative_to(REPO_ROOT)
    link = source.name if source.parent == NOTEBOOKS_DIR else relative.as_posix()
    return f"[{shown or _heading(source)}]({link})"


def plain_parts(text: str, figures_above: Collection[str] = ()) -> tuple[str, list[tuple[str, str]]]:
    """``text`` (MyST) with every book reference as plain Markdown, and each (plain words, the role they replace)
    in order; ``figures_above``: the names (``fig-...``) of the figures shown before it on the page."""
    parts: list[tuple[str, str]] = []

    def one(match: re.Match) -> str:
        role, content = match.groups()
        shown, target = _titled(content)
        if role == "term":
            words = shown or target
        elif role == "doc":
            words = document_link(target, shown)
        elif role == "numref":
            where = "the figure above" if target in figures_above else "the figure below"
            words = shown.replace("%s", "").strip() if shown else where
            if _SENTENCE_START.search(text[: match.start()]):
                words = words[:1].upper() + words[1:]
        else:
            words = citation(target, textual=role == "cite:t")
        parts.append((words, match.group(0)))
        return words

    return _SAME_FIGURES.sub(lambda m: f"{m[1]}he figures {m[2]}", ROLE.sub(one, text)), parts


def plain(text: str, figures_above: Collection[str] = ()) -> str:
    """``text`` (MyST) with every book reference as plain Markdown (``plain_parts``)."""
    return plain_parts(text, figures_above)[0]


def restore(text: str, parts: list[tuple[str, str]]) -> str:
    """The MyST of ``text``, a reader's edit of ``plain_parts``' words: each of ``parts``' plain words still there
    (searched in order, each after the last found) becomes its role again; words the reader changed stay as
    written."""
    out, at = [], 0
    for words, role in parts:
        found = text.find(words, at)
        if found < 0:
            continue
        out += [text[at:found], role]
        at = found + len(words)
    return "".join(out) + text[at:]


def page_href(page: str, anchor: str = "") -> str:
    """A link to a chapter from an HTML output: its page in the book (``<page>.html#<anchor>``), its source outside
    it (``<page>.md``, which JupyterLab opens)."""
    if in_runner():
        return f"{page}.html" + (f"#{anchor}" if anchor else "")
    return f"{page}.md"
