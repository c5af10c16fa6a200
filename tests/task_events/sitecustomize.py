"""An event for tests: each worker process of the library's pools says when it starts its first task, by a datagram
(its pid) to the abstract Unix socket named in ``QKOV_TEST_TASK_SOCKET`` (Linux's abstract names need no file).
Python imports this module at start in every process that has this folder on its PYTHONPATH (a runner, its
chapter's kernel, the kernel's spawned workers): it wraps ``qkov_lib.core.workers.timed``, which runs each task in a
worker, as that module is imported.

The test waits on the socket (``recv`` with a timeout) instead of polling the processes."""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import multiprocessing
import os
import socket
import sys

SOCKET_ENV = "QKOV_TEST_TASK_SOCKET"
MODULE = "qkov_lib.core.workers"


def _announce() -> None:
    """One datagram with this process's pid; never blocks, and a test that stopped listening is no error."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(str(os.getpid()).encode(), socket.MSG_DONTWAIT, "\0" + os.environ[SOCKET_ENV])
    except OSError:
        pass


def _wrap(module) -> None:
    timed, said = module.timed, []

    @functools.wraps(timed)
    def announced(fn, *args):
        if not said and multiprocessing.parent_process() is not None:  # a pool's worker, not the kernel itself
            said.append(True)
            _announce()
        return timed(fn, *args)

    module.timed = announced  # the pool pickles it by name: the worker's import finds this one too


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds ``MODULE`` as the other finders would, and wraps its task runner once the module has run."""

    def find_spec(self, name, path, target=None):
        if name != MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _wrap(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if os.environ.get(SOCKET_ENV):
    sys.meta_path.insert(0, _AfterImport())
