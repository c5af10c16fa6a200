"""ARCHITECTURE.md kept true: the library's layers (each module imports only from its own layer or the ones below),
no import cycles, no import inside a function without a stated reason, every chapter run through one signature (the
worked example of a new chapter, run through the runner, is tests/integration/test_new_chapter.py)."""

import ast
import inspect
import re
from pathlib import Path

import yaml

from qkov_lib.core.contents import GATHERERS, run_order
from qkov_lib.core.paths import PACKAGE_DIR, REPO_ROOT
from qkov_lib.runner.catalog import CHAPTERS

LAYERS = {  # ARCHITECTURE.md's table, top down: a folder of the package -> its layer (0 = the core)
    "__main__": 6,
    "runner": 5,
    "chapters": 4,
    "runs": 3,
    "train": 2,
    "present": 1.2,  # layer 1 in three steps: 1c, what a reader sees,
    "metrics": 1.1,  # 1b, the measures and the verdicts on them,
    "models": 1.0,  # 1a, the models, the data and the theory, which import nothing of layer 1's but their own
    "data": 1.0,
    "theory": 1.0,
    "core": 0,
    "__init__": 0,
}


def _module_name(path: Path) -> str:
    """``theory/dynamics.py`` -> ``theory.dynamics``; ``theory/__init__.py`` -> ``theory``; ``__init__.py`` ->
    ``__init__``."""
    parts = list(path.relative_to(PACKAGE_DIR).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _is_module(dotted: str) -> bool:
    path = PACKAGE_DIR.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(path: Path):
    """(node, the library modules it imports) for every relative import of a file, at any depth."""
    inside = list(path.relative_to(PACKAGE_DIR).parts[:-1])  # the file's package
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = inside[: len(inside) - node.level + 1]
            target = ".".join(base + (node.module.split(".") if node.module else []))
            names = [f"{target}.{a.name}".lstrip(".") for a in node.names]
            found = [n for n in names if _is_module(n)]  # "from . import fig2_dtap", "from .data import squad"
            yield node, found if found else [target or "__init__"]


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        graph[_module_name(path)] = {m for _, mods in _imports(path) for m in mods}
    return graph


def test_imports_point_down_the_layers():
    upward = []
    for own, targets in _graph().items():
        assert own.split(".")[0] in LAYERS, f"{own} is in no folder of ARCHITECTURE.md's layers"
        for target in targets:
            if LAYERS[target.split(".")[0]] > LAYERS[own.split(".")[0]]:
                upward.append(f"{own} -> {target}")
    assert upward == []


def test_the_layers_are_folders_and_architecture_md_lists_them():
    loose = sorted(p.name for p in PACKAGE_DIR.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert loose == [], f"modules outside the layer folders: {loose}"
    folders = {p.name for p in PACKAGE_DIR.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(LAYERS) - {"__init__", "__main__"}
    rows = re.findall(r"^\| (\d)([abc]?) \| `(\w+)/`", (REPO_ROOT / "ARCHITECTURE.md").read_text(), re.M)
    documented = {
        folder: int(layer) + (ord(step) - ord("a")) / 10 if step else int(layer) for layer, step, folder in rows
    }
    assert documented == {f: LAYERS[f] for f in folders}


def test_the_unit_tests_mirror_the_package():
    """tests/unit/<folder>/ for a folder of the package, and nothing else there; the other tests are end to end
    (tests/integration/), book-level (tests/book/) or check the repository itself (tests/project/)."""
    tests = REPO_ROOT / "tests"
    unit = {p.name for p in (tests / "unit").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert unit and unit <= set(LAYERS), f"tests/unit/ folders that are no folder of the package: {unit - set(LAYERS)}"
    stray = sorted(
        p.relative_to(tests).as_posix()
        for p in tests.rglob("test_*.py")
        if p.parent.relative_to(tests).parts[:1] not in (("unit",), ("integration",), ("book",), ("project",))
        or p.parent == tests / "unit"
    )
    assert stray == [], f"tests outside unit/<folder>/, integration/, book/ and project/: {stray}"


def test_no_import_cycles():
    graph, state, cycles = _graph(), {}, []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(trail[trail.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_imports_inside_functions_state_their_reason():
    """An import inside a function is allowed only with a comment on its line saying why (an optional, heavy or
    platform-specific dependency)."""
    silent = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)) and "#" not in lines[inner.lineno - 1]:
                        silent.append(f"{path.relative_to(PACKAGE_DIR)}:{inner.lineno}")
    assert silent == []


def test_table_of_contents_modules_and_sources_agree():
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]
    in_toc = [f.removeprefix("book/chapters/") for f in files if f.startswith("book/chapters/")]
    assert sorted(in_toc) == sorted(CHAPTERS)
    assert sorted(p.stem for p in (REPO_ROOT / "notebooks").glob("*.md")) == sorted(CHAPTERS)
    modules = [p.stem for p in (PACKAGE_DIR / "chapters").glob("*.py") if p.stem != "__init__"]
    packages = [p.name for p in (PACKAGE_DIR / "chapters").iterdir() if (p / "__init__.py").is_file()]
    shared = "beside"  # what pages and the summary share beside the authors' numbers: no chapter (ARCHITECTURE.md)
    init = ast.parse((PACKAGE_DIR / "chapters" / shared / "__init__.py").read_text())
    assert not [n for n in ast.walk(init) if isinstance(n, (ast.Import, ast.ImportFrom))]  # a page reads one module
    assert sorted(modules + [p for p in packages if p != shared]) == sorted(
        CHAPTERS
    )  # a module or, when large, a package
    intro = (REPO_ROOT / "book" / "intro.md").read_text()
    assert set(re.findall(r"\{doc\}`chapters/(\w+)`", intro)) == set(CHAPTERS)
    assert all((REPO_ROOT / f"{f}.md").exists() for f in files if not f.startswith("book/chapters/"))
    order = run_order(list(CHAPTERS))
    assert order[-len(GATHERERS) :] == [n for n in in_toc if n in GATHERERS]  # shown where the toc says, run last


SIGNATURE = [
    ("setup", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty),
    ("device", inspect.Parameter.KEYWORD_ONLY, None),
    ("progress", inspect.Parameter.KEYWORD_ONLY, True),
]


def _signature(run) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(run).parameters.values()]


def test_every_chapter_runs_through_one_signature():
    """Every chapter of the table of contents computes through ``run(setup, *, device=None, progress=True)``, so that
    the notebooks and the runner call every chapter alike."""
    odd = {
        name: _signature(m.run) if hasattr(m, "run") else "no run"
        for name, m in CHAPTERS.items()
        if not hasattr(m, "run") or _signature(m.run) != SIGNATURE
    }
    assert odd == {}


def test_every_code_cell_says_what_the_page_shows_of_it():
    """A chapter page shows results, not code: every code cell of a chapter's notebook is tagged to hide its code
    (remove-input, or hide-input to fold it), or the whole cell (remove-cell), or is the parameters cell."""
    shown = []
    for name in CHAPTERS:
        text = (REPO_ROOT / "notebooks" / f"{name}.md").read_text()
        for i, cell in enumerate(re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", text, re.S)):
            tags = re.search(r"^:?tags: \[(.*)\]", cell, re.M)  # the `:tags:` or the YAML form
            tags = {t.strip() for t in tags.group(1).split(",")} if tags else set()
            if not tags & {"remove-input", "remove-cell", "hide-input", "parameters"}:
                shown.append(f"{name}: code cell {i + 1} ({cell.strip().splitlines()[0][:50]!r})")
    assert not shown, "code cells the page would show:\n" + "\n".join(shown)


# an HTML element in a string, an element of a page; plotly's own label markup (<br>, <sub>, <b>, <extra>) and the
# decoder's special tokens (<q>, <a>, <eos>) are not
ELEMENT = re.compile(
    r"<(?:/?(?:p|div|span|table|thead|tbody|tr|td|th|code|strong|em|ul|ol|li|h[1-6]|pre|details|summary|header|"
    r"section|nav|main|title|html|body|head|figure|figcaption|script|link|meta)\b|a\s|/a>)",
)


def _html_in(path: Path) -> list[int]:
    """The lines of ``path`` whose string literals (docstrings aside) hold an HTML element, or that import
    ``html`` (escaping) or IPython's ``HTML``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    lines = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and ELEMENT.search(node.value)
    ]
    lines += [
        node.lineno
        for node in ast.walk(tree)
        if (isinstance(node, ast.Import) and any(a.name == "html" for a in node.names))
        or (
            isinstance(node, ast.ImportFrom)
            and node.module == "IPython.display"
            and any(a.name == "HTML" for a in node.names)
        )
    ]
    return sorted(set(lines))


def test_html_is_built_only_where_a_reader_sees_it():
    """ARCHITECTURE.md: HTML is built in present/ alone: the computing layers, core/, the chapters and the runner
    hand it numbers, words and tables (the runner's report and the site included: ``present.report_page``,
    ``present.site_html``)."""
    found = {
        p.relative_to(PACKAGE_DIR).as_posix(): lines
        for p in sorted(PACKAGE_DIR.rglob("*.py"))
        if p.relative_to(PACKAGE_DIR).parts[0] != "present" and (lines := _html_in(p))
    }
    assert found == {}, f"HTML built outside present/ (file: lines): {found}"


def test_the_html_check_finds_html():
    """The check above sees an element in an f-string, an escape and a link, and lets plotly's labels be."""
    assert ELEMENT.search('<p class="x">') and ELEMENT.search('<a href="u">') and ELEMENT.search("</td>")
    assert not ELEMENT.search("μ<sub>OV</sub><br>") and not ELEMENT.search("<a>") and not ELEMENT.search("<eos>")


def test_the_measures_and_verdicts_never_read_results_from_disk():
    """ARCHITECTURE.md: ``metrics/`` decides on tables it is given; reading a unit of results is ``runs/`` and above
    (``runs.official_read``: the official run a page sets beside its own)."""
    readers = sorted(
        p.relative_to(PACKAGE_DIR).as_posix()
        for p in (PACKAGE_DIR / "metrics").rglob("*.py")
        if any(m == "core.results" for _, mods in _imports(p) for m in mods)
    )
    assert readers == []
