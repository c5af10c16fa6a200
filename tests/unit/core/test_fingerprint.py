"""Per-chapter code fingerprints (qkov_lib/core/codehash.py), on a temporary copy of the package (the real tree is never
edited): a docstring edit makes no chapter stale; a code edit makes exactly the chapters whose closure holds the
module stale; a new import edge is picked up; a dynamic import the analysis cannot follow is an error."""

from __future__ import annotations

import ast
import inspect
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from fake_chapters import TINY, tiny_book

from qkov_lib.core import codehash, results
from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.runner import catalog, fingerprint as fingerprints, units

NOTEBOOKS = {p.stem: p for p in sorted((REPO_ROOT / "notebooks").glob("*.md"))}
ALL = sorted(NOTEBOOKS)

# The chapters an edit of each module makes stale: those whose imports reach it. The scorecard reads the atlas's
# verdicts through the atlas's module, so it follows the atlas.
EXPECTED = {
    "train/engine.py": ["atlas", "corollaries", "fig2_dtap", "fig3_incentive", "scorecard", "summary"],
    "present/plots.py": [c for c in ALL if c != "errata"],  # every chapter with a figure or computed prose
    "chapters/atlas/grid.py": ["atlas", "scorecard", "summary"],  # the summary reads the atlas through the scorecard
    "runs/sweep.py": ["atlas", "scorecard", "summary"],  # the atlas runs its sweep in its module
    "theory/symbolic.py": ["lemma3", "theorem1"],
    "chapters/errata.py": ["errata"],
    "runner/reproduce.py": [],
}


@pytest.fixture
def package(tmp_path, monkeypatch) -> Path:
    """A copy of qkov_lib under tmp_path, and codehash pointed at it."""
    copy = tmp_path / "qkov_lib"
    shutil.copytree(codehash.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(codehash, "PACKAGE_DIR", copy)
    return copy


def digests(package: Path) -> dict[str, str]:
    return {c: codehash.chapter_code(path, package).digest for c, path in NOTEBOOKS.items()}


def stale_after(package: Path, edit) -> list[str]:
    before = digests(package)
    edit()
    after = digests(package)
    return [c for c in ALL if before[c] != after[c]]


def edit_docstrings(path: Path) -> None:
    """Reword every docstring of a module (module, classes, functions), add a comment and blank lines."""
    lines = path.read_text().split("\n")
    tree = ast.parse("\n".join(lines))
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and ast.get_docstring(node, clean=False) is not None
        ):
            doc = node.body[0].value
            line = lines[doc.lineno - 1]
            quote = line.index('"""', doc.col_offset) + 3
            lines[doc.lineno - 1] = line[:quote] + "Reworded. " + line[quote:]
    path.write_text("\n".join(lines) + "\n\n# a comment that changes nothing\n")


def test_a_docstring_edit_in_any_module_makes_no_chapter_stale(package):
    modules = sorted(package.rglob("*.py"))
    assert len(modules) > 40
    assert stale_after(package, lambda: [edit_docstrings(p) for p in modules]) == []


@pytest.mark.parametrize("module", sorted(EXPECTED))
def test_a_code_edit_makes_exactly_the_chapters_that_can_run_it_stale(package, module, capsys):
    stale = stale_after(package, lambda: (package / module).write_text((package / module).read_text() + "\nEDIT = 1\n"))
    with capsys.disabled():
        print(f"\n{module}: {len(stale)} stale: {', '.join(stale) or 'none'}")
    name = "qkov_lib." + module.removesuffix(".py").replace("/", ".")
    assert stale == EXPECTED[module]
    assert stale == codehash.dependents(NOTEBOOKS, package).get(name, [])


def test_a_new_import_edge_is_picked_up(package):
    errata = package / "chapters" / "errata.py"
    errata.write_text(errata.read_text() + "\nfrom ..runs import sweep  # a new edge\n")
    assert "qkov_lib.runs.sweep" in codehash.closure(["qkov_lib.chapters.errata"], package)
    sweep = package / "runs" / "sweep.py"
    assert stale_after(package, lambda: sweep.write_text(sweep.read_text() + "\nEDIT = 1\n")) == [
        "atlas",
        "errata",
        "scorecard",
        "summary",
    ]


DYNAMIC = [
    (
        "import_module of a computed name",
        "import importlib\nimportlib.import_module('qkov_lib.' + 'plots')\n",
        "import_module",
    ),
    ("__import__", "mod = __import__(f'qkov_lib.{NAME}')\n", "__import__"),
    ("exec", "exec('from qkov_lib.present import plots')\n", "exec"),
    ("eval", "x = eval('1 + 1')\n", "eval"),
    ("a relative import_module", "import importlib\nimportlib.import_module('.plots', 'qkov_lib')\n", "import_module"),
    ("runpy", "import runpy\nrunpy.run_path('script.py')\n", "run_path"),
]


@pytest.mark.parametrize("code,name", [c[1:] for c in DYNAMIC], ids=[c[0] for c in DYNAMIC])
def test_a_dynamic_import_is_an_error_naming_file_and_line(package, code, name):
    errata = package / "chapters" / "errata.py"
    errata.write_text(errata.read_text() + "\n" + code)
    line = errata.read_text().split("\n").index(code.strip().split("\n")[-1]) + 1
    with pytest.raises(
        codehash.DynamicImport,
        match=rf"errata\.py:{line}: {name}\(\.\.\.\) runs code the "
        r"fingerprint cannot follow; use a plain import",
    ):
        codehash.chapter_code(NOTEBOOKS["errata"], package)


def test_a_notebook_running_a_file_is_an_error(tmp_path):
    notebook = tmp_path / "chapter.md"
    notebook.write_text("```{code-cell} ipython3\n%run helper.py\nfrom qkov_lib.core import results\n```\n")
    with pytest.raises(codehash.DynamicImport, match=r"chapter.md \(code cell 1\):1: run_line_magic\(\.\.\.\) runs"):
        codehash.notebook_modules(notebook)
    notebook.write_text("```{code-cell} ipython3\n%matplotlib inline\nfrom qkov_lib.core import results\n```\n")
    assert codehash.notebook_modules(notebook) == {"qkov_lib", "qkov_lib.core", "qkov_lib.core.results"}


def test_a_dynamic_import_of_a_constant_name_is_followed(package):
    errata = package / "chapters" / "errata.py"
    errata.write_text(
        errata.read_text() + "\nimport importlib\nTASK = 'qkov_lib.runs.sweep'\n"
        "importlib.import_module(TASK)\nimportlib.import_module('numpy')\n"
    )
    assert "qkov_lib.runs.sweep" in codehash.closure(["qkov_lib.chapters.errata"], package)


def test_import_forms_resolve_to_modules(tmp_path):
    """Absolute and relative imports at any depth, `from . import name` naming a submodule or not, parent packages."""
    pkg = tmp_path / "pkg"
    for name, code in {
        "__init__.py": "",
        "top.py": "X = 1\n",
        "unused.py": "",
        "a/__init__.py": "from .b import f\n",
        "a/b.py": "from ..top import X\nfrom . import c, g\n",
        "a/c.py": "from .. import deep\n",
        "a/g.py": "",
        "deep/__init__.py": "",
        "deep/d.py": "import pkg.top\n",
        "deep/e/__init__.py": "",
        "deep/e/f.py": "from ... import top\n",
        "lazy.py": "def f():\n    from .deep.e import f\n    import os.path\n",
    }.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(code)
    assert codehash.closure(["pkg.a"], pkg) == ["pkg", "pkg.a", "pkg.a.b", "pkg.a.c", "pkg.a.g", "pkg.deep", "pkg.top"]
    assert codehash.closure(["pkg.lazy"], pkg) == [
        "pkg",
        "pkg.deep",
        "pkg.deep.e",
        "pkg.deep.e.f",
        "pkg.lazy",
        "pkg.top",
    ]
    (pkg / "bad.py").write_text("from ... import top\n")
    with pytest.raises(codehash.DynamicImport, match="bad.py:1: a relative import goes above the package"):
        codehash.closure(["pkg.bad"], pkg)
    (pkg / "gone.py").write_text("from pkg.missing import x\n")
    with pytest.raises(codehash.DynamicImport, match="pkg.missing is imported but .* has no such module"):
        codehash.closure(["pkg.gone"], pkg)


def test_notebook_imports_and_versions():
    assert codehash.notebook_modules(NOTEBOOKS["errata"]) == {
        "qkov_lib",
        "qkov_lib.present",
        "qkov_lib.present.claims",
        "qkov_lib.present.settings",
        "qkov_lib.chapters",
        "qkov_lib.chapters.errata",
    }
    state = codehash.chapter_code(NOTEBOOKS["errata"])
    assert {"torch", "numpy", "scipy", "sympy", "pandas"} <= set(state.versions)
    assert "qkov_lib.runner.reproduce" not in state.modules and "qkov_lib.chapters.errata" in state.modules


def test_the_runner_names_the_changed_modules(package, tmp_path, monkeypatch):
    """A sealed unit of the tiny chapter (it imports qkov_lib.core.results): current after a docstring edit, stale naming
    the module after a code edit."""
    tiny_book(tmp_path, monkeypatch)
    folder = tmp_path / "res" / "smoke"
    fp = fingerprints.fingerprint("tiny", "smoke", {"x": 1}, folder.parent)
    (folder / "tiny.ipynb").parent.mkdir(parents=True)
    (folder / "tiny.ipynb").write_text("{}")
    results.save(folder, "tiny", {"main": pd.DataFrame({"x": [1]})}, {})
    units.seal(folder, "tiny", fp, 1.0)
    assert fingerprints.stale_reason(folder, "tiny", fp)[0] is None
    edit_docstrings(package / "core" / "results.py")
    assert (
        fingerprints.stale_reason(folder, "tiny", fingerprints.fingerprint("tiny", "smoke", {"x": 1}, folder.parent))[0]
        is None
    )
    (package / "core" / "results.py").write_text((package / "core" / "results.py").read_text() + "\nEDIT = 1\n")
    reason = fingerprints.stale_reason(
        folder, "tiny", fingerprints.fingerprint("tiny", "smoke", {"x": 1}, folder.parent)
    )[0]
    assert reason == "code (qkov_lib.core.results) changed"


def test_sweep_cells_follow_their_task_code(package):
    from qkov_lib.runs import sweep
    from qkov_lib.chapters import atlas

    folder = sweep.cell_folder("atlas", {"a": 1}, atlas.run_setting)
    edit_docstrings(package / "train" / "engine.py")
    assert sweep.cell_folder("atlas", {"a": 1}, atlas.run_setting) == folder
    (package / "train" / "engine.py").write_text((package / "train" / "engine.py").read_text() + "\nEDIT = 1\n")
    assert sweep.cell_folder("atlas", {"a": 1}, atlas.run_setting) != folder
    with pytest.raises(ValueError, match="sweep task 'stale_after' is defined in .*outside qkov_lib; define it"):
        sweep.cell_folder("atlas", {"a": 1}, stale_after)


def test_notebook_metadata_leaves_a_chapter_current_and_a_cell_edit_does_not(tmp_path, monkeypatch):
    """Opening a chapter in JupyterLab rewrites its kernelspec; that changes no fingerprint, an edited cell does."""
    notebooks = tiny_book(tmp_path, monkeypatch)
    before = fingerprints.fingerprint("tiny", "smoke", {"x": 1}, tmp_path)
    (notebooks / "tiny.md").write_text(TINY.replace("display_name: Python 3,", "display_name: Python 3 (ipykernel),"))
    assert "ipykernel" in (notebooks / "tiny.md").read_text()
    assert fingerprints.fingerprint("tiny", "smoke", {"x": 1}, tmp_path) == before
    (notebooks / "tiny.md").write_text(TINY.replace('overrides.get("x", 1)', 'overrides.get("x", 2)'))
    assert fingerprints.fingerprint("tiny", "smoke", {"x": 1}, tmp_path)["source"] != before["source"]


def test_a_page_that_sets_official_beside_its_run_follows_the_official_unit(tmp_path):
    def parts(chapter: str, profile: str) -> dict[str, str]:
        return fingerprints.fingerprint(chapter, profile, {}, results_root=tmp_path)

    (tmp_path / "official").mkdir()
    before, summary_before = parts("fig3_incentive", "smoke"), parts("summary", "smoke")
    assert "beside official" in before and "beside official" not in parts("fig3_incentive", "official")
    (tmp_path / "official" / "fig4_mu_trajectories.json").write_text("{}")  # another chapter's official unit
    assert parts("fig3_incentive", "smoke") == before
    assert parts("summary", "smoke")["beside official"] != summary_before["beside official"]  # the summary reads all
    (tmp_path / "official" / "fig3_incentive.json").write_text("{}")
    assert parts("fig3_incentive", "smoke")["beside official"] != before["beside official"]
    assert "beside official" not in parts("theorem1", "smoke")  # a page with nothing beside its run


def test_every_page_that_reads_the_official_results_declares_it():
    reads = {
        name
        for name, path in NOTEBOOKS.items()  # in the page, or in its module's run
        if re.search(
            r'official_run\(|official_unit\(|profile_tables\(.*"official"|official_html\(',
            path.read_text() + inspect.getsource(catalog.CHAPTERS[name]),
        )
    }
    declares = {name for name, module in catalog.CHAPTERS.items() if "official" in getattr(module, "BESIDE", ())}
    assert reads == declares and "summary" in reads and "fig2_dtap" in reads
