"""A chapter as JupyterLab shows it (``runner.lab_cells``): the cells the book hides collapsed, the book's
references plain, and saving it unedited writes the source back byte for byte."""

from __future__ import annotations

import json

import jupytext
import nbformat
import pytest

from qkov_lib.core.paths import NOTEBOOKS_DIR
from qkov_lib.runner.lab_cells import KEY, from_lab, to_lab

SOURCES = sorted(NOTEBOOKS_DIR.glob("*.md"))


def as_lab(path) -> dict:
    nb = json.loads(json.dumps(jupytext.read(path)))
    to_lab(nb)
    return nb


def saved(nb: dict) -> str:
    from_lab(nb)
    return jupytext.writes(nbformat.from_dict(nb), "md:myst")


@pytest.mark.parametrize("source", SOURCES, ids=[s.stem for s in SOURCES])
def test_an_unedited_chapter_is_saved_back_byte_for_byte(source):
    nb = as_lab(source)
    assert saved(json.loads(json.dumps(nb))) == source.read_text(encoding="utf-8")


@pytest.mark.parametrize("source", SOURCES, ids=[s.stem for s in SOURCES])
def test_every_cell_the_book_hides_is_collapsed_and_no_reference_is_left_to_jupyterlab_myst(source):
    nb = as_lab(source)
    for cell in nb["cells"]:
        tags = set(cell["metadata"].get("tags", []))
        hidden = cell["metadata"].get("jupyter", {})
        if cell["cell_type"] == "code":
            assert hidden.get("source_hidden", False) == bool(tags & {"remove-input", "remove-cell", "hide-input"})
        else:
            assert not any(role in cell["source"] for role in ("{term}`", "{doc}`", "{numref}`", "{cite:"))


def test_an_edited_markdown_cell_keeps_the_edit_and_gets_its_references_back():
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": "As {doc}`lemma3` shows, {term}`DTAP` maps."},
            {"cell_type": "code", "metadata": {"tags": ["remove-input"]}, "source": "x = 1", "outputs": []},
        ]
    }
    to_lab(nb)
    assert nb["cells"][0]["source"].startswith("As [Lemma 3") and nb["cells"][1]["metadata"]["jupyter"] == {
        "source_hidden": True
    }
    nb["cells"][0]["source"] = nb["cells"][0]["source"].replace("maps.", "maps, one per run.")
    from_lab(nb)
    assert nb["cells"][0]["source"] == "As {doc}`lemma3` shows, {term}`DTAP` maps, one per run."
    assert all(KEY not in c["metadata"] and "jupyter" not in c["metadata"] for c in nb["cells"])
