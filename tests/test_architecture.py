"""ARCHITECTURE.md kept true: the chapter table, the table of contents, the chapter sources and the intro agree, and
every import of the library points to its own floor or a lower one (the listed exceptions aside)."""
import ast
import re

import yaml

from qkov_lib.profiles import CHAPTERS
from qkov_lib.results import PACKAGE_DIR, REPO_ROOT

FLOORS = {  # ARCHITECTURE.md's table: a top-level module or package -> its floor
    **dict.fromkeys(["__init__", "device", "progress", "validation", "optim", "results", "models", "data", "metrics",
                     "theory", "codehash"], 0),
    **dict.fromkeys(["training", "engine"], 1),
    **dict.fromkeys(["experiments", "fixed_attention", "real_data", "squad_runs", "atlas", "sweep"], 2),
    **dict.fromkeys(["claims", "plots"], 3),
    **dict.fromkeys(["profiles", "chapter"], 4),
    **dict.fromkeys(["reproduce", "book", "book_ext", "bundle", "publish", "__main__"], 5),
}
EXCEPTIONS = {("atlas", "claims"), ("claims", "profiles")}  # "Known exceptions" there


def _imports(path):
    """The top-level library modules a file imports (relative imports, at any depth of the file)."""
    tree = ast.parse(path.read_text())
    inside = path.relative_to(PACKAGE_DIR).parts
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(inside[:len(inside) - node.level])  # the package the import starts from
            target = base + (node.module.split(".") if node.module else [])
            names = [target[0]] if target else [a.name for a in node.names]  # "from . import results"
            for name in names:  # a name that is no module is an attribute of the package: its __init__
                is_module = (PACKAGE_DIR / f"{name}.py").exists() or (PACKAGE_DIR / name / "__init__.py").exists()
                yield name if is_module else "__init__"


def test_imports_point_down_the_floors():
    upward = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        own = path.relative_to(PACKAGE_DIR).parts[0].removesuffix(".py")
        for name in _imports(path):
            assert name in FLOORS, f"{path.name} imports {name}, which ARCHITECTURE.md does not place on a floor"
            if FLOORS[name] > FLOORS[own] and (own, name) not in EXCEPTIONS:
                upward.append(f"{own} -> {name}")
    assert upward == []
    assert set(FLOORS) >= {p.name.removesuffix(".py") for p in PACKAGE_DIR.iterdir()
                           if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())}


def test_table_of_contents_chapters_and_sources_agree():
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    in_toc = [f.removeprefix("book/chapters/") for f in files if f.startswith("book/chapters/")]
    assert sorted(in_toc) == sorted(CHAPTERS)
    assert in_toc[0] == "scorecard" and list(CHAPTERS)[-1] == "scorecard"  # shown first, run last
    assert sorted(p.stem for p in (REPO_ROOT / "notebooks").glob("*.md")) == sorted(CHAPTERS)
    intro = (REPO_ROOT / "book" / "intro.md").read_text()
    assert set(re.findall(r"\{doc\}`chapters/(\w+)`", intro)) == set(CHAPTERS)
    assert all((REPO_ROOT / f"{f}.md").exists() for f in files if not f.startswith("book/chapters/"))
