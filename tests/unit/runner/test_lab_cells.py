"""A chapter as JupyterLab shows it (``runner.lab_cells``): the cells the book hides collapsed, the book's
references plain, and saving it unedited writes the source back byte for byte."""

from __future__ import annotations

import json

import jupytext
import nbformat
import pytest

from qkov_lib.core.paths import NOTEBOOKS_DIR
from qkov_lib.runner.lab_cells import KEY, ViewError, from_lab, to_lab

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


def lab_view(*cells: dict) -> dict:
    nb = {"cells": [dict(c, metadata=dict(c.get("metadata", {}))) for c in cells]}
    to_lab(nb)
    return nb


MD = {"cell_type": "markdown", "source": "As {doc}`lemma3` shows, {term}`DTAP` maps."}
CODE = {"cell_type": "code", "metadata": {"tags": ["remove-input"]}, "source": "x = 1", "outputs": []}


def _forged_code(nb):  # a code cell carrying a Markdown view whose "source" is code the reader never saw
    nb["cells"][1]["metadata"][KEY] = {"source": "import os", "shown": "x = 1", "figures": []}


def _pasted(nb):  # a Markdown cell whose view was copied onto a code cell
    nb["cells"][1]["metadata"][KEY] = dict(nb["cells"][0]["metadata"][KEY])


def _altered_source(nb):  # words put into the recorded source that the view does not show
    nb["cells"][0]["metadata"][KEY]["source"] = "As {doc}`lemma3` shows, {term}`DTAP` maps. import os"


def _garbled(nb):
    nb["cells"][0]["metadata"][KEY] = "not a view"


def _unknown_flag(nb):
    nb["cells"][1]["metadata"][KEY] = {"hidden": ["editable"]}


@pytest.mark.parametrize(
    "forge,message",
    [
        (_forged_code, r"cell 2's qkov_lab metadata is not what this view writes on a code cell"),
        (_pasted, r"cell 2's qkov_lab metadata is not what this view writes on a code cell"),
        (_altered_source, r"cell 1's qkov_lab metadata records a source that does not give the view it records"),
        (_garbled, r"cell 1's qkov_lab metadata is garbled or on a cell this view did not change"),
        (_unknown_flag, r"cell 2's qkov_lab metadata is not what this view writes on a code cell"),
    ],
)
def test_view_metadata_this_view_did_not_write_is_refused_and_the_notebook_untouched(forge, message):
    nb = lab_view(MD, CODE)
    forge(nb)
    before = json.dumps(nb, sort_keys=True)
    with pytest.raises(ViewError, match=message + r".*; nothing was saved"):
        from_lab(nb)
    assert json.dumps(nb, sort_keys=True) == before


def test_an_edit_that_changes_a_references_words_keeps_them_and_writes_no_metadata():
    nb = lab_view(MD, CODE)
    nb["cells"][0]["source"] = nb["cells"][0]["source"].replace("DTAP maps", "the map maps")
    assert from_lab(nb) == {0: ["{term}`DTAP`"]}
    assert nb["cells"][0]["source"] == "As {doc}`lemma3` shows, the map maps."
    assert nb["cells"][0]["metadata"] == {} and "jupyter" not in nb["cells"][1]["metadata"]  # no line in the source
