"""``reproduce --dry-run`` (each chapter current or stale, and why; nothing runs or is written) and the time budget
(a stale chapter that would not fit is not started; the book shows its last unit, saying so). Tiny chapters only."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from fake_chapters import HEAD, TINY, tiny_book

from qkov_lib.__main__ import main
from qkov_lib.core import codehash, results
from qkov_lib.runner import execute, units
from qkov_lib.runner import plan as plan_module
from qkov_lib.runner import reproduce as runner


@pytest.fixture
def book(tmp_path, monkeypatch) -> Path:
    """Two tiny chapters, 'tiny' and 'other', registered; the tiny one run once into res/."""
    tiny_book(tmp_path, monkeypatch, ("tiny", "other"))
    assert runner.run_chapter("tiny", "smoke", {}, out_dir=tmp_path / "nb", results_root=tmp_path / "res") == "ran"
    return tmp_path


def dry_run(book: Path, capsys, *args: str) -> dict[str, tuple[str, str]]:
    """The dry run's table: chapter -> (state, reason)."""
    before = snapshot(book)
    assert (
        main(
            [
                "reproduce",
                "--profile",
                "smoke",
                "--only",
                "tiny,other",
                "--results",
                str(book / "res"),
                "--out",
                str(book / "nb"),
                "--dry-run",
                *args,
            ]
        )
        == 0
    )
    assert snapshot(book) == before  # nothing written
    lines = capsys.readouterr().out.strip().split("\n")
    assert lines[0].split() == ["chapter", "state", "last", "run", "to", "compute", "reason"]
    assert re.fullmatch(r"2 chapters: \d current, \d to run(, \d deferred)? \(no stored run to compute\)", lines[-1])
    rows = [re.match(r"(\S+)\s+(\S+)\s+(\?|[\d.]+ min)\s*(.*)", line).groups() for line in lines[1:-1]]
    return {r[0]: (r[1], r[3]) for r in rows}


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and units.LOCKS not in p.parts
    }


def test_dry_run_says_current_or_stale_and_why(book, capsys, monkeypatch):
    table = dry_run(book, capsys)
    assert table["tiny"] == ("current", "") and table["other"][0] == "stale"
    assert table["other"][1].startswith("no results for 'other'")
    assert dry_run(book, capsys, "-p", "x", "2")["tiny"] == ("stale", "parameters changed")
    assert dry_run(book, capsys, "--force")["tiny"] == ("stale", "--force")
    source = book / "notebooks" / "tiny.md"
    source.write_text(source.read_text() + "\nOne more sentence.\n")
    assert dry_run(book, capsys)["tiny"] == ("stale", "source changed")
    source.write_text(TINY)
    real, copy = codehash.PACKAGE_DIR, book / "qkov_lib"
    shutil.copytree(codehash.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(codehash, "PACKAGE_DIR", copy)
    (copy / "core" / "results.py").write_text((copy / "core" / "results.py").read_text() + "\nEDIT = 1\n")
    assert dry_run(book, capsys)["tiny"] == ("stale", "code (qkov_lib.core.results) changed")
    monkeypatch.setattr(codehash, "PACKAGE_DIR", real)
    (book / "res" / "smoke" / "tiny.csv").write_text("x\n5\n")
    state, reason = dry_run(book, capsys)["tiny"]
    assert state == "stale" and re.search(r"tiny.csv changed after it was written \(sha256 differs\)", reason)


def test_a_stale_chapter_past_the_budget_is_not_started(book, capsys):
    """tiny's last run 'took' 10 minutes: with -p x 2 and a 5-minute budget it is deferred, its page the last unit
    with a line saying so; other has no estimate and runs; the unit of tiny is untouched."""
    res, nb = book / "res", book / "nb"
    meta = results.read_meta(res / "smoke", "tiny")
    meta["runner_wall_time_s"] = 600.0
    results.write_meta(res / "smoke", "tiny", meta)
    unit = snapshot(res / "smoke")
    table = dry_run(book, capsys, "-p", "x", "2", "--budget-minutes", "5")
    assert table["tiny"] == ("deferred", "parameters changed") and table["other"][0] == "stale"
    summary = runner.reproduce("smoke", [("x", 2)], ["tiny", "other"], out_dir=nb, results_root=res, budget_minutes=5)
    assert summary.done == {"deferred": ["tiny"], "ran": ["other"]} and summary.failures == []
    assert (
        "not starting tiny (parameters changed; it should take 10.0 min, by its last run and its stored runs' "
        "compute times): the 5-minute budget would be exceeded" in capsys.readouterr().out
    )
    assert {k: v for k, v in snapshot(res / "smoke").items() if k.startswith("tiny.")} == unit
    first = nbformat.read(nb / "tiny.ipynb", as_version=4).cells[0].source
    assert "Not rerun in this build, for want of time (parameters changed)" in first
    assert "This page was run with profile `smoke`" in first
    # the next run with time to spare reruns it and the page is the new unit's
    assert runner.reproduce("smoke", [("x", 2)], ["tiny"], out_dir=nb, results_root=res).done == {"ran": ["tiny"]}
    assert "Not rerun" not in (nb / "tiny.ipynb").read_text()


def test_a_chapter_never_run_past_the_budget_gets_a_placeholder_page(book):
    """A budget of 6 ms is spent by the time tiny (current) is checked: other, never run, is not started."""
    res, nb = book / "res", book / "nb"
    summary = runner.reproduce("smoke", only=["tiny", "other"], out_dir=nb, results_root=res, budget_minutes=1e-4)
    assert summary.done == {"skipped": ["tiny"], "deferred": ["other"]}
    page = nbformat.read(nb / "other.ipynb", as_version=4)
    assert page.cells[0].source.startswith("# A chapter for the tests\n\n*Not computed yet (profile `smoke`)")
    assert not (res / "smoke" / "other.json").exists()


def test_a_bad_budget_is_one_error(book, capsys):
    assert (
        main(
            [
                "reproduce",
                "--profile",
                "smoke",
                "--only",
                "tiny",
                "--results",
                str(book / "res"),
                "--budget-minutes",
                "0",
            ]
        )
        == 2
    )
    assert "--budget-minutes 0.0 is not a positive number of minutes" in capsys.readouterr().err
    assert json.loads((book / "res" / "smoke" / "tiny.json").read_text())["parameters"] == {"x": 1}


def test_code_the_fingerprint_cannot_follow_is_one_error(book, capsys, monkeypatch):
    copy = book / "qkov_lib"
    shutil.copytree(codehash.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(codehash, "PACKAGE_DIR", copy)
    (copy / "core" / "results.py").write_text((copy / "core" / "results.py").read_text() + "\nexec('import os')\n")
    assert main(["reproduce", "--profile", "smoke", "--only", "tiny", "--results", str(book / "res"), "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "results.py:" in err and "exec(...) runs code the fingerprint cannot" in err


STOPPED = (
    HEAD
    + """
```{code-cell} ipython3
import os
from qkov_lib.core.budget import DEADLINE_ENV
from qkov_lib.runs.sweep import OutOfTime
if os.environ.get(DEADLINE_ENV):  # the runner passed its deadline: the sweep "ran out" half-way
    raise OutOfTime("the time budget ran out in the middle of the sweep: 3 of 7 cells are finished and kept")
raise ValueError("no deadline reached the chapter")
```
"""
)


def test_a_sweep_stopped_by_the_budget_is_deferred_not_failed(book):
    """Under a budget the runner passes its deadline to the chapter; a sweep that stops at it leaves the chapter
    deferred (a page saying so, the next build continues), not failed; without a budget there is no deadline."""
    (book / "notebooks" / "other.md").write_text(STOPPED)
    res, nb = book / "res", book / "nb"
    summary = runner.reproduce("smoke", only=["other"], out_dir=nb, results_root=res, budget_minutes=60)
    assert summary.failures == [] and summary.done == {"deferred": ["other"]}
    page = nbformat.read(nb / "other.ipynb", as_version=4).cells[0].source
    assert (
        "this build's time budget ran out in the middle of it: the time budget ran out in the middle of the "
        "sweep: 3 of 7 cells are finished and kept" in page
    )
    assert not (res / "smoke" / "other.json").exists() and not (res / "smoke" / "failed" / "other.ipynb").exists()
    summary = runner.reproduce("smoke", only=["other"], out_dir=nb, results_root=res)
    assert summary.done == {} and "ValueError: no deadline reached the chapter" in summary.failures[0]


WHERE = (
    HEAD
    + """
```{code-cell} ipython3
import pandas as pd
import qkov_lib
from qkov_lib.core import results
results.save(results.results_dir(profile), "other", {"main": pd.DataFrame({"file": [qkov_lib.__file__]})},
             {"profile": profile, "parameters": {"x": 1}})
```
"""
)


def test_the_kernel_imports_the_runners_own_package(book, monkeypatch):
    """A runner started from one checkout runs its chapters on that checkout's qkov_lib, not on whichever one an
    editable install points to (here: a copy of the package, which the runner names as its own)."""
    copy = book / "checkout" / "qkov_lib"
    shutil.copytree(codehash.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(execute, "PACKAGE_DIR", copy)
    (book / "notebooks" / "other.md").write_text(WHERE)
    assert runner.run_chapter("other", "smoke", {}, out_dir=book / "nb", results_root=book / "res") == "ran"
    used = (book / "res" / "smoke" / "other.csv").read_text().splitlines()[1]
    assert used == str(copy / "__init__.py")


def test_stored_only_starts_no_chapter_that_would_train(book, monkeypatch, capsys):
    """--stored-only: a stale chapter whose runs the store does not all hold is not started (its last unit shown,
    saying why; a placeholder with the command where there is none); one the store holds whole runs."""
    res, nb = book / "res", book / "nb"
    held = {
        "tiny": None,
        "other": "3 of 5 runs not in the store under today's key (3 stale)",
    }  # what the store lacks of each (stored.not_stored)
    monkeypatch.setattr(runner.stored, "not_stored", lambda chapter, *args: held[chapter])
    to_compute = {"tiny": (0, None), "other": (3, 600.0)}  # what the store lacks, by the stored compute times
    monkeypatch.setattr(plan_module, "stored_compute", lambda chapter, *args: to_compute[chapter])
    summary = runner.reproduce("smoke", [("x", 2)], ["tiny", "other"], out_dir=nb, results_root=res, stored_only=True)
    assert summary.done == {"ran": ["tiny"], "deferred": ["other"]} and summary.failures == []
    said = capsys.readouterr().out
    assert "2 chapters: 0 current, 1 to run, 1 deferred (no stored run to compute)" in said  # not 3, 10 CPU-min
    assert "not starting other (no results for 'other' in " in said
    assert "): 3 of 5 runs not in the store under today's key (3 stale), and --stored-only trains nothing" in said
    page = nbformat.read(nb / "other.ipynb", as_version=4).cells[0].source
    assert page.startswith("# A chapter for the tests\n\n*Not computed (profile `smoke`): this build computes only")
    assert "python -m qkov_lib reproduce --profile smoke --only other` computes it" in page
    assert not (res / "smoke" / "other.json").exists()
    held["tiny"] = "1 of 1 runs not in the store"  # stale again (x changes) and no longer held: its last unit stays
    unit = {k: v for k, v in snapshot(res / "smoke").items() if k.startswith("tiny.")}
    assert runner.reproduce("smoke", [("x", 3)], ["tiny"], out_dir=nb, results_root=res, stored_only=True).done == {
        "deferred": ["tiny"]
    }
    assert {k: v for k, v in snapshot(res / "smoke").items() if k.startswith("tiny.")} == unit
    first = nbformat.read(nb / "tiny.ipynb", as_version=4).cells[0].source
    assert "Not rerun in this build: this build computes only what the results store holds" in first
