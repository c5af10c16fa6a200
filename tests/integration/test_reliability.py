"""The runner against a careless user and an attacker: a run never replaces a good result with a worse one, never
writes outside the results folder (nor through a link), leaves no process behind, and finishes or undoes an
interrupted unpack. Each case asserts its one line, the exit status, and the sha256 of every file in the results
folder, in a folder beside it, in the chapters' sources and in the book's chapters."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from fake_chapters import NEEDS_DATA, TINY, fake_module, seal_unit
from fake_data import write_sva_offline

from qkov_lib.__main__ import main
from qkov_lib.core import workers
from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.core.results import check
from qkov_lib.data import CACHE_ENV, DATA_ENV
from qkov_lib.runner import bundle, catalog, units, unpack


def shas(*folders: Path) -> dict[str, str]:
    """The sha256 of every file under ``folders`` (the lock files aside: they hold the last holder's pid)."""
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for folder in folders
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink() and units.LOCKS not in p.parts
    }


@pytest.fixture
def book(tmp_path, monkeypatch):
    """The tiny chapter (it reads 'sva', so its data is part of its fingerprint) and one that loads 'sva', over a
    tiny offline copy; a folder beside the results; the folders every case checks."""
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "tiny.md").write_text(TINY)
    (notebooks / "needs_data.md").write_text(NEEDS_DATA.replace('"tiny"', '"needs_data"'))
    monkeypatch.setattr(catalog, "NOTEBOOKS_DIR", notebooks)
    monkeypatch.setitem(catalog.CHAPTERS, "tiny", fake_module("tiny", datasets=("sva",), x=1))
    needs = fake_module("needs_data", datasets=("sva",), x=1)
    monkeypatch.setitem(catalog.CHAPTERS, "needs_data", needs)
    write_sva_offline(tmp_path / "data")
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "data"))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    (tmp_path / "beside").mkdir()
    (tmp_path / "beside" / "tiny.json").write_text("{}\n")
    (tmp_path / "nb").mkdir()
    return tmp_path


def cli(book: Path, *args: str, results: str | None = None) -> int:
    return main(
        ["reproduce", "--profile", "smoke", "--results", results or str(book / "res"), "--out", str(book / "nb"), *args]
    )


def watched(book: Path) -> dict[str, str]:
    return shas(book / "res", book / "beside", book / "notebooks", book / "nb", book / "data")


# ---- a run without its data keeps the last good unit ---------------------------------------------------------------


@pytest.mark.parametrize("how", ["an empty data folder", "the setting unset", "a relative path from the data folder"])
def test_a_run_without_its_data_keeps_the_last_good_results(book, monkeypatch, capsys, how):
    assert cli(book, "--only", "tiny") == 0
    good = check(book / "res" / "smoke", "tiny")
    assert good["data_identity"]["sva"]["release"] == "offline"
    cli(book, "--only", "tiny", "-p", "x", "2")  # a changed parameter: stale, so this run would replace the unit
    before = watched(book)
    if how == "an empty data folder":
        (book / "empty").mkdir()
        monkeypatch.setenv(DATA_ENV, str(book / "empty"))
    elif how == "the setting unset":
        monkeypatch.delenv(DATA_ENV)
    else:
        monkeypatch.chdir(book / "data")
        monkeypatch.setenv(DATA_ENV, ".")
    capsys.readouterr()
    status = cli(book, "--only", "tiny", "-p", "x", "3")
    out, err = capsys.readouterr()
    if how == "a relative path from the data folder":  # the same data, found: the chapter runs
        assert status == 0 and "running tiny" in out and check(book / "res" / "smoke", "tiny")["parameters"] == {"x": 3}
        return
    assert status == 0, err
    assert re.search(r"kept the results of .+ for tiny; this run had no data: sva data not available", out), out
    assert "1 chapter(s) without their data kept their last results, each page says so: tiny" in err
    page = json.loads((book / "nb" / "tiny.ipynb").read_text())
    assert "This build had no data for this chapter, so the page shows its last results" in "".join(
        page["cells"][0]["source"]
    )
    assert {k: v for k, v in watched(book).items() if not k.endswith("nb/tiny.ipynb")} == {
        k: v for k, v in before.items() if not k.endswith("nb/tiny.ipynb")
    }
    assert not (book / "cache").exists() and not (REPO_ROOT / "data" / "cache" / "sva").exists()
    assert cli(book, "--only", "tiny", "-p", "x", "3", "--strict") == 1
    assert check(book / "res" / "smoke", "tiny")["parameters"] == {"x": 2}


def test_a_run_that_finds_no_data_inside_keeps_the_last_good_results(book, monkeypatch, capsys):
    """The chapter's kernel, not the runner, finds the data missing (downloads allowed, none possible): the unit
    written without data is discarded and the last good unit stays."""
    monkeypatch.setitem(
        catalog.CHAPTERS, "needs_data", fake_module("needs_data", datasets=("sva",), x=1, download=True)
    )
    assert cli(book, "--only", "needs_data") == 0
    cli(book, "--only", "needs_data", "-p", "x", "2")
    before = watched(book)
    monkeypatch.delenv(DATA_ENV)
    capsys.readouterr()
    assert cli(book, "--only", "needs_data", "-p", "x", "3") == 0
    out = capsys.readouterr().out
    assert "running needs_data" in out and "kept the results of" in out and "sva data not available" in out
    assert {k: v for k, v in watched(book).items() if "nb/" not in k} == {
        k: v for k, v in before.items() if "nb/" not in k
    }


def test_a_unit_of_the_canonical_release_stays_current_where_the_data_is_absent(book, monkeypatch, capsys):
    """Its data identity is the canonical files' sha256, not their presence here: without the data the unit is
    current; with other copies the chapter reruns."""
    from fake_data import write_sva_canonical

    monkeypatch.delenv(DATA_ENV)
    write_sva_canonical(book / "cache")
    assert cli(book, "--only", "tiny") == 0
    assert check(book / "res" / "smoke", "tiny")["data_identity"]["sva"]["release"] == "canonical"
    shutil.rmtree(book / "cache")
    assert cli(book, "--only", "tiny") == 0 and "skipped" in capsys.readouterr().out
    monkeypatch.setenv(DATA_ENV, str(book / "data"))
    assert cli(book, "--only", "tiny") == 0 and "running tiny (smoke): data changed" in capsys.readouterr().out


# ---- every path absolute up front: nothing lands in the chapters' sources ------------------------------------------


def test_a_relative_results_folder_is_the_callers(book, monkeypatch, capsys):
    elsewhere = book / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    sources = shas(book / "notebooks")
    assert cli(book, "--only", "tiny", results="relres") == 0
    assert check(elsewhere / "relres" / "smoke", "tiny")
    assert shas(book / "notebooks") == sources and not list((book / "notebooks").rglob("relres"))


# ---- files of the runner's that cannot be redirected -----------------------------------------------------------


@pytest.mark.parametrize("what", ["lock", "lock folder", "staging", "hard link"])
def test_a_link_where_the_runner_writes_is_refused(book, capsys, what):
    outside = book / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me\n")
    assert cli(book, "--only", "tiny") == 0
    locks = book / "res" / units.LOCKS
    if what == "lock":
        (locks / "tiny.lock").unlink()
        (locks / "tiny.lock").symlink_to(outside / "precious.txt")
    elif what == "lock folder":
        shutil.rmtree(locks)
        locks.symlink_to(outside)
    elif what == "hard link":
        (locks / "tiny.lock").unlink()
        os.link(outside / "precious.txt", locks / "tiny.lock")
    else:
        (book / "res" / ".staging-tiny").symlink_to(outside)
    before = watched(book) | shas(outside)
    capsys.readouterr()
    assert cli(book, "--only", "tiny", "--force") == 1
    err = capsys.readouterr().err
    assert re.search(
        r"is (a symbolic link|not a plain file of its own \(a hard link, a device or a pipe\)), not "
        r"(the runner's (lock file|staging folder)|the folder of the runner's lock file); refusing to "
        r"write (through it|to it)",
        err,
    ), err
    assert "Traceback" not in err and watched(book) | shas(outside) == before
    assert (outside / "precious.txt").read_text() == "keep me\n"
    if what in ("lock", "lock folder"):
        packed = book / "b.tar.gz"
        bundle.pack("smoke", packed, book / "res")
        assert main(["results", "unpack", str(packed), "--results", str(book / "res")]) == 1
        assert "refusing to write through it" in capsys.readouterr().err
        assert (outside / "precious.txt").read_text() == "keep me\n" and watched(book) | shas(outside) == before


# ---- no process outlives the run -----------------------------------------------------------------------------------


def test_the_next_run_ends_and_names_what_a_killed_run_left(book, capsys):
    """A process marked by a runner that is gone (the mark a kernel and its workers inherit) is a leftover: the next
    run ends it and names it; a process marked by a live runner is not touched."""
    code = "import time; time.sleep(600)"
    dead = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, workers.RUN_ENV: "1:0.000"})
    live = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, workers.RUN_ENV: workers.run_marker()})
    try:
        psutil.Process(dead.pid).environ()  # started: its environment is readable
        assert cli(book, "--only", "tiny") == 0
        out = capsys.readouterr().out
        assert re.search(
            rf"ended 1 process\(es\) left behind by a run that was killed: pid {dead.pid} \(.*python.*"
            rf"MB\)",
            out,
        ), out
        assert dead.wait(timeout=10) is not None and live.poll() is None
    finally:
        for proc in (dead, live):
            proc.kill()
            proc.wait()


# ---- an unpack cut short is finished or undone; a busy chapter is checked first -------------------------------------

KILL_AT = """
import os, sys
from qkov_lib.runner import bundle, bundle_check, catalog, units
from fake_chapters import fake_module
for name in ("tiny", "other"):
    catalog.CHAPTERS[name] = fake_module(name, x=1)
moved = []
if {when!r} == "after the first unit":
    move = units.move_unit
    def move_then_die(staged, final, chapter):
        if moved:
            files = sorted(p for p in staged.glob(f"{{chapter}}.*") if not p.name.endswith(".json"))
            os.replace(files[0], final / files[0].name)  # half a unit moved, then the kill
            os._exit(9)
        move(staged, final, chapter)
        moved.append(chapter)
    units.move_unit = move_then_die
else:
    bundle_check._extract = lambda *args: os._exit(9)
from qkov_lib.runner import unpack
unpack.unpack(bundle.Path(sys.argv[1]), bundle.Path(sys.argv[2]))
"""


def _two_units(book: Path, monkeypatch) -> Path:
    """A bundle of two units, tiny and other; the results folder holds older units of both."""
    monkeypatch.setitem(catalog.CHAPTERS, "other", fake_module("other", x=1))
    for chapter in ("tiny", "other"):
        seal_unit(book / "new" / "smoke", chapter, 5)
        seal_unit(book / "res" / "smoke", chapter, 1)
    bundle.pack("smoke", book / "b.tar.gz", book / "new")
    return book / "b.tar.gz"


@pytest.mark.parametrize("when", ["after the first unit", "during the checks"])
def test_an_unpack_killed_midway_is_finished_or_undone_by_the_next(book, monkeypatch, capsys, when):
    source = _two_units(book, monkeypatch)
    before = shas(book / "res")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(Path(__file__).parents[1])])}
    proc = subprocess.run(
        [sys.executable, "-c", KILL_AT.format(when=when), str(source), str(book / "res")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 9, proc.stderr
    assert len(list((book / "res").glob(".unpack-*"))) == 1
    lines = unpack.recover(book / "res")
    if when == "after the first unit":
        assert re.fullmatch(
            r"finished an unpack of .*b\.tar\.gz that was interrupted \(packed at \S+\): moved in "
            r"the 1 unit\(s\) and 0 stored run\(s\) it had left \(tiny\)",
            lines[0],
        ), lines
        assert shas(book / "res") == {
            k.replace(str(book / "new"), str(book / "res")): v for k, v in shas(book / "new").items()
        }
    else:
        assert re.fullmatch(
            r"removed the staging folder of an unpack interrupted before its checks ended "
            r"\(\.unpack-\S+\); nothing had changed",
            lines[0],
        ), lines
        assert shas(book / "res") == before
    assert not list((book / "res").glob(".unpack-*")) and unpack.recover(book / "res") == []


def test_an_unpack_checks_every_chapter_is_free_before_anything_moves(book, monkeypatch, capsys):
    source = _two_units(book, monkeypatch)
    before = shas(book / "res")
    with units.chapter_lock(book / "res", "tiny"):
        assert main(["results", "unpack", str(source), "--results", str(book / "res")]) == 1
    err = capsys.readouterr().err
    assert re.search(
        r"error: chapter 'tiny' is already running into .* \(pid \d+, started .*\); wait for it to "
        r"finish, or pass another --results folder; nothing was restored: unpack again when it is free",
        err,
    ), err
    assert shas(book / "res") == before and not list((book / "res").glob(".unpack-*"))


# ---- the weak answers: one line, up front ------------------------------------------------------------------------


def test_a_notebook_written_where_it_cannot_be_is_one_line(tmp_path, monkeypatch, capsys):
    """(A read-only folder refuses the file; as root permissions do not, so the refusal is the operating system's
    error, raised where the file is made.)"""

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("tempfile.mkstemp", refuse)
    assert main(["notebook", "fig4_mu_trajectories", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        f"error: cannot write the notebook into {str(tmp_path)!r} (Permission denied); name a writable folder with -o"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_deadline_that_is_no_time_stops_a_chapter_run_by_hand_at_its_first_cell(monkeypatch):
    from qkov_lib.chapters import fig4_mu_trajectories
    from qkov_lib.core.chapter import ParameterError
    from qkov_lib.present.settings import begin

    monkeypatch.setenv("QKOV_DEADLINE", "garbage")
    with pytest.raises(ParameterError, match=r"QKOV_DEADLINE='garbage' is not a time in seconds since the epoch"):
        begin(fig4_mu_trajectories, "smoke")


def test_a_damaged_numba_cache_is_removed_and_compiled_afresh(tmp_path):
    """Random bytes in numba's cache files of the engine: the next run says so in one line, removes them, compiles
    afresh and trains; the run after loads the new cache silently."""
    script = textwrap.dedent("""
        from qkov_lib.chapters import fig2_dtap
        from qkov_lib.runner.catalog import resolve
        fig2_dtap.run(resolve("fig2_dtap", "smoke")[1], progress=False)
        print("trained")
    """)
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
        "QKOV_WORKERS": "1",
        "QKOV_ENGINE": "compiled",
        "PYTHONPATH": str(REPO_ROOT),
    }
    run = lambda: subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,  # noqa: E731
        timeout=600,
    )
    assert run().stdout.strip().endswith("trained")
    damaged = sorted((tmp_path / "cache").rglob("kernels.*.nbc"))
    assert damaged
    for path in damaged:
        path.write_bytes(os.urandom(200))
    proc = run()
    assert proc.returncode == 0 and proc.stdout.strip().endswith("trained"), proc.stderr[-2000:]
    assert re.search(
        r"numba's disk cache of the engine's kernels was damaged \(\w+: .*\); removed its \d+ files in "
        r".*cache.* and compiling the kernels afresh",
        proc.stdout,
    ), proc.stdout
    again = run()
    assert again.returncode == 0 and "damaged" not in again.stdout
