"""Fault injection: bad arguments, bad settings, damaged data and damaged results, interrupted and concurrent runs.

Every case must end in one clear error naming the problem (and leave the results folder exactly as it was) or in a
correct rerun. The runner cases use a tiny chapter (one cell that saves a table and a claim) so that each run costs
one kernel start."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import psutil
import pytest
import torch
from fake_chapters import BROKEN, TINY, fake_module
from fake_data import seal, write_hatexplain_canonical, write_hatexplain_offline, write_sva_canonical, write_sva_offline

from qkov_lib.__main__ import main
from qkov_lib.chapters import scorecard
from qkov_lib.core.chapter import ParameterError, concrete_profile, notebook_overrides
from qkov_lib.core.chapter import shown_path
from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.core.results import RESULTS_ENV, ROOT_ENV, ResultsError, check, save
from qkov_lib.data import CACHE_ENV, DATA_ENV, DataError, hatexplain, registry, sva
from qkov_lib.core.chapter import as_dict
from qkov_lib.runner import reproduce as runner
from qkov_lib.runner import catalog, execute, fingerprint as fingerprints, units


TASK_EVENTS = Path(__file__).parent.parent / "task_events"  # its sitecustomize: a worker says when it starts a task


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (but the lock files, which only ever hold the last holder's pid)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and units.LOCKS not in p.parts
    }


@pytest.fixture
def book(tmp_path, monkeypatch):
    """A notebooks folder with the tiny and the broken chapter, registered; the tiny chapter reads 'sva' (so its
    data files are part of its fingerprint), from a tiny offline copy."""
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "tiny.md").write_text(TINY)
    (notebooks / "broken.md").write_text(BROKEN)
    shutil.copy(REPO_ROOT / "notebooks" / "sva.md", notebooks / "sva.md")
    monkeypatch.setattr(catalog, "NOTEBOOKS_DIR", notebooks)
    monkeypatch.setitem(catalog.CHAPTERS, "tiny", fake_module("tiny", datasets=("sva",), x=1))
    monkeypatch.setitem(catalog.CHAPTERS, "broken", fake_module("broken", x=1))
    data = tmp_path / "data"
    write_sva_offline(data)
    monkeypatch.setenv(DATA_ENV, str(data))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path


def run(book: Path, force: bool = False, out: str = "nb", **params) -> str:
    return runner.run_chapter("tiny", "smoke", params, out_dir=book / out, results_root=book / "res", force=force)


def cli(book: Path, *args: str) -> int:
    return main(["reproduce", "--profile", "smoke", "--results", str(book / "res"), "--out", str(book / "nb"), *args])


# ---- arguments and settings: one error before anything runs, nothing written --------------------------------------

CLI_CASES = [
    ("empty --only", ["--only", ""], {}, "--only names no chapter"),
    ("--only of commas", ["--only", ",, ,"], {}, "--only names no chapter"),
    ("--only twice", ["--only", "tiny", "--only", "broken"], {}, "--only is given more than once"),
    ("a chapter named twice", ["--only", "tiny,tiny"], {}, "'tiny' is named twice"),
    ("unknown chapter", ["--only", "fig9"], {}, "unknown chapter 'fig9'"),
    ("unknown profile", ["--only", "tiny", "--profile", "fast"], {}, "unknown profile 'fast'"),
    ("unknown parameter", ["--only", "tiny", "-p", "y", "1"], {}, "unknown parameter 'y'"),
    ("a parameter twice", ["--only", "tiny", "-p", "x", "1", "-p", "x", "2"], {}, "'x' is given twice"),
    ("a value of the wrong type", ["--only", "tiny", "-p", "x", "'one'"], {}, "'x' of tiny must be an int"),
    (
        "a value that is code",
        ["--only", "tiny", "-p", "x", "__import__('os').system('touch pwned')"],
        {},
        "'x' of tiny must be an int",
    ),
    ("an unknown device", ["--only", "tiny,broken"], {"QKOV_DEVICE": "tpu"}, "QKOV_DEVICE='tpu' is not a device"),
    ("an absent device", ["--only", "tiny"], {"QKOV_DEVICE": "cuda"}, "QKOV_DEVICE='cuda' was asked for but is"),
    ("a bad worker count", ["--only", "tiny"], {"QKOV_WORKERS": "two"}, "QKOV_WORKERS='two' is not a number of"),
    (
        "a worker count in other digits",
        ["--only", "tiny"],
        {"QKOV_WORKERS": "²"},
        "QKOV_WORKERS='²' is not a number of processes; set it to a whole number >= 1, written in the digits 0-9",
    ),
    (
        "an unknown engine",
        ["--only", "tiny"],
        {"QKOV_ENGINE": "bogus"},
        r"QKOV_ENGINE='bogus' is not an engine; allowed: compiled, torch \(or unset it\)",
    ),
    (
        "a cache folder that is a file",
        ["--only", "tiny"],
        {CACHE_ENV: "FILE"},
        r"QKOV_CACHE_DIR='.*FILE' cannot be a folder: .*FILE is a file; point QKOV_CACHE_DIR at a folder",
    ),
    (
        "a cache folder inside a file",
        ["--only", "tiny"],
        {CACHE_ENV: "FILE/cache"},
        r"QKOV_CACHE_DIR='.*FILE/cache' cannot be a folder: .*FILE is a file",
    ),
    (
        "an integer beyond 64 bits",
        ["--only", "tiny", "-p", "x", "1000000000000000000000000000000"],
        {},
        r"parameter 'x' of tiny is too large \(got 10+\): an integer must be below 2\*\*63",
    ),
    ("a data folder that is absent", ["--only", "tiny"], {DATA_ENV: "/nonexistent/qkov"}, "is not a folder"),
    ("--out naming a file", ["--only", "tiny", "--out", "FILE"], {}, "--out .* is a file; name a folder"),
    ("--results naming a file", ["--only", "tiny", "--results", "FILE"], {}, "--results .* is a file"),
    (
        "a negative value in scientific notation",
        ["--only", "tiny", "-p", "x", "-1e-3"],
        {},
        r"parameter 'x' of tiny must be an int like 1 \(got -0.001\)",
    ),
    (
        "an empty --results",
        ["--only", "tiny", "--results", ""],
        {},
        r"--results names no folder \(the name is empty\); name a folder, or leave --results out",
    ),
    ("an empty --out", ["--only", "tiny", "--out", " "], {}, r"--out names no folder \(the name is empty\)"),
    (
        "--results not UTF-8",
        ["--only", "tiny", "--results", os.fsdecode(b"res-\xff")],
        {},
        r"--results 'res-\\udcff' is not a valid UTF-8 name; name a folder whose name is UTF-8",
    ),
    (
        "a data folder not UTF-8",
        ["--only", "tiny"],
        {DATA_ENV: os.fsdecode(b"data-\xff")},
        r"QKOV_DATA_DIR 'data-\\udcff' is not a valid UTF-8 name",
    ),
    (
        "a deadline set by hand",
        ["--only", "tiny"],
        {"QKOV_DEADLINE": "garbage"},
        r"QKOV_DEADLINE='garbage' is set, but the runner sets it for each chapter from --budget-minutes: unset it",
    ),
    (
        "a negative seed",
        ["--only", "fig2_dtap", "-p", "seeds", "[-1]"],
        {},
        r"seeds must be integers from 0 to 4294967295 \(got -1\); give non-negative seeds",
    ),
    (
        "ten thousand seeds",
        ["--only", "fig2_dtap", "-p", "seeds", str(list(range(10_000)))],
        {},
        r"seeds holds 10000 seeds, more than the 1000 a run takes .* split the study into runs of at most 1000",
    ),
]


@pytest.mark.parametrize("argv,env,message", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_bad_arguments_and_settings(book, monkeypatch, capsys, argv, env, message):
    if env.get("QKOV_DEVICE") == "cuda":
        monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    for key, value in env.items():
        monkeypatch.setenv(key, value.replace("FILE", str(book / "FILE")))
    (book / "FILE").write_text("a file, not a folder")
    argv = [str(book / "FILE") if a == "FILE" else a for a in argv]
    save(book / "res" / "smoke", "tiny", {"main": pd.DataFrame({"x": [1]})}, {"parameters": {"x": 1}})
    before = snapshot(book / "res")
    monkeypatch.chdir(book)
    assert cli(book, *argv) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and re.search(message, err), err
    assert snapshot(book / "res") == before and not (book / "pwned").exists()


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_profile_folder_that_is_a_file_is_one_error_before_anything_runs(book, capsys, dry_run):
    (book / "res").mkdir()
    (book / "res" / "smoke").write_text("not a folder")
    before = sha_tree(book)
    assert cli(book, "--only", "tiny", *(["--dry-run"] if dry_run else [])) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and re.search(
        r"profile smoke's results folder .*res/smoke is a file, not a "
        r"folder; move the file away, or name another folder",
        err,
    ), err
    assert sha_tree(book) == before


def test_a_scheduler_that_a_serial_profile_ignores_is_said(book, monkeypatch, capsys):
    """$QKOV_DASK_SCHEDULER set while the profile runs the sweep serially: one line naming both and the fix."""
    sweepy = fake_module("sweepy", x=1)
    sweepy.Setup = dataclasses.make_dataclass(
        "Setup", [("scheduler", str | None, dataclasses.field(default=None))], frozen=True, kw_only=True
    )
    sweepy.PROFILES = {"smoke": {"scheduler": "serial"}}
    (book / "notebooks" / "sweepy.md").write_text(TINY)
    monkeypatch.setitem(catalog.CHAPTERS, "sweepy", sweepy)
    monkeypatch.setenv("QKOV_DASK_SCHEDULER", "tcp://127.0.0.1:8786")
    before = sha_tree(book)
    assert cli(book, "--only", "sweepy", "--dry-run") == 0
    assert (
        "note: QKOV_DASK_SCHEDULER=tcp://127.0.0.1:8786 is not used by sweepy: profile smoke runs its sweep "
        "serially (scheduler='serial'); add -p scheduler tcp://127.0.0.1:8786 to run it there"
    ) in capsys.readouterr().err
    assert sha_tree(book) == before
    monkeypatch.delenv("QKOV_DASK_SCHEDULER")
    assert cli(book, "--only", "sweepy", "--dry-run") == 0 and "note:" not in capsys.readouterr().err


def test_overrides_given_as_text_like_papermill_passes_them():
    assert notebook_overrides('{"M": 20, "ratios": [0.1, 10]}') == {"M": 20, "ratios": [0.1, 10]}
    assert notebook_overrides("{'M': 20}") == {"M": 20} and notebook_overrides(None) is None
    for bad in ("M=20", "[20]", 20):
        with pytest.raises(ParameterError, match=r"overrides must map parameter names to values, like \{'M': 20\}"):
            notebook_overrides(bad)


def test_a_notebook_run_by_plain_papermill_takes_overrides_as_text(tmp_path):
    """``papermill chapter.ipynb out.ipynb -p profile smoke -p overrides '{"M": 3}'``: the chapter runs with M = 3."""
    import jupytext  # lazy: as the runner's tests do, through the notebook files
    import papermill

    source = tmp_path / "fig4.ipynb"
    jupytext.write(jupytext.read(REPO_ROOT / "notebooks" / "fig4_mu_trajectories.md"), source)
    env = {"QKOV_RESULTS_ROOT": str(tmp_path / "res")}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        papermill.execute_notebook(
            str(source),
            str(tmp_path / "out.ipynb"),
            kernel_name="python3",
            parameters={"profile": "smoke", "overrides": '{"M": 3}'},
            progress_bar=False,
            cwd=str(REPO_ROOT / "notebooks"),
        )
    meta = json.loads((tmp_path / "res" / "interactive" / "smoke" / "fig4_mu_trajectories.json").read_text())
    assert meta["parameters"]["M"] == 3


def test_a_hand_edited_metadata_file_makes_the_unit_stale(book, capsys):
    """The metadata is the root of a unit's check: an edit of a recorded value (the device) shows, and reruns."""
    assert run(book) == "ran"
    path = book / "res" / "smoke" / "tiny.json"
    path.write_text(path.read_text().replace('"device": "cpu"', '"device": "cuda"'))
    assert '"device": "cuda"' in path.read_text()
    capsys.readouterr()
    assert cli(book, "--only", "tiny", "--dry-run") == 0
    assert re.search(
        r"tiny\s+stale .*tiny\.json changed after it was written \(its seal differs: edited by "
        r"hand\?\); rerun the chapter",
        capsys.readouterr().out,
    )
    assert run(book) == "ran" and '"device": "cpu"' in path.read_text()


def test_the_engine_and_the_device_are_part_of_a_results_identity(monkeypatch):
    """Switching the synthetic engine changes the fingerprint of a chapter that trains with it, not of one that
    does not; switching the device changes both."""

    def parts(chapter, engine, device="cpu"):
        monkeypatch.setenv("QKOV_ENGINE", engine)
        monkeypatch.setattr(fingerprints, "pick_device", lambda: torch.device(device))
        return fingerprints.fingerprint(chapter, "smoke", as_dict(catalog.resolve(chapter, "smoke")[1]))

    fig2, fig4 = (
        (parts("fig2_dtap", "compiled"), parts("fig2_dtap", "torch")),
        (parts("fig4_mu_trajectories", "compiled"), parts("fig4_mu_trajectories", "torch")),
    )
    assert [k for k in fig2[0] if fig2[0][k] != fig2[1][k]] == ["engine"]
    assert fig4[0] == fig4[1]
    assert parts("fig4_mu_trajectories", "torch", "cuda")["engine"] != fig4[1]["engine"]
    assert fingerprints.computed_by(fingerprints.chapter_code("fig2_dtap")) == {
        "device": "cuda",
        "synthetic_engine": "torch",
    }


def test_auto_follows_the_device_setting(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setenv("QKOV_DEVICE", "cpu")
    assert concrete_profile("auto") == "default"


# ---- results and notebooks published as one unit ---------------------------------------------------------------------


def test_notebook_and_results_never_disagree(book):
    """The reported case: --force, then -p x 2 into another --out, then -p x 2: the book's notebook follows."""
    assert run(book, force=True) == "ran"
    assert run(book, out="elsewhere", x=2) == "ran"
    assert run(book, x=2) == "restored"
    nb = (book / "nb" / "tiny.ipynb").read_bytes()
    assert nb == (book / "res" / "smoke" / "tiny.ipynb").read_bytes() and b"2" in nb
    assert json.loads((book / "res" / "smoke" / "tiny.json").read_text())["parameters"] == {"x": 2}
    assert run(book, x=2) == "skipped"


@pytest.mark.parametrize(
    "damage", ["truncate the claims table", "delete a table", "corrupt the metadata", "edit the notebook"]
)
def test_damaged_results_are_noticed_and_rerun(book, damage):
    assert run(book) == "ran"
    folder = book / "res" / "smoke"
    good = snapshot(folder)
    if damage == "truncate the claims table":
        (folder / "tiny.claims.csv").write_text("claim,this run\n")
    elif damage == "delete a table":
        (folder / "tiny.csv").unlink()
    elif damage == "corrupt the metadata":
        (folder / "tiny.json").write_text('{"tables": [')
    else:
        (folder / "tiny.ipynb").write_text("{}")
    with pytest.raises(ResultsError, match="tiny"):
        check(folder, "tiny")
    assert run(book) == "ran"
    assert set(snapshot(folder)) >= set(good) and check(folder, "tiny")["parameters"] == {"x": 1}


def test_scorecard_marks_damaged_results(smoke_book, tmp_path):
    folder = tmp_path / "smoke"
    shutil.copytree(smoke_book / "data" / "results" / "smoke", folder)
    (folder / "fig4_mu_trajectories.claims.csv").write_text("claim,this run,verdict\n")
    table, missing = scorecard.gather(folder)
    assert not table["chapter"].str.startswith("Figure 4").any()
    assert "results are unusable" in missing["fig4_mu_trajectories"]


def test_changed_data_reruns_and_moved_data_does_not(book, monkeypatch, capsys):
    """The data part of a fingerprint is the data's content: a changed byte reruns the chapter; the same copy in
    another folder does not."""
    assert run(book) == "ran" and run(book) == "skipped"
    path = book / "data" / "sva" / "rnn_agr_simple" / "numpred.val"
    path.write_text(path.read_text().replace("VBZ", "VBP", 1))
    seal(book / "data")
    capsys.readouterr()
    assert run(book) == "ran" and "data changed" in capsys.readouterr().out
    other = book / "data2"
    shutil.copytree(book / "data", other)
    monkeypatch.setenv(DATA_ENV, str(other))
    assert run(book) == "skipped"


def test_a_chapter_run_by_hand_writes_apart_from_the_runners_units(book, monkeypatch, capsys):
    """A chapter run from JupyterLab or papermill (no staging folder set) saves under results/interactive/<profile>;
    the runner's unit is untouched and still reused."""
    from qkov_lib.core.chapter import Chapter

    assert run(book) == "ran"
    before = snapshot(book / "res" / "smoke")
    monkeypatch.setenv(ROOT_ENV, str(book / "res"))
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    by_hand = Chapter("tiny", "smoke", fake_module("tiny", x=1).Setup(x=5), {"device": "cpu"})
    by_hand.save({"main": pd.DataFrame({"x": [5]})})
    assert f"into {book / 'res' / 'interactive' / 'smoke'}, apart from the runner's" in capsys.readouterr().out
    assert (
        shown_path(REPO_ROOT / "data" / "results" / "interactive" / "smoke") == "data/results/interactive/smoke"
    )  # inside the repository: the path a reader finds
    assert check(book / "res" / "interactive" / "smoke", "tiny")["parameters"] == {"x": 5}
    assert snapshot(book / "res" / "smoke") == before and run(book) == "skipped"


def test_results_saved_by_hand_are_rerun_by_the_runner(book, capsys):
    """Results written into the runner's folder by an older version, or by hand: the runner notices and reruns."""
    assert run(book) == "ran"
    save(book / "res" / "smoke", "tiny", {"main": pd.DataFrame({"x": [5]})}, {"parameters": {"x": 5}})
    capsys.readouterr()
    assert run(book) == "ran" and "not written by this runner" in capsys.readouterr().out
    assert check(book / "res" / "smoke", "tiny")["parameters"] == {"x": 1}


# ---- failures, interruptions and concurrent runs ------------------------------------------------------------------


def test_failed_notebook_is_kept_under_the_results(book):
    with pytest.raises(
        runner.ChapterFailed, match=r"(?s)ValueError: deliberate failure.*res/smoke/failed/broken.ipynb"
    ):
        runner.run_chapter("broken", "smoke", {}, out_dir=book / "nb", results_root=book / "res")
    assert (book / "res" / "smoke" / "failed" / "broken.ipynb").is_file()
    assert not list((book / "res").glob(".staging-*"))


def test_a_failure_while_publishing_is_one_error_and_the_next_run_repairs(book, monkeypatch):
    assert run(book) == "ran"
    before = snapshot(book / "res" / "smoke")
    copy_in = units.copy_in

    def disk_full(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(units, "copy_in", disk_full)
    with pytest.raises(runner.ChapterFailed, match="could not be written.*No space left"):
        run(book, force=True, x=3)
    monkeypatch.setattr(units, "copy_in", copy_in)
    assert check(book / "res" / "smoke", "tiny")["parameters"] == {"x": 3}  # the unit landed whole
    assert snapshot(book / "res" / "smoke") != before
    assert run(book, x=3) == "restored"  # the book's copy, stale after the failure, is brought in line


def test_an_interrupted_run_leaves_nothing(book, monkeypatch, capsys):
    assert run(book) == "ran"
    before = snapshot(book / "res")

    def interrupted(chapter, profile, overrides, staging, *args, **kwargs):
        (staging / f"{chapter}.csv").write_text("half")
        raise KeyboardInterrupt

    monkeypatch.setattr(execute, "run_notebook", interrupted)
    assert cli(book, "--only", "tiny", "--force") == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err
    assert snapshot(book / "res") == before and not list((book / "res").glob(".staging-*"))


def sha_tree(root: Path) -> dict[str, str]:
    """The sha256 of every file under ``root`` but the lock files."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and units.LOCKS not in p.parts
    }


@pytest.mark.parametrize(
    "how", ["SIGINT to the runner alone", "SIGINT to its process group (Ctrl-C)", "SIGTERM", "SIGKILL"]
)
def test_a_signal_stops_a_running_chapter_at_once(tmp_path, how):
    """A real chapter (Figure 2 at `default`, minutes long) stopped while its kernel and worker processes compute:
    the runner ends within seconds with status 130 and one line, no traceback, no process of the run left, and the
    results folder and the folder beside it as they were. SIGKILL cannot be caught: the kernel, its workers and
    their resource tracker end on their own within seconds (the kernel polls its parent; each worker dies with it)."""
    res, beside = tmp_path / "res", tmp_path / "beside"
    (res / "default").mkdir(parents=True)
    (res / "default" / "keep.txt").write_text("published\n")
    beside.mkdir()
    (beside / "fig2_dtap.json").write_text("{}\n")
    before = sha_tree(tmp_path)
    name = f"qkov-test-tasks-{os.getpid()}-{tmp_path.name}"
    events = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # each worker says when it starts a task (TASK_EVENTS)
    events.bind("\0" + name)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TASK_EVENTS), str(REPO_ROOT)]),
        "QKOV_TEST_TASK_SOCKET": name,
        "QKOV_STORE": "off",  # it trains, whatever the store holds
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "qkov_lib",
            "reproduce",
            "--profile",
            "default",
            "--only",
            "fig2_dtap",
            "--results",
            str(res),
            "--out",
            str(tmp_path / "nb"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    events.settimeout(240)
    try:
        worker = int(events.recv(64))  # the first worker to start training
    except TimeoutError:
        proc.kill()
        pytest.fail(f"no worker started training within 4 minutes: {proc.communicate()[1][-2000:]}")
    finally:
        events.close()
    kids = psutil.Process(proc.pid).children(recursive=True)
    assert worker in {k.pid for k in kids} and len(kids) >= 3 and proc.poll() is None, "the kernel and its workers"
    if how == "SIGKILL":
        proc.kill()
        proc.wait()
        gone, alive = psutil.wait_procs(kids, timeout=60)
        assert not [k for k in alive if k.status() != psutil.STATUS_ZOMBIE], (
            f"left running a minute after the kill: {[(k.pid, k.name()) for k in alive]}"
        )
        assert {k: v for k, v in sha_tree(tmp_path).items() if not k.startswith("res/.staging-")} == before
        return
    signum = signal.SIGTERM if how == "SIGTERM" else signal.SIGINT
    (os.killpg if "group" in how else os.kill)(proc.pid, signum)
    try:
        err = proc.communicate(timeout=30)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"{how}: the runner was still running 30 s later")
    assert proc.returncode == 130, err
    assert (
        err.strip().splitlines()[-1]
        == ("interrupted: the chapter that was running was discarded; published results are as they were")
        and "Traceback" not in err
    ), err
    assert not [k for k in kids if k.is_running() and k.status() != psutil.STATUS_ZOMBIE], "processes left running"
    assert sha_tree(tmp_path) == before


def test_a_killed_run_is_cleaned_up_by_the_next(book, capsys):
    assert run(book) == "ran"
    for name in (".staging-tiny", ".staging-tiny-3xk_q1"):  # this runner's name and the older one's
        (book / "res" / name).mkdir()
        (book / "res" / name / "tiny.ipynb").write_text("half")
    (book / "res" / ".staging-tiny_other").mkdir()  # another chapter's: not ours to remove
    capsys.readouterr()
    assert run(book) == "skipped"
    assert "removed the staging folder of an interrupted run" in capsys.readouterr().out
    assert sorted(p.name for p in (book / "res").glob(".staging-*")) == [".staging-tiny_other"]


def test_a_second_run_of_a_chapter_refuses_while_the_first_holds_it(book):
    assert run(book) == "ran"
    before = snapshot(book / "res")
    with units.chapter_lock(book / "res", "tiny"):
        with pytest.raises(units.ChapterBusy, match=r"'tiny' is already running .*pid \d+.*wait for it"):
            run(book, force=True)
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "qkov_lib",
                "reproduce",
                "--profile",
                "smoke",
                "--only",
                "fig4_mu_trajectories",
                "--force",
                "--results",
                str(book / "res"),
                "--out",
                str(book / "nb"),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr  # another chapter is free to run
        with units.chapter_lock(book / "res", "fig4_mu_trajectories"):
            proc = subprocess.run(proc.args, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1 and "'fig4_mu_trajectories' is already running" in proc.stderr
    assert (
        check(book / "res" / "smoke", "tiny") and snapshot(book / "res")["smoke/tiny.json"] == before["smoke/tiny.json"]
    )


# ---- damaged or malformed data: one error naming the file (and line or member) and the fix --------------------------


def _flip_all_labels(root):
    path = root / "sva" / "rnn_agr_simple" / "numpred.val"
    path.write_text(path.read_text().replace("VBZ", "X").replace("VBP", "VBZ").replace("X", "VBP"))


def _bad_byte(relative):
    def damage(root):
        path = root / relative
        data = path.read_bytes()
        path.write_bytes(data[:40] + b"\xff" + data[40:])
        seal(root)

    return damage


def _rename_column(relative, old, new):
    def damage(root):
        path = root / relative
        path.write_text(path.read_text().replace(old, new, 1))
        seal(root)

    return damage


def _truncate_archive(root):
    path = root / "hatexplain" / "train_partial" / "ritwikmishra_Model_Eval_docs.tar.gz"
    path.write_bytes(path.read_bytes()[:300])
    seal(root)


def _move_members(root):
    """The archive with every post at another path, and one impostor at yet another path."""
    path = root / "hatexplain" / "train_partial" / "ritwikmishra_Model_Eval_docs.tar.gz"
    with tarfile.open(path) as tar:
        members = [(m.name, tar.extractfile(m).read()) for m in tar if m.isfile()]
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name.replace("Model_Eval/docs", "backup/docs"))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    seal(root)


def _tsv_cell(root, column, value):
    """Set ``column`` of the second data row of the subjects TSV, the first the loader keeps (None: cut the row
    short before it)."""
    path = root / "sva" / "derived" / "linzen_testset_subjects.tsv"
    rows = list(csv.reader(path.read_text().splitlines(), delimiter="\t"))
    at = rows[0].index(column)
    rows[2] = rows[2][:at] if value is None else rows[2][:at] + [value] + rows[2][at + 1 :]
    path.write_text("".join("\t".join(r) + "\n" for r in rows))
    seal(root)


def _drop_last_lines(relative, n, cut=0):
    def damage(root):
        path = root / relative
        text = path.read_text()
        path.write_text("".join(text.splitlines(keepends=True)[:-n]) if n else text[:-cut])
        seal(root)

    return damage


def _edit(relative, old, new):
    def damage(root):
        path = root / relative
        path.write_text(path.read_text().replace(old, new))
        seal(root)

    return damage


HX, SV = "hatexplain", "sva"
DATA_CASES = [
    ("labels flipped, manifest not updated", SV, _flip_all_labels, r"corrupt data file .*numpred.val: sha256"),
    (
        "a file missing from the manifest",
        SV,
        lambda r: (r / registry.MANIFEST).write_text(
            "".join(line + "\n" for line in (r / registry.MANIFEST).read_text().splitlines() if "numpred" not in line)
        ),
        r"numpred.val is not listed in .*SHA256SUMS",
    ),
    (
        "a malformed manifest",
        SV,
        lambda r: (r / registry.MANIFEST).write_text("not a hash line\n"),
        r"SHA256SUMS line 1 is not '<sha256>  <path>'",
    ),
    (
        "a non-UTF-8 byte in JSON Lines",
        HX,
        _bad_byte("hatexplain/hatexplain_test.json"),
        r"hatexplain_test.json line \d+ \(byte 40\) is not UTF-8",
    ),
    (
        "a non-UTF-8 byte in a prefix file",
        SV,
        _bad_byte("sva/rnn_agr_simple/numpred.val"),
        r"numpred.val line \d+ \(byte 40\) is not UTF-8",
    ),
    (
        "a non-UTF-8 byte in the subjects TSV",
        SV,
        _bad_byte("sva/derived/linzen_testset_subjects.tsv"),
        r"linzen_testset_subjects.tsv line \d+ \(byte 40\) is not UTF-8",
    ),
    ("a truncated archive", HX, _truncate_archive, r"ritwikmishra_Model_Eval_docs.tar.gz cannot be read .*truncated"),
    (
        "archive members at another path",
        HX,
        _move_members,
        r"tar.gz has no member Model_Eval/docs/<id> for 120 train posts",
    ),
    (
        "a renamed TSV column",
        SV,
        _rename_column("sva/derived/linzen_testset_subjects.tsv", "subj_index", "subject"),
        r"linzen_testset_subjects.tsv lacks the column\(s\) subj_index",
    ),
    (
        "a renamed CSV column",
        HX,
        _rename_column("hatexplain/train_partial/training_data.csv", "labels", "votes"),
        r"training_data.csv has no column 'labels'",
    ),
    (
        "a label that is no class",
        HX,
        _edit("hatexplain/train_partial/training_data.csv", '"0, 0, 1"', '"0, x, 1"'),
        r"training_data.csv data row 1: labels '0, x, 1' are not class codes",
    ),
    (
        "an index that is no number",
        SV,
        lambda r: _tsv_cell(r, "subj_index", "two"),
        r"linzen_testset_subjects.tsv line 3: subj_index 'two' is not a whole number",
    ),
    (
        "a short TSV row",
        SV,
        lambda r: _tsv_cell(r, "parser_agrees", None),
        r"linzen_testset_subjects.tsv line 3 has fewer fields than the header",
    ),
    (
        "a field missing from a JSON record",
        HX,
        _edit("hatexplain/hatexplain_test.json", '"post_tokens"', '"tokens"'),
        r"hatexplain_test.json record 1 lacks the field 'post_tokens'",
    ),
    (
        "a truncated CSV",
        HX,
        _drop_last_lines("hatexplain/train_partial/training_data.csv", 5),
        r"training_data.csv has 115 rows for 120 train ids; the file is truncated",
    ),
    (
        "truncated JSON",
        HX,
        _drop_last_lines("hatexplain/post_id_divisions.json", 0, cut=30),
        r"post_id_divisions.json is not valid JSON",
    ),
    (
        "a subject index outside the sentence",
        SV,
        lambda r: _tsv_cell(r, "subj_index", "99"),
        r"line 3: subject index 99 and verb index .* do not fit",
    ),
    (
        "an unknown verb tag",
        SV,
        _edit("sva/rnn_agr_simple/numpred.val", "VBZ\t", "VBD\t"),
        r"numpred.val line 1: label 'VBD' is neither VBZ nor VBP",
    ),
    (
        "an incomplete offline copy",
        HX,
        lambda r: (r / "hatexplain" / "hatexplain_test.json").unlink(),
        r"offline HateXplain copy incomplete: hatexplain/hatexplain_test.json is missing",
    ),
    (
        "divisions without the train split",
        HX,
        _edit("hatexplain/post_id_divisions.json", '"train"', '"training"'),
        r"post_id_divisions.json has no list of post ids under 'train' \(it needs 'train'\); the file is damaged",
    ),
]


@pytest.mark.parametrize("dataset,damage,message", [c[1:] for c in DATA_CASES], ids=[c[0] for c in DATA_CASES])
def test_damaged_data_is_one_clear_error(tmp_path, monkeypatch, dataset, damage, message):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    (write_hatexplain_offline if dataset == HX else write_sva_offline)(tmp_path)
    damage(tmp_path)
    with pytest.raises(DataError, match=message):
        (hatexplain if dataset == HX else sva).load()


def test_an_impostor_member_at_another_path_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    write_hatexplain_offline(tmp_path)
    path = tmp_path / "hatexplain" / "train_partial" / "ritwikmishra_Model_Eval_docs.tar.gz"
    with tarfile.open(path) as tar:
        members = [(m.name, tar.extractfile(m).read()) for m in tar if m.isfile()]
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members + [("elsewhere/train0_twitter", b"impostor tokens")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    seal(tmp_path)
    splits, _ = hatexplain.load()
    assert "impostor" not in splits["train"].tokens[0]


def test_canonical_files_are_checked_against_the_download_record(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    write_hatexplain_canonical(tmp_path)
    write_sva_canonical(tmp_path)
    hatexplain.load(), sva.load()
    path = tmp_path / "hatexplain" / "dataset.json"  # no published hash: the manifest written at download time
    path.write_text(path.read_text().replace('"hatespeech"', '"normal"'))
    with pytest.raises(DataError, match="corrupt data file .*dataset.json: sha256 .* SHA256SUMS"):
        hatexplain.load()
    gz = tmp_path / "sva" / "agr_50_mostcommon_10K.tsv.gz"
    gz.write_bytes(gzip.compress(b"sentence\tverb_pos\tverb_index\tsubj_index\nthe dog \xff barks\tVBZ\t4\t2\n"))
    seal(tmp_path)
    with pytest.raises(DataError, match="agr_50_mostcommon_10K.tsv.gz: byte .* not UTF-8"):
        sva.load()


def test_a_smoke_run_on_flipped_labels_fails(book, capsys):
    """Checksums are verified in every profile: the smoke SVA chapter refuses a training file with flipped labels."""
    _flip_all_labels(book / "data")
    assert cli(book, "--only", "sva") == 1
    err = capsys.readouterr().err
    assert re.search(r"DataError: corrupt data file .*numpred.val: sha256", err), err
    assert sorted(snapshot(book / "res")) == ["smoke/failed/sva.ipynb"]


# ---- a chapter whose dataset is not there: a page that says so, exit 0 (1 with --strict) ---------------------------


def test_a_chapter_without_its_data_gets_a_page_saying_so(book, monkeypatch, capsys):
    monkeypatch.delenv(DATA_ENV)
    no_download = ("--only", "sva", "-p", "download", "False")  # the tests never reach the network
    assert cli(book, *no_download) == 0
    err = capsys.readouterr().err
    assert "1 chapter(s) without their data, each page says how to get it: sva" in err
    page = (book / "nb" / "sva.ipynb").read_text()
    assert "sva data not available" in page and "QKOV_DATA_DIR" in page and "reproduce --only sva" in page
    assert "most recent call last" not in page and "papermill-error-cell-tag" not in page
    assert check(book / "res" / "smoke", "sva")["status"] == "data unavailable"
    table, missing = scorecard.gather(book / "res" / "smoke")
    assert "sva" not in set(table["page"]) and "data was not available" in missing["sva"]
    assert cli(book, *no_download, "--strict") == 1  # unchanged, so skipped, and still without data
    assert "without their data" in capsys.readouterr().err
    monkeypatch.setenv(DATA_ENV, str(book / "data"))
    assert cli(book, *no_download) == 0  # the data appeared: the chapter reruns
    assert "status" not in check(book / "res" / "smoke", "sva") and "without their data" not in capsys.readouterr().err
