"""``results verify`` (``qkov_lib.runner.verify``): a seeded draw of current stored runs, each recomputed and compared
with its files (``store_modes.recheck``, tested with the store), a line each and a last line counting them."""

from argparse import Namespace

import pandas as pd

from qkov_lib.core import files
from qkov_lib.core.chapter import Scope, scoped
from qkov_lib.core.results import RESULTS_ENV, ROOT_ENV
from qkov_lib.runner import stored, verify
from qkov_lib.runs import store, store_modes, store_verify


def runs(*states: str, commit: str = "abc") -> list[store.RunState]:
    return [
        store.RunState(f"run-{i}", state, commit=commit if i else commit + "+dirty") for i, state in enumerate(states)
    ]


def listing(monkeypatch) -> None:
    found = {"alpha": runs("current", "stale", "current"), "beta": runs("current", "missing")}
    monkeypatch.setattr(
        stored, "chapter_runs", lambda chapter, profile: stored.ChapterRuns(chapter, profile, found[chapter])
    )


def test_the_draw_takes_current_runs_only_and_is_the_same_for_a_seed(monkeypatch):
    listing(monkeypatch)
    every = verify.drawn("default", ["alpha", "beta"], None, 0)
    assert every == {("alpha", "alpha"): ["run-0", "run-2"], ("beta", "beta"): ["run-0"]}  # never stale or missing
    two = verify.drawn("default", ["alpha", "beta"], 2, 7)
    assert sum(map(len, two.values())) == 2 and two == verify.drawn("default", ["alpha", "beta"], 2, 7)
    assert verify.drawn("default", ["alpha", "beta"], 10, 0) == every  # a sample larger than the pool: all of it


def test_each_run_gets_a_line_and_a_difference_fails_the_command(monkeypatch, capsys):
    listing(monkeypatch)
    outcomes = {"run-0": "", "run-2": "files differ: run-2.csv"}

    def recheck(place, profile, names):
        if place[0] == "beta":
            raise store_modes.RecheckError("run-1 not current")
        return store_modes.Recheck(
            place[1], frozenset(names), False, {n: outcomes[n] for n in names}, {n: 3.0 for n in names}
        )

    monkeypatch.setattr(verify, "recheck", recheck)
    args = Namespace(profile="default", only="alpha,beta", sample=None, seed=0, dirty=False, record=False)
    assert verify.command(args) == 1
    out = capsys.readouterr()
    assert "  same run-0 (3 s)" in out.out and "  DIFFERS run-2 (3 s): files differ: run-2.csv" in out.out
    assert "cannot recheck: run-1 not current" in out.err
    assert out.out.strip().endswith("default: 3 stored runs recomputed, 1 the same byte for byte, 2 not")
    outcomes["run-2"] = ""
    assert (
        verify.command(Namespace(profile="default", only="alpha", sample=None, seed=0, dirty=False, record=False)) == 0
    )
    assert verify.command(Namespace(profile="default", only="alpha", sample=0, seed=0, dirty=False, record=False)) == 2


def test_dirty_draws_only_runs_computed_with_uncommitted_changes(monkeypatch):
    listing(monkeypatch)  # run-0 of each chapter names a +dirty commit
    assert verify.drawn("default", ["alpha", "beta"], None, 0, dirty=True) == {
        ("alpha", "alpha"): ["run-0"],
        ("beta", "beta"): ["run-0"],
    }


def test_record_marks_the_runs_that_came_back_the_same_and_keeps_the_store_sound(tmp_path, monkeypatch):
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "results"))
    monkeypatch.setenv(store.ROOT_ENV, str(tmp_path / "store"))
    monkeypatch.setenv(store.WRITE_ENV, "1")
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    pieces = [store.Piece(f"run-seed{s}", {"seed": s}) for s in (0, 1)]
    with scoped(Scope("tiny", "default")):
        batch = store.Batch(pieces, ["qkov_lib.metrics.stats"])
        batch.compute(lambda s: pd.DataFrame({"seed": [s]}), [(0,), (1,)], 1, lambda t, out: {t: {"main": out}})
    folder = tmp_path / "store" / "default" / "tiny"
    check = store_modes.Recheck("tiny", frozenset({"run-seed0", "run-seed1"}))
    check.outcomes, check.seconds = (
        {"run-seed0": "", "run-seed1": "files differ: x"},
        {"run-seed0": 2.4, "run-seed1": 1.0},
    )
    assert verify.record(folder, check, "f" * 40) == 1
    assert files.check(folder, "run-seed0")["verified"]["commit"] == "f" * 40
    assert "verified" not in files.check(folder, "run-seed1")
    assert not store_verify.verify(tmp_path / "store")  # resealed, the manifest rewritten


def test_record_needs_a_clean_commit(monkeypatch, capsys):
    monkeypatch.setattr(verify, "computed_at", lambda root: "abc+dirty")
    args = Namespace(profile="default", only="alpha", sample=None, seed=0, dirty=False, record=True)
    assert verify.command(args) == 1 and "commit the code first" in capsys.readouterr().err
