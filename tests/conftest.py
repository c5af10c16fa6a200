"""Shared fixtures: one smoke run of every chapter, executed into a temporary book tree."""
import shutil
from pathlib import Path

import pytest

from qkov_lib.reproduce import reproduce
from qkov_lib.results import REPO_ROOT


@pytest.fixture(scope="session")
def smoke_book(tmp_path_factory) -> Path:
    """A copy of the book's sources with every chapter run under the smoke profile; results under data/results."""
    root = tmp_path_factory.mktemp("book")
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(REPO_ROOT / name, root / name)
    shutil.copytree(REPO_ROOT / "book", root / "book", ignore=shutil.ignore_patterns("chapters", "plotly.min.js"))
    failures = reproduce("smoke", out_dir=root / "book" / "chapters", results_root=root / "data" / "results")
    assert failures == []
    return root
