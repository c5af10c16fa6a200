"""Every chapter's parameters cell says where its values live: the modules its comment names are exactly the modules
whose classes declare the fields of the chapter's setup (each field to the class of its ``Setup.__mro__`` whose own
annotations declare it), and a class named in brackets beside a module is one of those that declare them there."""

from __future__ import annotations

import dataclasses
import inspect
import re

import jupytext
import pytest

from qkov_lib.core.contents import chapter_names
from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.runner.catalog import CHAPTERS

NAMED = re.compile(r"(qkov_lib/[\w/]+\.py)(?: \(([\w, ]+)\))?")  # a module, optionally its classes in brackets


def declaring(setup: type) -> dict[str, set[str]]:
    """Module path -> the classes in it that declare a parameter of ``setup`` (a field set at construction)."""
    out: dict[str, set[str]] = {}
    for f in dataclasses.fields(setup):
        if not f.init:  # a field that is no parameter (the gathering pages' profile)
            continue
        owner = next(c for c in setup.__mro__ if f.name in inspect.get_annotations(c))
        out.setdefault(owner.__module__.replace(".", "/") + ".py", set()).add(owner.__qualname__)
    return out


def parameters_comment(name: str) -> str:
    """The comments of chapter ``name``'s parameters cell, joined into one text."""
    nb = jupytext.read(REPO_ROOT / "notebooks" / f"{name}.md")
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    return " ".join(line.split("#", 1)[1] for line in cell.source.splitlines() if "#" in line)


def named(comment: str) -> dict[str, set[str]]:
    """Module path -> the classes named in brackets beside it (empty: none named)."""
    return {m: {c.strip() for c in classes.split(",")} if classes else set() for m, classes in NAMED.findall(comment)}


@pytest.mark.parametrize("name", chapter_names())
def test_the_parameters_cell_names_every_module_where_its_values_live(name):
    declared = declaring(CHAPTERS[name].Setup)
    said = named(parameters_comment(name))
    assert set(said) == set(declared), (
        f"notebooks/{name}.md names {sorted(said)}; the fields live in {sorted(declared)}"
    )
    for module, classes in said.items():
        assert classes <= declared[module], f"notebooks/{name}.md: {module} declares {sorted(declared[module])}"


def test_a_stale_comment_is_caught():
    fig2 = declaring(CHAPTERS["fig2_dtap"].Setup)
    assert {"qkov_lib/runs/fig2_panels.py", "qkov_lib/runs/synthetic_runs.py", "qkov_lib/data/synthetic.py"} == set(
        fig2
    )
    assert fig2["qkov_lib/runs/synthetic_runs.py"] == {"SyntheticSetup", "SyntheticTask"}
    old = named(" smoke | default | paper | official | auto; values live in qkov_lib/chapters/fig2_dtap.py")
    assert set(old) != set(fig2)  # the comment the chapter once had names one module of three
    assert named("in qkov_lib/data/synthetic.py (SyntheticConfig) and qkov_lib/x.py") == {
        "qkov_lib/data/synthetic.py": {"SyntheticConfig"},
        "qkov_lib/x.py": set(),
    }
    assert declaring(CHAPTERS["scorecard"].Setup) == {}  # its profile is no parameter: nothing to name
