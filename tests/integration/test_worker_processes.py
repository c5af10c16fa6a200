"""What needs worker processes: the compile notice said once for a run and the processes it starts (and again by
another run), and stacks trained in a pool giving the numbers one process gives (the synthetic engine's stacks,
Figure 3's models). Moved here from the unit tier, which starts no process (tests/unit/conftest.py)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from qkov_lib.core import progress
from qkov_lib.runs.fixed_attention import OVModel, run_fixed_attention, run_models
from unit.runs.test_fixed_attention import _toy
from unit.train.test_engine import RUNS, _run


@pytest.fixture(autouse=True)
def progress_on(monkeypatch):
    monkeypatch.setenv(progress.PROGRESS_ENV, "1")


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


def test_stacks_in_worker_processes_give_the_same_results(monkeypatch):
    inline = _run(RUNS, [3])
    monkeypatch.setenv("QKOV_WORKERS", "2")
    pooled = _run(RUNS, [3])
    for a, b in zip(inline, pooled):
        assert a.panel == b.panel
        assert np.allclose(a.summary["final_train_nll"], b.summary["final_train_nll"], rtol=1e-5)
        assert np.allclose(a.heatmaps, b.heatmaps)
    monkeypatch.setenv("QKOV_WORKERS", "two")
    with pytest.raises(ValueError, match="QKOV_WORKERS='two' is not a number of processes"):
        _run(RUNS, [3])


def test_split_stacks_give_the_rows_of_one_stack_per_model(monkeypatch):
    """run_models trains each OV model's alphas as separate stacks (in worker processes): the curves equal, bit for
    bit and row for row, those of one stack per model in this process."""
    monkeypatch.setenv("QKOV_WORKERS", "2")
    feats, labels = _toy(100)
    feats, labels = torch.cat([feats, feats]), torch.cat([labels, labels])
    models = [OVModel(True, init="balanced", init_scale=0.5), OVModel(False, True, init="balanced", init_scale=0.5)]
    args = ([0.2, 0.5, 0.9], [0, 1], feats, labels, feats, labels)
    kw = dict(lr=0.2, batch_size=20, epochs=3, delta=0.01, progress=False)
    split = run_models(models, *args, **kw)
    whole = pd.concat([run_fixed_attention(m, *args, **kw) for m in models], ignore_index=True)
    pd.testing.assert_frame_equal(split, whole, check_exact=True)
