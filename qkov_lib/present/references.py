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

import difflib
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


Segment = tuple[str, str]  # (the words a reader sees, the MyST they stand for): the same outside references


def segments(text: str, figures_above: Collection[str] = ()) -> list[Segment]:
    """``text`` (MyST) cut into what a reader sees outside the book and what each piece stands for: the text
    between references as it is, each reference as plain words (``plain``); a run of references to figures on the
    same side merged into one piece ("the figures above"). ``figures_above``: the names (``fig-...``) of the
    figures shown before it on the page."""
    found: list[Segment] = []
    at = 0
    for match in ROLE.finditer(text):
        if match.start() > at:
            found.append((text[at : match.start()],) * 2)
        found.append((_words(match, text, figures_above), match.group(0)))
        at = match.end()
    if at < len(text):
        found.append((text[at:],) * 2)
    return _ordinals(_merged_figures(found), figures_above)


def _words(match: re.Match, text: str, figures_above: Collection[str]) -> str:
    """One reference's plain words."""
    role, content = match.groups()
    shown, target = _titled(content)
    if role == "term":
        return shown or target
    if role == "doc":
        return document_link(target, shown)
    if role == "numref":
        where = "the figure above" if target in figures_above else "the figure below"
        words = shown.replace("%s", "").strip() if shown else where
        return words[:1].upper() + words[1:] if _SENTENCE_START.search(text[: match.start()]) else words
    return citation(target, textual=role == "cite:t")


def _merged_figures(found: list[Segment]) -> list[Segment]:
    """``found`` with each run "the figure above, the figure above and the figure above" as one piece."""
    shown = "".join(s for s, _ in found)
    starts = [0]
    for piece, _ in found:
        starts.append(starts[-1] + len(piece))
    for match in reversed(list(_SAME_FIGURES.finditer(shown))):  # from the end: earlier pieces keep their places
        first = max(k for k in range(len(found)) if starts[k] <= match.start())
        last = max(k for k in range(len(found)) if starts[k] < match.end())
        words = shown[starts[first] : match.start()] + f"{match[1]}he figures {match[2]}"
        words += shown[match.end() : starts[last + 1]]
        found[first : last + 1] = [(words, "".join(source for _, source in found[first : last + 1]))]
    return found


ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
_ONE_FIGURE = re.compile(r"\A([Tt])he figure (above|below)\Z")


def _ordinals(found: list[Segment], figures_above: Collection[str]) -> list[Segment]:
    """``found`` with the single figures of one side told apart where the text names several on it: "the first
    figure below", "the second figure below" (above: in the page's order, ``figures_above``; below: in the text's),
    never two different figures under the same words."""
    single = {
        k: (m, ROLE.fullmatch(source)) for k, (words, source) in enumerate(found) if (m := _ONE_FIGURE.match(words))
    }
    targets: dict[str, list[str]] = {"above": [], "below": []}
    for m, role in single.values():
        if role is not None and (target := _titled(role.group(2))[1]) not in targets[m[2]]:
            targets[m[2]].append(target)
    order = {t: i for i, t in enumerate(figures_above)}
    targets["above"].sort(key=lambda t: order.get(t, len(order)))
    for k, (m, role) in single.items():
        side = targets[m[2]]
        if role is not None and len(side) > 1:
            nth = ORDINALS[side.index(_titled(role.group(2))[1])] if len(side) <= len(ORDINALS) else "next"
            found[k] = (f"{m[1]}he {nth} figure {m[2]}", found[k][1])
    return found


def plain_parts(text: str, figures_above: Collection[str] = ()) -> tuple[str, list[tuple[str, str]]]:
    """``text`` (MyST) with every book reference as plain Markdown, and each (plain words, the MyST they replace)
    in order (``segments``)."""
    found = segments(text, figures_above)
    return "".join(s for s, _ in found), [(s, source) for s, source in found if s != source]


def plain(text: str, figures_above: Collection[str] = ()) -> str:
    """``text`` (MyST) with every book reference as plain Markdown (``plain_parts``)."""
    return plain_parts(text, figures_above)[0]


def merge_edit(source: str, figures_above: Collection[str], edited: str) -> tuple[str, list[str]]:
    """The MyST of a reader's edit of ``source``'s plain view (``segments``), and the references it lost: a
    three-way merge of the source, the view as it was shown and the view as edited. The reader's text is kept as
    written; each reference whose words the edit left untouched, where they stand in the view, is its MyST again;
    one whose words the edit changed stays as the reader's words (returned, so that the loss is said; one deleted
    whole is gone, as the reader wished). Words the reader typed that read like a reference stay words."""
    found = segments(source, figures_above)
    shown = "".join(s for s, _ in found)
    if edited == shown:
        return source, []
    opcodes = difflib.SequenceMatcher(None, shown, edited, autojunk=False).get_opcodes()
    same = [(i1, i2, j1) for tag, i1, i2, j1, _ in opcodes if tag == "equal"]
    gone = [(i1, i2) for tag, i1, i2, _, _ in opcodes if tag == "delete"]
    out, at, start, lost = [], 0, 0, []
    for words, myst in found:
        end = start + len(words)
        if words != myst:
            block = next((b for b in same if b[0] <= start and end <= b[1]), None)
            if block is not None:
                where = block[2] + start - block[0]
                out += [edited[at:where], myst]
                at = where + len(words)
            elif not any(i1 <= start and end <= i2 for i1, i2 in gone):  # one deleted whole is no loss
                lost.append(myst)
        start = end
    return "".join(out) + edited[at:], lost


def page_href(page: str, anchor: str = "") -> str:
    """A link to a chapter from an HTML output: its page in the book (``<page>.html#<anchor>``), its source outside
    it (``<page>.md``, which JupyterLab opens)."""
    if in_runner():
        return f"{page}.html" + (f"#{anchor}" if anchor else "")
    return f"{page}.md"
