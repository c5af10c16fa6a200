"""The runner's progress lines while a chapter computes (``runner.watch``), from the events its stored computations
write (``core.progress.runs_event``, written by ``runs.store.Batch``)."""

import io
import json

from qkov_lib.core import progress
from qkov_lib.core.chapter import Scope, scoped
from qkov_lib.runner import watch


def events(path, *items):
    with open(path, "a", encoding="utf-8") as fh:
        for e in items:
            fh.write(json.dumps(e) + "\n")


def test_each_finished_run_gives_a_line_with_elapsed_and_time_left(tmp_path, monkeypatch):
    path, out = tmp_path / "runs.jsonl", io.StringIO()
    seen = watch.Watch(path, "official", out)
    events(path, {"event": "start", "chapter": "sva", "runs": 4, "workers": 2, "estimate_s": 2400.0, "time": 0.0})
    seen.poll()
    events(path, {"event": "done", "run": "baseline-seed1", "seconds": 600.0, "time": 600.0})
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"event": "done", "run": "baseline-se')  # a line being written: read once it ends
    seen.poll()
    assert out.getvalue().splitlines() == [
        "  sva (official): computing 4 runs on 2 worker(s), about 40 min of CPU time by their stored compute times",
        "  sva (official): run 1 of 4 done (baseline-seed1, 10 min); 10 min elapsed, about 15 min left",
    ]
    monkeypatch.setattr(watch.time, "time", lambda: 600.0 + progress.LOG_INTERVAL + 1)
    seen.said = 600.0
    seen.poll()  # nothing new for LOG_INTERVAL seconds: a line of where it stands
    assert out.getvalue().splitlines()[-1] == "  sva (official): 1 of 4 runs done; 11 min elapsed, about 15 min left"
    assert watch.minutes(45) == "45 s" and watch.minutes(9000) == "2.5 h"
    note, heard = watch.Watch(tmp_path / "notes.jsonl", "official", io.StringIO()), "sva: b-seed2 replaced (x)"
    events(tmp_path / "notes.jsonl", {"event": "note", "text": heard, "time": 1.0})
    note.poll()  # what a computation says (``runs.store``, under --force), as it says it
    assert note.out.getvalue() == f"  {heard}\n"


def test_a_stored_computation_writes_its_events_where_the_runner_asks(tmp_path, monkeypatch):
    from tests.unit.runs import test_store

    monkeypatch.setenv("QKOV_RESULTS_ROOT", str(tmp_path / "results"))
    monkeypatch.setenv("QKOV_STORE_ROOT", str(tmp_path / "store"))
    monkeypatch.setenv(progress.RUNS_ENV, str(tmp_path / "runs.jsonl"))
    with scoped(Scope("tiny", "default")):
        test_store.compute([0, 1])
    said = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert [e["event"] for e in said] == ["start", "done", "done"]
    assert said[0]["chapter"] == "tiny" and said[0]["runs"] == 2 and said[0]["estimate_s"] is None
    assert [e["run"] for e in said[1:]] == ["run-seed0", "run-seed1"]


def test_the_runner_asks_only_inside_its_block(tmp_path):
    with watch.watching("default", every=0.01):
        path = progress.os.environ[progress.RUNS_ENV]
        progress.runs_event(event="start", chapter="x", runs=1, workers=1, estimate_s=None)
    assert progress.RUNS_ENV not in progress.os.environ
    assert not (tmp_path / path).exists()
    progress.runs_event(event="start")  # no runner: nothing written, no error


def test_the_last_line_names_the_store_files_a_build_changed(tmp_path):
    (tmp_path / "default" / "sva").mkdir(parents=True)
    (tmp_path / "default" / "sva" / "a.csv").write_text("1\n")
    (tmp_path / "default" / "sva" / "manifest.json").write_text("{}")
    before = watch.snapshot(tmp_path)
    assert watch.changed(before, watch.snapshot(tmp_path)) == "the committed store (data/store): no file changed"
    (tmp_path / "default" / "sva" / "a.csv").write_text("2\n")
    (tmp_path / "default" / "sva--matched-steps").mkdir()
    (tmp_path / "default" / "sva--matched-steps" / "b.csv").write_text("1\n")
    assert watch.changed(before, watch.snapshot(tmp_path)) == (
        "the committed store (data/store): 2 file(s) written or removed, in default/sva (1), "
        "default/sva--matched-steps (1): commit them"
    )
