"""The sweep runner on Dask, with the atlas's own task (tiny Figure 2 settings): serial and LocalCluster runs give the
same rows; a worker killed mid-task loses and duplicates nothing; an interrupted sweep resumes without redoing
finished cells; the ablation's runs are tasks of the same sweep beside the grid's settings."""

import os
import signal
import sys
import threading
import time

import pandas as pd
import pytest

from qkov_lib.chapters import atlas
from qkov_lib.chapters.atlas import ablation, claims, grid, pages
from qkov_lib.chapters.atlas.setup import shared
from qkov_lib.runner.catalog import resolve
from qkov_lib.runs import sweep
from qkov_lib.core.budget import DEADLINE_ENV
from qkov_lib.runs.sweep import CELL, OutOfTime, cell_id, dask_client, run_sweep

TINY = {
    "seeds": [0, 1],
    "n_train": 64,
    "n_test": 64,
    "max_steps": 40,
    "eval_every": 10,
    "ramp_steps": 20,
    "inits": [["identity", 1e-6], ["balanced", 0.1], ["pytorch", 1.0]],
    "lrs": [1.0],
    "scaled_scores": [False, True],
}


def setup(**changes):
    s = resolve("atlas", "smoke", TINY | changes)[1]
    return grid.settings(s), shared(s)


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    cells, common = setup()
    return run_sweep(atlas.run_setting, cells, common, tmp_path_factory.mktemp("serial"), "serial", progress=False)


def test_grid_and_rows(serial):
    cells, _ = setup()
    assert len(cells) == 6 and serial.ran == 6 and serial.reused == 0
    per_cell = serial.rows.groupby(CELL).size()
    assert len(per_cell) == 6 and (per_cell == 8 * 2).all()  # 8 panels x 2 seeds in every setting
    assert list(serial.rows[CELL].drop_duplicates()) == [cell_id(c) for c in cells]  # the grid's order


def test_local_cluster_gives_the_serial_rows(serial, tmp_path):
    cells, common = setup()
    dask = run_sweep(atlas.run_setting, cells, common, tmp_path, workers=2, progress=False)
    pd.testing.assert_frame_equal(dask.rows, serial.rows, check_exact=True)


STARTED = "qkov-test-a-task-started"


def setting_that_says_it_started(cell, common):
    """The atlas's task, setting a Dask event as it starts (the same rows)."""
    from distributed import Event  # lazy: as the sweep runner imports Dask

    Event(STARTED).set()
    return atlas.run_setting(cell, common)


def test_a_worker_killed_mid_task_loses_and_duplicates_nothing(serial, tmp_path):
    """A worker is killed once a task has started on it (a Dask event, not a poll): its task runs again elsewhere."""
    import cloudpickle
    from distributed import Event

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module
    cells, common = setup()
    killed: dict[str, object] = {}
    with dask_client(workers=2) as client:
        pids = client.run(os.getpid)
        started = Event(STARTED, client=client)

        def kill_a_busy_worker() -> None:
            if not started.wait(timeout=300):
                return
            busy = {w: keys for w, keys in client.processing().items() if keys}
            worker, keys = next(iter(busy.items()))
            killed.update(worker=worker, keys=list(keys))
            os.kill(pids[worker], signal.SIGKILL)

        killer = threading.Thread(target=kill_a_busy_worker)
        killer.start()
        out = run_sweep(
            setting_that_says_it_started, cells, common, tmp_path, scheduler=client.scheduler.address, progress=False
        )
        killer.join()
    assert killed.get("keys"), "no worker was busy to be killed"
    with pytest.raises(ProcessLookupError):
        os.kill(pids[killed["worker"]], 0)  # that worker process is gone
    pd.testing.assert_frame_equal(out.rows, serial.rows, check_exact=True)
    assert out.ran == 6


def test_an_interrupted_sweep_resumes_where_it_stopped(serial, tmp_path):
    cells, common = setup()
    started = []

    def interrupted_at_the_third(cell, common):
        started.append(cell)
        if len(started) == 3:
            raise KeyboardInterrupt  # Ctrl-C during the third setting
        return atlas.run_setting(cell, common)

    with pytest.raises(KeyboardInterrupt):
        run_sweep(interrupted_at_the_third, cells, common, tmp_path, "serial", progress=False)
    assert len(list(tmp_path.glob("*.csv"))) == 2 and not list(tmp_path.glob(".*"))  # two finished, nothing half
    resumed = run_sweep(atlas.run_setting, cells, common, tmp_path, "serial", progress=False)
    assert (resumed.ran, resumed.reused) == (4, 2)
    pd.testing.assert_frame_equal(resumed.rows, serial.rows, check_exact=True)


def test_a_serial_sweep_past_the_deadline_keeps_its_cells_and_the_next_run_continues(serial, tmp_path, monkeypatch):
    """The runner's deadline is checked before each cell: the first two cells start in time, the third does not."""
    cells, common = setup()
    clock = iter([10.0, 20.0, 2000.0])
    monkeypatch.setattr(sweep.time, "time", lambda: next(clock))
    monkeypatch.setenv(DEADLINE_ENV, "1000")
    with pytest.raises(OutOfTime, match=r"2 of 6 cells are finished and kept in [^/]+/[^ ]+; the next run continues"):
        run_sweep(atlas.run_setting, cells, common, tmp_path, "serial", progress=False)
    assert len(list(tmp_path.glob("*.csv"))) == 2
    monkeypatch.delenv(DEADLINE_ENV)
    resumed = run_sweep(atlas.run_setting, cells, common, tmp_path, "serial", progress=False)
    assert (resumed.ran, resumed.reused) == (4, 2)
    pd.testing.assert_frame_equal(resumed.rows, serial.rows, check_exact=True)


def test_a_sweep_on_dask_stops_waiting_at_the_deadline(tmp_path, monkeypatch):
    """On Dask the wait for cells ends at the deadline (here already past): the cells are cancelled, none is half
    written, and the error says how many are kept."""
    cells, common = setup()
    monkeypatch.setenv(DEADLINE_ENV, repr(time.time() - 1))
    with pytest.raises(OutOfTime, match="0 of 6 cells are finished"):
        run_sweep(atlas.run_setting, cells, common, tmp_path, workers=1, progress=False)
    assert not list(tmp_path.glob("*.csv")) and not list(tmp_path.glob(".*"))


def test_a_deadline_that_is_no_time_is_one_error(tmp_path, monkeypatch):
    monkeypatch.setenv(DEADLINE_ENV, "soon")
    with pytest.raises(ValueError, match="QKOV_DEADLINE='soon' is not a time in seconds since the epoch; unset it"):
        run_sweep(atlas.run_setting, *setup()[:1], {}, tmp_path, "serial", progress=False)


def test_bad_grid_and_damaged_cell_file(tmp_path):
    cells, common = setup()
    with pytest.raises(ValueError, match="names a cell twice"):
        run_sweep(atlas.run_setting, cells + cells[:1], common, tmp_path, "serial", progress=False)
    run_sweep(atlas.run_setting, cells[:1], common, tmp_path, "serial", progress=False)
    (tmp_path / f"{cell_id(cells[0])}.csv").write_bytes(b"\x00\xff not a table")
    with pytest.raises(ValueError, match="cannot be read .*delete it and rerun"):
        run_sweep(atlas.run_setting, cells[:1], common, tmp_path, "serial", progress=False)


def test_verdicts_are_figure2s_checks_per_setting(serial):
    table = claims.claims_per_setting(serial.rows)
    ids = ("collapsed_ov_top_right", "fafo_top_left", "faster_qk_top_right", "prediction_kept")  # Figure 2's claims
    assert len(table) == 6 * len(ids) and tuple(dict.fromkeys(table["claim_id"])) == ids
    assert set(pages.SHORT) == set(ids)  # every claim has its short name for the page
    share = claims.where_claims_hold(table)
    assert (share["settings"] == 6).all() and (share[["holds", "fails", "undecided"]].sum(axis=1) == 6).all()
    assert set(table["verdict"]) <= {"holds", "fails", "undecided"}
    assert (table["models"] == 8 * 2).all() and (table["capped models"] <= table["models"]).all()
    counts = pages.by_axis(table)
    assert list(dict.fromkeys(counts.index.get_level_values("axis"))) == [
        "initialisation",
        "learning rate",
        "score scaling",
    ]
    assert list(counts.columns) == [pages.SHORT[i] for i in ids]
    held = (
        table[table["init"] == "identity"]
        .groupby("claim_id", sort=False)["verdict"]
        .apply(lambda v: f"{(v == 'holds').sum()} of {len(v)}")
    )
    assert counts.loc[("initialisation", "identity ×10⁻⁶")].tolist() == held.tolist()
    shown = pages.share_table(table)
    assert list(shown.index) == [pages.SHORT[i] for i in ids] and (shown["of settings"] == 6).all()
    panels = pages.panel_table(serial.rows)
    assert len(panels) == 6 * 8 and panels["setting"].iloc[0] == "identity ×10⁻⁶, rate 1, unscaled"
    assert set(panels["capped"]) <= {"0 of 2", "1 of 2", "2 of 2"}


def test_the_ablation_runs_as_tasks_of_the_same_sweep(tmp_path):
    s = resolve(
        "atlas",
        "smoke",
        TINY
        | {
            "inits": [["identity", 1e-6]],
            "scaled_scores": [False],
            "ablation_factors": ["scaling", "fresh"],
            "ablation_cap": 20,
        },
    )[1]
    tasks, common = atlas.tasks(s), shared(s)
    assert len(tasks) == 6 + 1 and [t[grid.RUN] for t in tasks[:6]] == [
        "paper",
        "paper+scaling",
        "paper+fresh",
        "authors",
        "authors-scaling",
        "authors-fresh",
    ]
    out = run_sweep(atlas.run_setting, tasks, common, tmp_path, "serial", progress=False)
    grid_part, ablation_part = grid.rows_of(out.rows), ablation.rows_of(out.rows)
    assert len(grid_part) == 8 * 2 and grid.RUN not in grid_part and grid_part["scaled_scores"].dtype == bool
    assert len(ablation_part) == 6 * 8 * 2 and (ablation_part["steps"] <= 20).all() and "init" not in ablation_part
    pd.testing.assert_frame_equal(
        grid_part,
        grid.rows_of(run_sweep(atlas.run_setting, grid.settings(s), common, tmp_path, "serial", progress=False).rows),
    )
    table = claims.claims_per_run(ablation_part, s.ablation_factors)
    assert len(table) == 6 * 4 and list(dict.fromkeys(table[grid.RUN])) == [t[grid.RUN] for t in tasks[:6]]
    assert set(claims.flips(table)["factor"]) == {"scaling", "fresh"}
    assert len(claims.claims_per_setting(out.rows)) == 4  # the grid's one setting; the ablation's rows are left out


def test_workers_with_other_arithmetic_are_refused(monkeypatch):
    from qkov_lib.runs.sweep import same_arithmetic
    from qkov_lib.core import portable

    ours = portable.settings()
    same_arithmetic({"tcp://a:1": ours, "tcp://b:2": ours})
    with pytest.raises(ValueError, match="Dask workers tcp://b:2 compute with other arithmetic settings"):
        same_arithmetic({"tcp://a:1": ours, "tcp://b:2": {}})
