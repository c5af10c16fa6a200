"""The fast tier by construction: a unit test starts no process (no subprocess, no process pool, no fork), so none
waits on an interpreter's start, a kernel or a browser; a test that needs one belongs in ``tests/integration``. Work
that the library spreads over worker processes runs here in the test's own (``QKOV_WORKERS=1``), and the commit a
result records is a fixed one (no ``git`` is run)."""

import multiprocessing.util
import os
import subprocess

import pytest

from qkov_lib.core import results
from qkov_lib.core.device import WORKERS_ENV

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _refuse(*args, **kwargs):
    raise AssertionError(
        "a unit test started a process; move the test to tests/integration, or test the function the process runs"
    )


@pytest.fixture(autouse=True)
def no_processes(monkeypatch):
    monkeypatch.setenv(WORKERS_ENV, "1")
    monkeypatch.setattr(results, "git_commit", lambda: COMMIT)
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse)
    monkeypatch.setattr(multiprocessing.util, "spawnv_passfds", _refuse)
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _refuse)
