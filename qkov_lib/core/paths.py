"""Every folder the companion reads or writes, relative to the checkout: the one home of the repository's paths.
Environment variables that move a folder (``QKOV_RESULTS_ROOT``, ``QKOV_DATA_DIR``, ``QKOV_CACHE_DIR``) are read
where the folder is used (``core.results``, ``data``)."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # qkov_lib/
REPO_ROOT = PACKAGE_DIR.parent
TOC = REPO_ROOT / "_toc.yml"  # the book's table of contents: which chapters exist, in order
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"  # the chapters' sources (jupytext MyST)
BOOK_CHAPTERS = REPO_ROOT / "book" / "chapters"  # the executed chapters the book renders
STORE_ROOT = REPO_ROOT / "data" / "store"  # <root>/<profile>/<chapter>/: the committed stored runs
RESULTS_ROOT = REPO_ROOT / "data" / "results"  # <root>/<profile>/<chapter>...: tidy results
CACHE_DIR = REPO_ROOT / "data" / "cache"  # downloads and derived files
HTML = REPO_ROOT / "_build" / "html"  # the rendered book
