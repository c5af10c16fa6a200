"""``results verify`` (``qkov_lib.runner.verify``): a seeded draw of current stored runs, each recomputed and compared
with its files (``store_modes.recheck``, tested with the store), a line each and a last line counting them."""

from argparse import Namespace

from qkov_lib.runner import stored, verify
from qkov_lib.runs import store, store_modes


def runs(*states: str) -> list[store.RunState]:
    return [store.RunState(f"run-{i}", state) for i, state in enumerate(states)]


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
    args = Namespace(profile="default", only="alpha,beta", sample=None, seed=0)
    assert verify.command(args) == 1
    out = capsys.readouterr()
    assert "  same run-0 (3 s)" in out.out and "  DIFFERS run-2 (3 s): files differ: run-2.csv" in out.out
    assert "cannot recheck: run-1 not current" in out.err
    assert out.out.strip().endswith("default: 3 stored runs recomputed, 1 the same byte for byte, 2 not")
    outcomes["run-2"] = ""
    assert verify.command(Namespace(profile="default", only="alpha", sample=None, seed=0)) == 0
    assert verify.command(Namespace(profile="default", only="alpha", sample=0, seed=0)) == 2
