"""The book's chapters as the runner sees them: each chapter's module (named by the table of contents), its source,
its typed setup under a profile, the chapters a run selects and the overrides each takes.

``CHAPTERS`` and ``NOTEBOOKS_DIR`` are read at call time, so that a test can point the runner at chapters of its
own."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from .. import chapters
from ..core.chapter import ParameterError, parameters
from ..core.chapter import resolve as resolve_setup
from ..core.contents import chapter_names, run_order
from ..core.paths import NOTEBOOKS_DIR


def _chapter_module(name: str) -> ModuleType:
    """A chapter's module, ``qkov_lib.chapters.<name>``: imported by name because the table of contents, not a list
    in the code, says which chapters the book has."""
    return importlib.import_module(f"{chapters.__name__}.{name}")


CHAPTERS: dict[str, ModuleType] = {name: _chapter_module(name) for name in chapter_names()}


def chapter_module(name: str) -> ModuleType:
    """The module of a chapter of the book; ParameterError naming the chapters for an unknown one."""
    if name not in CHAPTERS:
        raise ParameterError(f"unknown chapter {name!r}; chapters: {', '.join(CHAPTERS)}")
    return CHAPTERS[name]


def source(chapter: str) -> Path:
    """The chapter's jupytext source, ``notebooks/<chapter>.md``."""
    return NOTEBOOKS_DIR / f"{chapter}.md"


def resolve(
    chapter: str, profile: str, overrides: dict[str, Any] | None = None, has_gpu: bool | None = None
) -> tuple[str, Any]:
    """(concrete profile, typed setup) of a chapter by name (``chapter.resolve``)."""
    return resolve_setup(chapter_module(chapter), profile, overrides, has_gpu)


def split_overrides(chapters: Sequence[str], pairs: Sequence[tuple[str, Any]]) -> dict[str, dict[str, Any]]:
    """Give each -p NAME VALUE to every selected chapter that has NAME; a NAME that none has, or one given twice,
    is an error."""
    out: dict[str, dict[str, Any]] = {c: {} for c in chapters}
    seen: set[str] = set()
    for name, value in pairs:
        if name in seen:
            raise ParameterError(f"parameter {name!r} is given twice in -p; give each parameter once")
        seen.add(name)
        owners = [c for c in chapters if name in parameters(chapter_module(c).Setup)]
        if not owners:
            known = sorted({k for c in chapters for k in parameters(chapter_module(c).Setup)})
            raise ParameterError(f"unknown parameter {name!r} in -p; the selected chapters take: {', '.join(known)}")
        for c in owners:
            out[c][name] = value
    return out


def select(only: Sequence[str] | None) -> list[str]:
    """Chapters in book order; ``only`` picks some of them by name (None: all; empty or repeated: an error)."""
    order = run_order(list(CHAPTERS))
    if only is None:
        return order
    if not only:
        raise ParameterError(
            "--only names no chapter; give comma-separated names (`python -m qkov_lib chapters` "
            "lists them), or leave --only out to run every chapter"
        )
    for i, name in enumerate(only):
        chapter_module(name)
        if name in only[:i]:
            raise ParameterError(f"chapter {name!r} is named twice in --only; name each chapter once")
    return [c for c in order if c in only]
