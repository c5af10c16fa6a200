"""Progress bars for long runs, each drawn as the place it goes to can show it; QKOV_PROGRESS=0 turns them off (the
runner does, so executed chapters stay clean). ``kind`` decides, at each bar:

- ``widget``: in a notebook kernel (JupyterLab, Binder, Colab, plain papermill) with ipywidgets installed, a widget
  (``tqdm.notebook``, what ``tqdm.auto`` picks there);
- ``terminal``: where stderr is a terminal (``isatty()``), tqdm's bar redrawn in place;
- ``log``: anywhere else: stderr a file or a pipe (a CI log, ``make book > log 2>&1``, the worker processes of a
  notebook kernel, whose output the kernel forwards), or a notebook without ipywidgets. A bar is then plain lines on
  stdout (news, not an error: a notebook shows stderr in red), each ending in a newline (no carriage return, no
  cursor movement, so no nested bars), one when it starts, at most one every ``LOG_INTERVAL`` seconds, and one when
  it ends.

``notice`` says something once for a whole run, the processes it starts included (the compiled engine's "compiling
the engine's kernels", which every worker would otherwise print), on stdout: it is news, not an error.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from tqdm import tqdm

PROGRESS_ENV = "QKOV_PROGRESS"
SESSION_ENV = "QKOV_SESSION"  # set by the first process that imports this module; the processes it starts inherit it
LOG_INTERVAL = 30.0  # seconds: the most often a bar writes a line to a log
WIDGET, TERMINAL, LOG = "widget", "terminal", "log"

os.environ.setdefault(SESSION_ENV, f"{os.getpid()}-{time.time_ns()}")


def _notebook_kernel() -> bool:
    """Whether this process is a Jupyter kernel (tqdm.autonotebook's test; a qtconsole or Spyder draws no widget)."""
    if "ipykernel.zmqshell" not in sys.modules or "IPython" not in sys.modules:
        return False
    shell = sys.modules["IPython"].get_ipython()
    return (
        shell is not None
        and type(shell).__name__ == "ZMQInteractiveShell"
        and not any(k == "QT_API" or k.startswith("SPYDER") for k in os.environ)
    )


def _widgets() -> type[tqdm] | None:
    """tqdm's notebook bar, or None without ipywidgets."""
    from tqdm import notebook  # lazy: it imports ipywidgets, which only a notebook kernel draws

    return notebook.tqdm if notebook.IProgress is not None else None


def kind(stream=None) -> str:
    """How a bar writing to ``stream`` (default stderr) is drawn: WIDGET, TERMINAL or LOG (module docstring)."""
    stream = sys.stderr if stream is None else stream
    if _notebook_kernel() and _widgets() is not None:
        return WIDGET
    try:
        return TERMINAL if stream.isatty() else LOG
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return LOG


class LogBar(tqdm):
    """A bar for a log: whole lines, one when it starts, at most one every LOG_INTERVAL seconds, one when it ends
    (leave or not); tqdm's in-place redraws (carriage returns, moving to a nested bar's line) never happen."""

    def __init__(self, *args, **kwargs) -> None:
        self._logged: float | None = None
        kwargs.update(mininterval=LOG_INTERVAL, maxinterval=LOG_INTERVAL, position=None)
        super().__init__(*args, **kwargs)

    @staticmethod
    def status_printer(file):
        return lambda s: None  # every line goes through display

    def display(self, msg=None, pos=None) -> bool:
        if msg == "" or self.n == self._logged:  # a clearing redraw, or nothing new since the last line
            return False
        self._logged = self.n
        self.fp.write(self.__str__() + "\n")
        self.fp.flush()
        return True

    def clear(self, nolock=False) -> None:
        pass  # lines in a log stay

    def close(self) -> None:
        if not self.disable:
            self.display()  # the last line, where the bar ended
            self.leave = False  # tqdm's own close then writes nothing more
        super().close()


def bar(iterable: Iterable | None, desc: str, enabled: bool = True, **kwargs) -> tqdm:
    """A progress bar (``kind``) that refreshes at most once a second (a log: every LOG_INTERVAL seconds), unless
    disabled here or by QKOV_PROGRESS=0."""
    off = not enabled or os.environ.get(PROGRESS_ENV, "1") == "0"
    how = kind(kwargs.get("file"))
    cls = _widgets() if how == WIDGET else tqdm if how == TERMINAL else LogBar
    if cls is None:  # kind() says WIDGET only when _widgets() found ipywidgets
        raise RuntimeError("a notebook progress bar needs ipywidgets, which did not import; install it")
    if how == LOG:
        kwargs.setdefault("file", sys.stdout)
    return cls(iterable, desc=desc, disable=off, mininterval=1.0, **kwargs)


def notice(key: str, text: str) -> bool:
    """Print ``text`` on stdout as one line (its runs of whitespace, newlines included, as one space: an exception's
    message may span lines), once for this run and every process it started (``SESSION_ENV``), however many of them
    reach this line; returns whether this call printed it. ``key`` names the notice."""
    folder = Path(tempfile.gettempdir()) / f"qkov-notices-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    mark = folder / re.sub(r"[^A-Za-z0-9_.-]", "_", f"{os.environ[SESSION_ENV]}-{key}")
    try:
        folder.mkdir(exist_ok=True)
        os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    except OSError:
        pass  # no temporary folder to mark it in: say it (at worst once per process)
    tqdm.write(" ".join(text.split()), file=sys.stdout)
    sys.stdout.flush()
    return True


RUNS_ENV = "QKOV_RUNS_LOG"  # a file the runner names (``runner.watch``): the stored computations' progress, in lines


def runs_event(**event: object) -> None:
    """Append one event of a stored computation (``runs.store.Batch``: its start, each run done) to the runner's
    file (``RUNS_ENV``) as a JSON line, with its time; nothing where no runner asked for them."""
    path = os.environ.get(RUNS_ENV)
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**event, "time": time.time()}, default=str) + "\n")
    except OSError:
        pass  # progress is news: a run never fails for it
