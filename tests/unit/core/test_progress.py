"""Progress as each place can show it: plain whole lines in a log (no carriage return, no nested redraws), tqdm's bar
on a terminal, and the compile notice once for a run and the processes it starts, on stdout."""

from __future__ import annotations

import io
import multiprocessing
import os
import subprocess
import sys

import pytest

from qkov_lib.core import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def progress_on(monkeypatch):
    monkeypatch.setenv(progress.PROGRESS_ENV, "1")


def test_a_file_or_a_pipe_is_a_log_and_a_terminal_is_a_terminal():
    assert not progress._notebook_kernel()  # pytest is no notebook kernel
    assert progress.kind(io.StringIO()) == progress.LOG
    assert progress.kind(Terminal()) == progress.TERMINAL
    with open(os.devnull, "w") as closed:
        pass
    assert progress.kind(closed) == progress.LOG  # a closed stream: no isatty to ask
    assert isinstance(progress.bar(range(3), "x", file=io.StringIO()), progress.LogBar)


def test_a_bar_in_a_log_writes_its_lines_to_stdout(capsys):
    for _ in progress.bar(range(3), "counting"):  # pytest's captured stderr is no terminal
        pass
    out, err = capsys.readouterr()
    assert out.splitlines() == [line for line in out.splitlines() if line.startswith("counting")] and len(out) > 0
    assert err == ""


def test_bars_in_a_log_are_whole_lines_even_nested(monkeypatch):
    monkeypatch.setattr(progress, "LOG_INTERVAL", 1e9)  # no line between start and end, however slow the machine
    log = io.StringIO()
    with progress.bar(None, "outer", total=3, file=log) as outer:
        for _ in range(3):
            for _ in progress.bar(range(1000), "inner", file=log, leave=False):
                pass
            outer.update()
    text = log.getvalue()
    assert "\r" not in text and "\x1b" not in text  # no carriage returns, no cursor movement
    lines = text.splitlines()
    assert lines[0].startswith("outer:   0%") and lines[-1].startswith("outer: 100%") and "3/3" in lines[-1]
    inner = [line for line in lines if line.startswith("inner")]
    assert len(inner) == 6 and all("1000/1000" in line for line in inner[1::2])  # each: started, ended
    assert len(lines) == 8  # and nothing in between (the interval is longer than the test)


def test_a_bar_on_a_terminal_redraws_in_place_and_progress_off_writes_nothing(monkeypatch):
    screen = Terminal()
    for _ in progress.bar(range(3), "x", file=screen):
        pass
    assert "\r" in screen.getvalue()
    monkeypatch.setenv(progress.PROGRESS_ENV, "0")
    quiet = io.StringIO()
    for _ in progress.bar(range(3), "x", file=quiet):
        pass
    assert quiet.getvalue() == ""


def _say(key: str) -> bool:
    return progress.notice(key, "compiling the engine's kernels (once; cached afterwards)")


def test_the_compile_notice_is_said_once_for_a_run_and_its_workers_on_stdout(capfd, monkeypatch):
    monkeypatch.setenv(progress.SESSION_ENV, f"test-{os.getpid()}-{id(capfd)}")  # a run of its own
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        said = pool.map(_say, ["compile"] * 6)
    assert sum(said) == 1 and not _say("compile")
    out, err = capfd.readouterr()
    assert out.count("compiling the engine's kernels") == 1 and "compiling" not in err


def test_another_run_says_it_again():
    code = "from qkov_lib.core import progress; print(progress.notice('compile', 'compiling the engine\\'s kernels'))"
    env = {k: v for k, v in os.environ.items() if k != progress.SESSION_ENV}
    runs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        for _ in range(2)
    ]
    assert [r.stdout.count("compiling the engine's kernels") for r in runs] == [1, 1]


def test_in_a_notebook_kernel_a_bar_is_a_widget_or_without_ipywidgets_lines(monkeypatch):
    class Widget(progress.tqdm):
        pass

    monkeypatch.setattr(progress, "_notebook_kernel", lambda: True)
    monkeypatch.setattr(progress, "_widgets", lambda: Widget)
    assert progress.kind(Terminal()) == progress.WIDGET
    assert type(progress.bar(range(3), "x", file=io.StringIO())) is Widget
    monkeypatch.setattr(progress, "_widgets", lambda: None)  # no ipywidgets: a kernel's stderr is no terminal
    assert progress.kind(io.StringIO()) == progress.LOG
