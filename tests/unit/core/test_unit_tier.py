"""The unit tier's guard (tests/unit/conftest.py) refuses every way a test could start a process."""

import multiprocessing
import subprocess
import sys

import pytest
import torch

from qkov_lib.core.device import cpu_workers
from qkov_lib.core.workers import run_each


def test_a_subprocess_a_spawned_pool_and_a_library_pool_are_each_refused():
    message = "a unit test started a process; move the test to tests/integration"
    with pytest.raises(AssertionError, match=message):
        subprocess.run([sys.executable, "-c", "pass"])
    with pytest.raises(AssertionError, match=message):
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            pool.map(abs, [1, 2])
    assert cpu_workers(torch.device("cpu")) == 1  # the library's pools run in the test's own process here
    ran: list[int] = []
    assert run_each(abs, [(-1,), (-2,)], 1, lambda i, out, s: ran.append(out), lambda: True) == 2 and ran == [1, 2]
