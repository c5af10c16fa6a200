"""Shared fixtures: one smoke run of every chapter, executed into a temporary book tree, on the tests' own tiny
real-data fixtures (so the tests need no dataset copies); and the tiers, which the folders decide. ``unit/<folder>/``
mirrors ``qkov_lib/<folder>/`` (a module's tests sit under its layer's folder) and, with ``project/`` (the checks of
the repository itself: layers, workflow, Binder, Colab), is the fast tier: no chapter run through papermill, no book,
no browser, no Dask cluster. ``integration/`` (the runner end to end on tiny chapters, the portable mode's fresh
interpreters, the Dask sweep, the slow single checks) and ``book/`` (the chapters run through papermill, the strict
build, the browsers) are marked ``slow``, left out by ``make test-fast`` (``pytest -m "not slow"``)."""

import os
import shutil
import sys
from pathlib import Path

import pytest

from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.data import DATA_ENV
from qkov_lib.runner.reproduce import reproduce

TESTS = Path(__file__).parent  # tests/: its helper modules (fake_data, fake_chapters) import from here
sys.path.insert(0, str(TESTS))
from fake_data import write_all_offline  # noqa: E402

os.environ["QKOV_RESULTS_URL"] = ""  # the tests never start from a published site but the ones they serve themselves


TEST_REPOSITORY = "https://github.com/example-owner/qkov-companion"


@pytest.fixture(scope="session")
def fake_data_dir(tmp_path_factory) -> Path:
    """Tiny HateXplain and SVA copies in the offline layout, named by $QKOV_DATA_DIR for the whole session."""
    root = write_all_offline(tmp_path_factory.mktemp("data"))
    patch = pytest.MonkeyPatch()
    patch.setenv(DATA_ENV, str(root))
    yield root
    patch.undo()


@pytest.fixture(scope="session")
def smoke_book(tmp_path_factory, fake_data_dir) -> Path:
    """A copy of the book's sources with every chapter run under the smoke profile; results under data/results."""
    root = tmp_path_factory.mktemp("book")
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(REPO_ROOT / name, root / name)
    shutil.copytree(REPO_ROOT / "book", root / "book", ignore=shutil.ignore_patterns("chapters", "plotly.min.js"))
    summary = reproduce("smoke", out_dir=root / "book" / "chapters", results_root=root / "data" / "results")
    assert summary.failures == [] and summary.no_data == []
    return root


@pytest.fixture(scope="session")
def built_book(smoke_book) -> Path:
    """The smoke book rendered strictly (warnings are errors), naming a repository (so the pages carry its link and
    the chapters' launch links); returns the HTML folder."""
    from qkov_lib.runner.book import build_book

    return build_book(root=smoke_book, repo_url=TEST_REPOSITORY).parent


SLOW_FOLDERS = {"integration", "book"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under integration/ and book/ ``slow``: the folder alone decides the tier."""
    for item in items:
        if item.path.relative_to(TESTS).parts[0] in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)
