"""The worked example of ARCHITECTURE.md: a new chapter is its notebook, its module and its lines in the table of
contents and the intro, and the runner, the scorecard and the chapter list take it (run in a copy of the
repository)."""

import os
import shutil
import subprocess
import sys

from fake_chapters import HEAD

from qkov_lib.core.paths import REPO_ROOT

NEW_MODULE = '''"""A tiny chapter: the sum of two numbers, checked."""
from dataclasses import dataclass

import pandas as pd
import torch

from ..metrics.verdicts import Claim, check, claim_table


@dataclass(frozen=True, kw_only=True)
class Setup:
    """Two numbers."""

    a: int = 1  # the first (the paper's value)
    b: int = 2  # the second


PROFILES = {"smoke": dict(b=3)}


def run(setup: Setup, *, device: torch.device | None = None, progress: bool = True) -> pd.DataFrame:
    """The sum; nothing trains: device and progress are unused here."""
    return pd.DataFrame({"sum": [setup.a + setup.b]})


def claims(table: pd.DataFrame) -> pd.DataFrame:
    total = table["sum"][0]
    return claim_table([Claim("positive", "The sum is positive.", f"sum {total}", check(total > 0),
                              "holds if the sum is above 0, fails otherwise")])
'''
NEW_NOTEBOOK = (
    HEAD.replace("# A chapter for the tests", "# A tiny chapter")
    + """
```{code-cell} ipython3
:tags: [remove-input]

from qkov_lib.present.settings import begin
from qkov_lib.chapters import tiny

ch = begin(tiny, profile, overrides)
table = tiny.run(ch.setup)
ch.save({"main": table, "claims": tiny.claims(table)})
```
"""
)


def test_a_new_chapter_is_its_notebook_its_module_and_two_lines(tmp_path):
    """The worked example of ARCHITECTURE.md: in a copy of the repository, a new chapter touches four files (two new,
    a line in the table of contents and in the intro) and the runner, the scorecard and the checks above take it."""
    root = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "qkov_lib", root / "qkov_lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO_ROOT / "notebooks", root / "notebooks")
    shutil.copytree(REPO_ROOT / "book", root / "book", ignore=shutil.ignore_patterns("chapters", "_static"))
    for name in ("_toc.yml", "_config.yml"):
        shutil.copy(REPO_ROOT / name, root / name)
    before = {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    (root / "qkov_lib" / "chapters" / "tiny.py").write_text(NEW_MODULE)
    (root / "notebooks" / "tiny.md").write_text(NEW_NOTEBOOK)
    toc = (root / "_toc.yml").read_text()
    (root / "_toc.yml").write_text(
        toc.replace(
            "      - file: book/chapters/errata\n",
            "      - file: book/chapters/errata\n      - file: book/chapters/tiny\n",
        )
    )
    intro = root / "book" / "intro.md"
    intro.write_text(intro.read_text() + "- {doc}`chapters/tiny`: a tiny chapter.\n")
    after = {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    touched = sorted(str(p) for p in after if before.get(p) != after[p])
    assert touched == ["_toc.yml", "book/intro.md", "notebooks/tiny.md", "qkov_lib/chapters/tiny.py"]
    env = {**os.environ, "PYTHONPATH": str(root), "QKOV_PROGRESS": "0"}
    run = [
        sys.executable,
        "-m",
        "qkov_lib",
        "reproduce",
        "--profile",
        "smoke",
        "--only",
        "tiny,scorecard",
        "--out",
        str(root / "book" / "chapters"),
        "--results",
        str(root / "results"),
    ]
    proc = subprocess.run(run, capture_output=True, text=True, env=env, cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    listed = subprocess.run(
        [sys.executable, "-m", "qkov_lib", "chapters"], capture_output=True, text=True, env=env, cwd=root
    )
    assert "tiny                         A tiny chapter" in listed.stdout
    scorecard = (root / "results" / "smoke" / "scorecard.csv").read_text()
    assert "tiny,A tiny chapter,positive,The sum is positive.,paper,sum 4,holds," in scorecard
