"""Shared fixtures: one smoke run of every chapter, executed into a temporary book tree, on the tests' own tiny
real-data fixtures (so the tests need no dataset copies); and the tiers, which the folders decide. ``unit/<folder>/``
mirrors ``qkov_lib/<folder>/`` (a module's tests sit under its layer's folder) and, with ``project/`` (the checks of
the repository itself: layers, workflow, Binder, Colab), is the fast tier: no chapter run through papermill, no book,
no browser, no Dask cluster. ``integration/`` (the runner end to end on tiny chapters, the portable mode's fresh
interpreters, the Dask sweep, the slow single checks) and ``book/`` (the chapters run through papermill, the strict
build, the browsers) are marked ``slow``, left out by ``make test-fast`` (``pytest -m "not slow"``).

``make test`` runs the tests in two processes (pytest-xdist, ``-n 2``): the session fixtures that cost minutes (the
smoke book, its strict build) are made once for the whole run, by whichever process asks first (``shared``)."""

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.data import DATA_ENV
from qkov_lib.runner.reproduce import reproduce

TESTS = Path(__file__).parent  # tests/: its helper modules (fake_data, fake_chapters) import from here
sys.path.insert(0, str(TESTS))
from fake_data import write_all_offline  # noqa: E402

os.environ["QKOV_RESULTS_URL"] = ""  # the tests never start from a published site but the ones they serve themselves


TEST_REPOSITORY = "https://github.com/example-owner/qkov-companion"


def shared(tmp_path_factory, name: str, make: Callable[[Path], object]) -> Path:
    """``<run's temporary folder>/<name>``, made by ``make`` once for the whole test run: under pytest-xdist every
    process asks, the first makes it under a lock while the others wait, and all of them read the same folder. A
    failed ``make`` leaves no mark, so the next process that asks tries again (and fails the same way)."""
    base = tmp_path_factory.getbasetemp()
    base = base.parent if "PYTEST_XDIST_WORKER" in os.environ else base  # the processes' common folder
    folder, done = base / name, base / f"{name}.done"
    with FileLock(str(base / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed attempt left
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def fake_data_dir(tmp_path_factory) -> Path:
    """Tiny HateXplain and SVA copies in the offline layout, named by $QKOV_DATA_DIR for the whole session."""
    root = shared(tmp_path_factory, "data", write_all_offline)
    patch = pytest.MonkeyPatch()
    patch.setenv(DATA_ENV, str(root))
    yield root
    patch.undo()


@pytest.fixture(scope="session")
def smoke_book(tmp_path_factory, fake_data_dir) -> Path:
    """A copy of the book's sources with every chapter run under the smoke profile; results under data/results."""
    return shared(tmp_path_factory, "book", make_smoke_book)


def make_smoke_book(root: Path) -> None:
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(REPO_ROOT / name, root / name)
    shutil.copytree(REPO_ROOT / "book", root / "book", ignore=shutil.ignore_patterns("chapters", "plotly.min.js"))
    summary = reproduce("smoke", out_dir=root / "book" / "chapters", results_root=root / "data" / "results")
    assert summary.failures == [] and summary.no_data == []


@pytest.fixture(scope="session")
def built_book(tmp_path_factory, smoke_book) -> Path:
    """The smoke book rendered strictly (warnings are errors), naming a repository (so the pages carry its link and
    the chapters' launch links); returns the HTML folder."""
    from qkov_lib.runner.book import build_book

    shared(tmp_path_factory, "built", lambda _: build_book(root=smoke_book, repo_url=TEST_REPOSITORY))
    return smoke_book / "_build" / "html"


SLOW_FOLDERS = {"integration", "book"}


# the tests that take minutes, each alone: run first, so that under pytest-xdist no process is left with one of them
# at the end while the others have finished
LONGEST = ("book/test_lab.py::test_every_chapter_reads_in_jupyterlab_as_in_the_book_before_and_after_run_all",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under integration/ and book/ ``slow``: the folder alone decides the tier. Put ``LONGEST``
    first."""
    for item in items:
        if item.path.relative_to(TESTS).parts[0] in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.nodeid.removeprefix("tests/") not in LONGEST)  # a stable sort: the rest in order
