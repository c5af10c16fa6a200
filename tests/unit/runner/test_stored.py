"""``results status`` (``qkov_lib.runner.stored``): which chapters have stored runs, and what the store holds of
each, found by planning the chapter (its run stops at its first stored computation: nothing trains)."""

from argparse import Namespace

import pandas as pd
import pytest

from qkov_lib.core.results import ROOT_ENV
from qkov_lib.runner import stored
from qkov_lib.runs import store


@pytest.fixture
def empty_store(tmp_path, monkeypatch):
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "results"))
    monkeypatch.setenv(store.ROOT_ENV, str(tmp_path / "store"))
    return tmp_path


def test_the_chapters_with_stored_runs_are_those_that_train():
    assert stored.has_stored_runs("fig3_incentive") and stored.has_stored_runs("atlas")
    assert stored.has_stored_runs("hatexplain") and stored.has_stored_runs("squad")
    assert stored.has_stored_runs("theorem1") and stored.has_stored_runs("errata")  # their long solves
    assert not stored.has_stored_runs("lemma3") and not stored.has_stored_runs("summary")


def test_a_chapter_is_planned_without_computing(empty_store, capsys):
    found = stored.chapter_runs("fig3_incentive", "smoke")
    assert found.error is None and [r.state for r in found.runs] == ["missing"] * 6
    assert [r.name for r in found.runs][:2] == ["factorised-0", "factorised-1"]
    assert found.line == "fig3_incentive (smoke): 0 of 6 runs from the store, 6 to compute"
    assert not (empty_store / "results").exists()  # nothing computed, nothing written
    args = Namespace(profile="smoke", only="fig3_incentive", check=True, brief=False)
    assert stored.command(args) == 1
    out = capsys.readouterr()
    assert "fig3_incentive (smoke): 6 runs, 0 current, 0 stale, 6 missing" in out.out
    assert "  missing  factorised-0 (never computed)" in out.out
    assert "not current: fig3_incentive" in out.err
    assert stored.command(Namespace(profile="smoke", only="fig3_incentive", check=False, brief=True)) == 0


def test_a_real_data_chapter_without_its_data_says_so_in_one_line(empty_store, monkeypatch, tmp_path):
    monkeypatch.setenv("QKOV_DATA_DIR", str(tmp_path / "none"))
    (tmp_path / "none").mkdir()
    found = stored.chapter_runs("sva", "smoke")
    assert found.runs == () and found.error is not None and found.error.startswith("data unavailable: ")
    assert found.line.startswith("sva (smoke): its stored runs cannot be listed (data unavailable: ")


def test_listing_a_real_data_chapter_without_its_data_downloads_nothing(empty_store, monkeypatch):
    """No data here: the chapter's line says so, and no download is tried (listing runs is no reason to fetch GBs)."""
    import pooch

    from qkov_lib.data import registry

    monkeypatch.delenv(registry.DATA_ENV, raising=False)
    monkeypatch.setattr(registry, "cache_dir", lambda: empty_store / "cache")
    monkeypatch.setattr(pooch, "retrieve", lambda *a, **k: pytest.fail("a download was tried"))
    found = stored.chapter_runs("hatexplain", "smoke")
    assert found.runs == () and found.error.startswith("data unavailable: hatexplain data not available")


def test_not_stored_says_what_a_chapter_would_train(empty_store, monkeypatch, tmp_path):
    """``--stored-only``'s question: nothing for a chapter without stored runs or one the store holds whole; else how
    many runs are missing, or why they cannot be listed."""
    root = empty_store / "results"
    assert stored.not_stored("lemma3", "smoke", {}, root) is None  # no stored computation
    assert stored.not_stored("fig3_incentive", "smoke", {}, root) == (
        "6 of 6 runs not in the store under today's key (6 missing or damaged)"
    )
    part = stored.ChapterRuns("x", "smoke", [store.RunState(r, s) for r, s in (("a", "stale"), ("b", "current"))])
    monkeypatch.setattr(stored, "chapter_runs", lambda *a: part)
    assert stored.not_stored("fig3_incentive", "smoke", {}, root) == (
        "1 of 2 runs not in the store under today's key (1 stale)"
    )
    monkeypatch.setattr(stored, "chapter_runs", lambda *a: stored.ChapterRuns("x", "smoke", (), "data unavailable"))
    assert stored.not_stored("fig3_incentive", "smoke", {}, root) == "data unavailable"
    whole = stored.ChapterRuns("x", "smoke", [store.RunState("r", "current")])
    monkeypatch.setattr(stored, "chapter_runs", lambda *a: whole)
    assert stored.not_stored("fig3_incentive", "smoke", {}, root) is None  # the store holds every run


def _all_current(monkeypatch):
    """Every chapter's runs current (the store's files alone then decide ``--check``)."""
    whole = [stored.ChapterRuns("fig3_incentive", "default", [store.RunState("r", "current")])]
    monkeypatch.setattr(stored, "status", lambda *a: whole)


def _committed_run(root, chapter="fig3_incentive", name="r"):
    """One stored run in the committed store at ``root``, its folder's manifest naming it."""
    from qkov_lib.core import results
    from qkov_lib.runs import store_verify

    folder = root / "default" / chapter
    results.save(
        folder, name, {"main": pd.DataFrame({"x": [1]})}, {"run": name, "chapter": chapter, "profile": "default"}
    )
    store_verify.write_manifest(folder)
    return folder


def test_status_check_names_each_stray_edited_or_damaged_file_of_the_committed_store(empty_store, monkeypatch, capsys):
    _all_current(monkeypatch)
    folder = _committed_run(empty_store / "store")
    args = Namespace(profile="default", only=None, check=True, brief=True)
    assert stored.command(args) == 0
    (folder / "extra.csv").write_text("x\n9\n")
    (folder / "r.csv").write_text("x\n2\n")
    assert stored.command(args) == 1
    out = capsys.readouterr()
    assert f"{folder}: extra.csv is named by no manifest (a stray file)" in out.out
    assert f"{folder}: r.csv differs from its manifest (edited?)" in out.out
    assert "the committed store's default folders: 3 problem(s), named above" in out.err
    (folder / "manifest.json").write_text("[]")
    assert stored.command(args) == 1
    assert f"{folder / 'manifest.json'} is damaged (not a manifest); rebuild it from the sealed runs: " in (
        capsys.readouterr().out
    )


def test_a_damaged_run_is_called_damaged_not_never_computed(monkeypatch, capsys):
    runs = [store.RunState("q", "current"), store.RunState("r", "damaged", ("x.csv changed",))]
    monkeypatch.setattr(stored, "chapter_runs", lambda chapter, profile: stored.ChapterRuns(chapter, profile, runs))
    stored.status("default", ["fig3_incentive"])
    assert capsys.readouterr().out.splitlines()[:2] == [
        "default: 1 chapters, 2 stored runs: 1 current, 0 stale, 1 damaged, 0 missing",  # the count first
        "fig3_incentive (default): 2 runs, 1 current, 0 stale, 1 damaged, 0 missing",
    ]
    assert stored._run_line(store.RunState("r", "damaged", ("x.csv changed",))) == "  damaged  r: x.csv changed"
    assert stored._run_line(store.RunState("r", "missing")) == "  missing  r (never computed)"
    apart = store.RunState("r", "missing", folder="sva--matched-steps")
    assert stored._run_line(apart) == "  missing  sva--matched-steps/r (never computed)"


def test_results_repair_rebuilds_the_manifests_and_names_what_it_leaves_out(empty_store, capsys):
    from qkov_lib.__main__ import main

    folder = _committed_run(empty_store / "store")
    _committed_run(empty_store / "store", name="s")
    sealed = (folder / "manifest.json").read_bytes()
    (folder / "manifest.json").write_text("<<<<<<< HEAD\n{}\n=======\n")
    assert main(["results", "repair", "--profile", "default"]) == 0
    assert capsys.readouterr().out == f"{folder}: manifest rebuilt from 2 sealed run(s), 0 left out\n"
    assert (folder / "manifest.json").read_bytes() == sealed
    (folder / "s.csv").write_text("x\n5\n")
    assert main(["results", "repair"]) == 1
    out = capsys.readouterr()
    assert out.out == f"{folder}: manifest rebuilt from 1 sealed run(s), 1 left out\n"
    assert out.err.startswith(f"  left out {folder / 's.json'}: {folder / 's.csv'} changed after it was written")


def test_the_last_line_counts_every_run_by_state():
    found = [
        stored.ChapterRuns("a", "official", (store.RunState("r0", "current"), store.RunState("r1", "stale", ("x",)))),
        stored.ChapterRuns("b", "official", error="its data is missing"),
    ]
    assert stored.total_line("official", found) == (
        "official: 2 chapters, 2 stored runs: 1 current, 1 stale, 0 damaged, 0 missing; 1 chapter(s) whose runs "
        "cannot be listed (below)"
    )
