"""The book's table of contents as the list of chapters: their names in book order (``_toc.yml``) and their titles
(each chapter source's first heading). A new chapter is its notebook, its module ``qkov_lib/chapters/<name>.py``,
and its lines in ``_toc.yml`` and ``book/intro.md``; nothing else lists it."""

from __future__ import annotations

from pathlib import Path

import yaml

from .paths import NOTEBOOKS_DIR, TOC

CHAPTER_PAGES = "book/chapters/"  # where the executed chapters sit in the book; their sources are notebooks/*.md
GATHERERS = ("summary", "scorecard")  # the pages built from the other chapters' results: they run last


def chapter_names(toc: Path = TOC) -> list[str]:
    """Every chapter in the order of the table of contents (the root page first when it is a chapter)."""
    data = yaml.safe_load(toc.read_text(encoding="utf-8"))
    files = [data["root"]] + [c["file"] for part in data.get("parts", []) for c in part["chapters"]]
    return [f.removeprefix(CHAPTER_PAGES) for f in files if f.startswith(CHAPTER_PAGES)]


def run_order(names: list[str]) -> list[str]:
    """The chapters in the order they run: the book's order, the gatherers last."""
    return [n for n in names if n not in GATHERERS] + [n for n in names if n in GATHERERS]


def title(name: str, notebooks: Path = NOTEBOOKS_DIR) -> str:
    """A chapter's title: the first level-1 heading of its source."""
    path = notebooks / f"{name}.md"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ValueError(f"no chapter source {path.name} in {notebooks}") from None
    return next((line[2:].strip() for line in lines if line.startswith("# ")), name)
