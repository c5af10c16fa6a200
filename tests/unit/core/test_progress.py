"""Progress as each place can show it: plain whole lines in a log (no carriage return, no nested redraws), tqdm's bar
on a terminal (the compile notice across processes: tests/integration/test_worker_processes.py)."""

from __future__ import annotations

import io
import os

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


def test_in_a_notebook_kernel_a_bar_is_a_widget_or_without_ipywidgets_lines(monkeypatch):
    class Widget(progress.tqdm):
        pass

    monkeypatch.setattr(progress, "_notebook_kernel", lambda: True)
    monkeypatch.setattr(progress, "_widgets", lambda: Widget)
    assert progress.kind(Terminal()) == progress.WIDGET
    assert type(progress.bar(range(3), "x", file=io.StringIO())) is Widget
    monkeypatch.setattr(progress, "_widgets", lambda: None)  # no ipywidgets: a kernel's stderr is no terminal
    assert progress.kind(io.StringIO()) == progress.LOG


def test_a_notice_is_one_line_said_once_even_when_its_text_spans_lines(monkeypatch, tmp_path, capsys):
    """An exception's message may hold newlines (numba's damaged cache: an unpickling error on two lines)."""
    monkeypatch.setattr(progress.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setenv(progress.SESSION_ENV, "test-session")
    assert progress.notice("cache", "damaged (UnpicklingError: an instruction was encountered,\n  but no function)")
    assert not progress.notice("cache", "said again")
    assert capsys.readouterr().out == "damaged (UnpicklingError: an instruction was encountered, but no function)\n"
