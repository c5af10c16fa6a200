"""The results store (``qkov_lib.runs.store``): a run computed once and then read back, byte for byte; only what is
missing or stale computed; staleness named part by part; the committed store's manifest and seals; the time budget
and an interruption keep every finished run. Everything here computes in this process (one worker)."""

import json
import os
import shutil
import time

import pandas as pd
import pytest

from qkov_lib.chapters import fig3_incentive, hatexplain, sva
from qkov_lib.core import codehash, results
from qkov_lib.core.budget import DEADLINE_ENV, OutOfTime
from qkov_lib.core.chapter import Scope, apart, folder_chapter, scoped
from qkov_lib.core.results import RESULTS_ENV, ROOT_ENV
from qkov_lib.runs import store, store_modes, store_verify
from qkov_lib.runs.store import Batch, Piece

CALLS: list[int] = []


def square(seed: int, scale: float) -> pd.DataFrame:
    """A stand-in for a training run: one row per seed, with a float that only round-trips at full precision."""
    CALLS.append(seed)
    return pd.DataFrame({"seed": [seed], "value": [scale * seed / 3], "label": ["x y"]})


@pytest.fixture
def roots(tmp_path, monkeypatch):
    """A results root and a committed store of the test's own; the runner's write switch on."""
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "results"))
    monkeypatch.setenv(store.ROOT_ENV, str(tmp_path / "store"))
    monkeypatch.setenv(store.WRITE_ENV, "1")
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    CALLS.clear()
    return tmp_path


def compute(seeds, scale=1.0, profile="default", fail_at=None):
    """The runs of ``square`` for ``seeds`` through a batch; the tables of every seed."""
    pieces = [Piece(f"run-seed{s}", {"seed": s, "scale": scale}) for s in seeds]
    batch = Batch(pieces, ["qkov_lib.metrics.stats"])
    todo = batch.missing

    def fn(seed, sc):
        if seed == fail_at:
            raise RuntimeError("killed")
        return square(seed, sc)

    batch.compute(fn, [(seeds[i], scale) for i in todo], 1, lambda t, out: {todo[t]: {"main": out}})
    return batch.tables()


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_a_stored_runs_files_have_the_mode_of_any_new_file(roots, umask, mode):
    """Not 0600 whatever the umask (the temporary files they are written through): a clone shares them."""
    old = os.umask(umask)
    try:
        with scoped(Scope("tiny", "default")):
            compute([0])
    finally:
        os.umask(old)
    written = sorted((roots / "store" / "default" / "tiny").iterdir())
    assert len(written) == 3 and {p.stat().st_mode & 0o777 for p in written} == {mode}


def test_a_run_is_computed_once_then_read_back_the_same(roots, capsys):
    with scoped(Scope("tiny", "default")):
        first = compute([0, 1, 2])
    assert CALLS == [0, 1, 2]
    assert "tiny (default): 0 of 3 runs from the store, 3 to compute" in capsys.readouterr().out
    with scoped(Scope("tiny", "default")) as scope:
        again = compute([0, 1, 2])
        assert [u["from_store"] for u in scope.used] == [True] * 3
    assert CALLS == [0, 1, 2]  # nothing recomputed
    assert "3 of 3 runs from the store, 0 to compute" in capsys.readouterr().out
    assert [t["main"].to_csv() for t in first] == [t["main"].to_csv() for t in again]
    assert first[1]["main"]["value"].iloc[0] == 1 / 3  # every float back to the bit
    folder = roots / "store" / "default" / "tiny"
    assert sorted(p.name for p in folder.iterdir()) == [
        "manifest.json",
        *sorted(f"run-seed{s}.{e}" for s in range(3) for e in ("csv", "json")),
    ]
    assert store_verify.verify(roots / "store") == []


def test_a_computation_stored_apart_keeps_its_own_runs_under_the_same_names(roots):
    """A chapter's second computation with the same run names (SVA at the authors' number of steps) lies in a
    folder of its own, read back as such; the runs it used are recorded in the chapter's list."""
    with scoped(Scope("tiny", "default")) as scope:
        compute([0, 1])
        with scoped(apart(scope, "longer")):
            compute([0, 1], scale=2.0)
    assert CALLS == [0, 1, 0, 1] and len(scope.used) == 4
    assert sorted(p.name for p in (roots / "store" / "default").iterdir()) == ["tiny", "tiny--longer"]
    with scoped(Scope("tiny", "default")) as scope:
        with scoped(apart(scope, "longer")):
            assert compute([0, 1], scale=2.0)[1]["main"]["value"].iloc[0] == 2 / 3
    assert CALLS == [0, 1, 0, 1] and folder_chapter("tiny--longer") == "tiny" == folder_chapter("tiny")
    assert store_verify.verify(roots / "store") == []


def test_adding_a_seed_computes_that_seed_alone(roots):
    with scoped(Scope("tiny", "default")):
        compute([0, 1])
        compute([0, 1, 2])
    assert CALLS == [0, 1, 2]


def test_a_changed_setting_is_stale_and_named_then_recomputed(roots):
    with scoped(Scope("tiny", "default")):
        compute([0, 1])
    states = store.plan(lambda: compute([0, 1], scale=2.0), Scope("tiny", "default"))
    assert [(s.name, s.state, s.why) for s in states] == [
        ("run-seed0", "stale", ("setup (scale: 1.0 -> 2.0)",)),
        ("run-seed1", "stale", ("setup (scale: 1.0 -> 2.0)",)),
    ]
    assert states[0].commit is not None and states[0].compute_s is not None
    assert CALLS == [0, 1]  # planning computes nothing
    with scoped(Scope("tiny", "default")):
        tables = compute([0, 1], scale=2.0)
    assert CALLS == [0, 1, 0, 1] and tables[1]["main"]["value"].iloc[0] == 2 / 3
    assert [s.state for s in store.plan(lambda: compute([0, 1], scale=2.0), Scope("tiny", "default"))] == [
        "current"
    ] * 2


def test_a_code_change_names_the_module_that_changed(roots, monkeypatch):
    with scoped(Scope("tiny", "default")):
        compute([0])
    real = store.code_of

    def edited(modules, datasets=()):
        state = real(modules, datasets)
        return codehash.CodeState({**state.modules, "qkov_lib.metrics.stats": "edited"}, state.versions)

    monkeypatch.setattr(store, "code_of", edited)
    [state] = store.plan(lambda: compute([0]), Scope("tiny", "default"))
    assert state.state == "stale" and state.why == ("code (qkov_lib.metrics.stats)",)


def test_an_interrupted_run_keeps_every_finished_run(roots):
    with scoped(Scope("tiny", "default")), pytest.raises(RuntimeError, match="killed"):
        compute([0, 1, 2, 3], fail_at=2)
    assert CALLS == [0, 1]
    with scoped(Scope("tiny", "default")):
        compute([0, 1, 2, 3])
    assert CALLS == [0, 1, 2, 3]  # the two finished runs were kept


def test_the_time_budget_stops_between_runs_and_the_next_run_continues(roots, monkeypatch):
    monkeypatch.setenv(DEADLINE_ENV, repr(time.time() - 1))
    with scoped(Scope("tiny", "default")), pytest.raises(OutOfTime, match="3 of 3 stored runs of tiny to compute"):
        compute([0, 1, 2])
    assert CALLS == []
    monkeypatch.delenv(DEADLINE_ENV)
    with scoped(Scope("tiny", "default")):
        compute([0, 1, 2])
    assert CALLS == [0, 1, 2]


def test_hand_runs_smoke_and_overrides_stay_out_of_the_committed_store(roots, monkeypatch):
    with scoped(Scope("tiny", "smoke")):
        compute([0])
    with scoped(Scope("tiny", "default", as_profile=False)):
        compute([0], scale=3.0)
    monkeypatch.delenv(store.WRITE_ENV)  # a hand run (JupyterLab, papermill) of the profile itself
    with scoped(Scope("tiny", "official")):
        compute([0])
    assert not (roots / "store").exists()
    scratch = roots / "results" / "store"
    assert {p.parent.parent.name for p in scratch.rglob("*.json")} == {"smoke", "default", "official"}
    monkeypatch.setenv(store.WRITE_ENV, "1")
    with scoped(Scope("tiny", "default")):
        compute([0], scale=3.0)  # the runner's run of the same key: the hand run's result, committed now
    assert CALLS == [0, 0, 0]
    committed = json.loads((roots / "store" / "default" / "tiny" / "run-seed0.json").read_text())
    kept = json.loads(next(scratch.glob("default/tiny/run-seed0-*.json")).read_text())
    assert committed["key"] == kept["key"] and committed["git_commit"] == kept["git_commit"]
    assert store_verify.verify(roots / "store") == []


def test_outside_a_chapter_nothing_is_stored(roots):
    tables = compute([0, 1])
    assert CALLS == [0, 1] and tables[1]["main"]["value"].iloc[0] == 1 / 3
    assert not (roots / "store").exists() and not (roots / "results").exists()


def test_the_manifest_finds_a_stray_a_missing_and_an_edited_file(roots):
    with scoped(Scope("tiny", "default")):
        compute([0, 1])
    folder = roots / "store" / "default" / "tiny"
    (folder / "extra.csv").write_text("seed\n9\n")
    (folder / "run-seed0.csv").write_text("seed,value,label\n0,1.0,forged\n")
    (folder / "run-seed1.csv").unlink()
    (roots / "store" / "default" / "loose.json").write_text("{}")
    problems = store_verify.verify(roots / "store")
    assert any("loose.json: outside the store's layout" in p for p in problems)
    assert any("extra.csv is named by no manifest (a stray file)" in p for p in problems)
    assert any("run-seed0.csv differs from its manifest" in p for p in problems)
    assert any("run-seed1.csv is missing" in p for p in problems)
    with scoped(Scope("tiny", "default")):
        compute([0, 1])
    assert CALLS == [0, 1, 0, 1]  # a damaged run is never served: both computed again


def test_a_forged_seal_is_never_read(roots):
    with scoped(Scope("tiny", "default")):
        compute([0])
    meta = roots / "store" / "default" / "tiny" / "run-seed0.json"
    body = json.loads(meta.read_text())
    body["git_commit"] = "0" * 40  # claimed computed elsewhere
    meta.write_text(json.dumps(body))
    assert any("seal differs" in p for p in store_verify.verify(roots / "store"))
    with scoped(Scope("tiny", "default")):
        compute([0])
    assert CALLS == [0, 0]


def test_a_recheck_recomputes_the_chosen_runs_writes_nothing_and_finds_a_resealed_forgery(roots):
    """``results verify``: a run forged and resealed by hand passes every check of its files; recomputing it from
    the code shows that the code does not give its numbers. Nothing is written, the chapter stops after the
    computation that holds the chosen runs, and a run that is not current cannot be rechecked."""
    with scoped(Scope("tiny", "default")):
        compute([0, 1, 2])
    folder = roots / "store" / "default" / "tiny"
    csv = folder / "run-seed1.csv"
    csv.write_text(csv.read_text().replace("0.3333333333333333", "0.3333333333333334"))
    meta = json.loads((folder / "run-seed1.json").read_text())
    meta["files"]["run-seed1.csv"] = results.sha256_file(csv)
    results.write_meta(folder, "run-seed1", meta)  # resealed
    store_verify.write_manifest(folder)
    assert store_verify.verify(roots / "store") == []  # every file as its seal and manifest say
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    after_batch = []

    def chapter():
        compute([0, 1, 2])
        after_batch.append(True)  # never reached

    check = store_modes.recheck(chapter, Scope("tiny", "default"), frozenset({"run-seed0", "run-seed1"}))
    assert CALLS == [0, 1, 2, 0, 1] and not after_batch
    assert check.outcomes == {"run-seed0": "", "run-seed1": "files differ: run-seed1.csv"}
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    with pytest.raises(store_modes.RecheckError, match="run-seed3 not current"):
        store_modes.recheck(lambda: compute([0, 1, 2, 3]), Scope("tiny", "default"), frozenset({"run-seed0"}))


def test_a_run_name_is_a_file_stem_and_unique():
    with pytest.raises(ValueError, match="letters, digits"):
        Piece("a/b", {})
    assert store.slug("collapsed + bias-0") == "collapsed-bias-0"
    with pytest.raises(ValueError, match="share a name"):
        Batch([Piece("a", {}), Piece("a", {"x": 1})], [])


@pytest.mark.parametrize(
    "module",
    [
        "qkov_lib.runs.real_data",
        "qkov_lib.runs.squad_runs",
        "qkov_lib.runs.synthetic_runs",
        "qkov_lib.runs.fixed_attention",
        "qkov_lib.theory.instance",
        "qkov_lib.theory.factorised",
    ],
)
def test_the_computations_import_no_page_code(module):
    """A stored run's key leaves the page's modules out (``store.PAGE``): the modules that compute never import them,
    so a change to a plot or a verdict rule cannot change a stored number."""
    reached = codehash.closure([module], exclude=store.ORCHESTRATION)
    assert not [m for m in reached if m in store.excluded()]


def test_page_fields_are_no_part_of_a_runs_values():
    assert "check_epoch" not in store.setup_values(fig3_incentive.Setup())
    assert "download" not in store.setup_values(hatexplain.Setup()) and "lr" in store.setup_values(hatexplain.Setup())
    assert "match_steps" not in store.setup_values(sva.Setup(match_steps=sva.AUTHORS_STEPS))


def test_the_store_turned_off_computes_everything_and_keeps_nothing(roots, monkeypatch):
    with scoped(Scope("tiny", "default")):
        compute([0])
    monkeypatch.setenv(store.OFF_ENV, "off")
    with scoped(Scope("tiny", "default")) as scope:
        compute([0, 1])
        assert scope.used == []
    assert CALLS == [0, 0, 1]
    assert sorted(p.name for p in (roots / "store" / "default" / "tiny").glob("*.json")) == [
        "manifest.json",
        "run-seed0.json",
    ]


def test_force_recomputes_stored_runs_keeps_the_same_and_replaces_a_forgery(roots, monkeypatch, capsys):
    """``reproduce --force`` (``QKOV_STORE=recompute``): every run is computed afresh. One that computes its stored
    bytes is left as stored (its metadata, commit and compute time unchanged); a forged run, resealed and written into
    the manifest by hand so that the seal and the manifest pass, is replaced by the honest one, and named."""
    with scoped(Scope("tiny", "default")):
        compute([0, 1])
    folder = roots / "store" / "default" / "tiny"
    (folder / "run-seed1.csv").write_text("seed,value,label\n1,9.0,forged\n")
    body = json.loads((folder / "run-seed1.json").read_text())
    body["files"]["run-seed1.csv"] = results.sha256_file(folder / "run-seed1.csv")
    results.write_meta(folder, "run-seed1", body)
    store_verify.write_manifest(folder)  # the forgery passes the seal and the manifest: the store serves it
    with scoped(Scope("tiny", "default")):
        assert compute([1])[0]["main"]["label"].iloc[0] == "forged" and CALLS == [0, 1]
    honest = (folder / "run-seed0.json").read_bytes()
    monkeypatch.setenv(store.OFF_ENV, store_modes.RECOMPUTE)
    capsys.readouterr()
    with scoped(Scope("tiny", "default")) as scope:
        tables = compute([0, 1])
        assert [u["from_store"] for u in scope.used] == [False, False]
    assert CALLS == [0, 1, 0, 1]  # both computed afresh
    assert "0 of 2 runs from the store, 2 to compute" in (out := capsys.readouterr().out)
    assert "run-seed1 replaced, its stored run differed (files differ: run-seed1.csv)" in out
    assert "run-seed0 replaced" not in out and (folder / "run-seed0.json").read_bytes() == honest
    assert tables[1]["main"]["label"].iloc[0] == "x y" and not store_verify.verify(roots / "store")


def test_a_sealed_run_its_manifest_does_not_name_is_never_read(roots):
    """A run whose seal checks but which was dropped into the committed store by hand (its manifest entry edited
    or missing, a resealed forgery) is not taken: the run is computed again."""
    with scoped(Scope("tiny", "default")):
        compute([0])
    folder = roots / "store" / "default" / "tiny"
    (folder / "run-seed0.csv").write_text("seed,value,label\n0,9.0,forged\n")
    body = json.loads((folder / "run-seed0.json").read_text())
    body["files"]["run-seed0.csv"] = results.sha256_file(folder / "run-seed0.csv")
    results.write_meta(folder, "run-seed0", body)  # a valid seal over the forged table
    results.check(folder, "run-seed0")
    assert any("run-seed0.json differs from its manifest" in p for p in store_verify.verify(roots / "store"))
    with scoped(Scope("tiny", "default")):
        tables = compute([0])
    assert CALLS == [0, 0] and tables[0]["main"]["label"].iloc[0] == "x y"


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A copy of qkov_lib under tmp_path, the code fingerprint pointed at it."""
    copy = tmp_path / "qkov_lib"
    shutil.copytree(codehash.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(codehash, "PACKAGE_DIR", copy)
    return copy


# what each kind of stored run executes (``real_data.run_all``'s modules; a synthetic run's) and the data it reads
RUNS = {
    "hatexplain": (["qkov_lib.runs.real_data"], ("hatexplain",)),
    "sva": (["qkov_lib.runs.real_data"], ("sva",)),
    "squad": (["qkov_lib.runs.real_data", "qkov_lib.runs.squad_runs"], ("squad",)),
    "synthetic": (["qkov_lib.runs.synthetic_runs"], ()),
}


@pytest.mark.parametrize(
    ("loader", "stale"),
    [
        ("hatexplain.py", {"hatexplain"}),
        ("sva.py", {"sva"}),
        ("pos_tags.py", {"sva"}),
        ("squad.py", {"squad"}),
        ("text.py", {"hatexplain", "sva", "squad"}),
        ("registry.py", {"hatexplain", "sva", "squad"}),
    ],
)
def test_an_edit_of_a_loader_stales_exactly_the_runs_that_read_it(package, loader, stale):
    before = {name: store.code_of(*run).digest for name, run in RUNS.items()}
    path = package / "data" / loader
    path.write_text(path.read_text() + "\nEDITED = 1\n")
    after = {name: store.code_of(*run).digest for name, run in RUNS.items()}
    assert {name for name in RUNS if before[name] != after[name]} == stale


def test_the_tokenisers_and_taggers_versions_are_in_the_key_of_the_runs_that_read_them(monkeypatch):
    real = codehash.library_versions

    def upgraded(names=codehash.NUMERICAL):
        return real(names) | ({"spacy": "9.9"} if "spacy" in names else {})

    monkeypatch.setattr(codehash, "library_versions", upgraded)
    assert store.code_of(*RUNS["sva"]).versions["spacy"] == "9.9"
    assert "spacy" not in store.code_of(*RUNS["hatexplain"]).versions
