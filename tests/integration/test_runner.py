"""The papermill runner: results and metadata, skipping unchanged chapters, and failures that leave nothing behind."""

import json

import pytest
from fake_chapters import BROKEN, fake_module

from qkov_lib.core.results import load
from qkov_lib.runner import reproduce as runner
from qkov_lib.runner import catalog

FIG4 = "fig4_mu_trajectories"


def test_results_and_metadata(smoke_book):
    folder = smoke_book / "data" / "results" / "smoke"
    tables, meta = load(folder, FIG4)
    assert {"main", "curves", "alpha_table", "claims", "lemma3"} == set(tables)
    assert meta["profile"] == "smoke" and meta["parameters"]["target_loss"] == 1e-3
    for key in (
        "device",
        "torch",
        "qkov_lib",
        "git_commit",
        "wall_time_s",
        "runner_wall_time_s",
        "seeds",
        "fingerprint",
    ):
        assert key in meta, key
    assert (tables["claims"]["verdict"] == "holds").all()
    assert not list(folder.parent.glob(".staging-*"))
    assert (smoke_book / "book" / "chapters" / f"{FIG4}.ipynb").exists()


def test_unchanged_chapter_is_skipped_and_changes_rerun(tmp_path):
    kw = dict(out_dir=tmp_path / "nb", results_root=tmp_path / "res")
    assert runner.run_chapter(FIG4, "smoke", {}, **kw) == "ran"
    assert runner.run_chapter(FIG4, "smoke", {}, **kw) == "skipped"
    assert runner.run_chapter(FIG4, "smoke", {}, force=True, **kw) == "ran"
    assert runner.run_chapter(FIG4, "smoke", {"M": 20}, **kw) == "ran"
    meta = json.loads((tmp_path / "res" / "smoke" / f"{FIG4}.json").read_text())
    assert meta["parameters"]["M"] == 20
    (tmp_path / "nb" / f"{FIG4}.ipynb").unlink()  # the book's copy only: copied back from the results
    assert runner.run_chapter(FIG4, "smoke", {"M": 20}, **kw) == "restored"
    assert (tmp_path / "nb" / f"{FIG4}.ipynb").read_bytes() == (
        tmp_path / "res" / "smoke" / f"{FIG4}.ipynb"
    ).read_bytes()


def test_failing_chapter_names_itself_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "broken.md").write_text(BROKEN)
    monkeypatch.setattr(catalog, "NOTEBOOKS_DIR", notebooks)
    monkeypatch.setitem(catalog.CHAPTERS, "broken", fake_module("broken", x=1))
    res, out = tmp_path / "res", tmp_path / "nb"
    (res / "smoke").mkdir(parents=True)
    (res / "smoke" / "broken.json").write_text('{"tables": [], "fingerprint": "old"}')
    with pytest.raises(
        runner.ChapterFailed,
        match=r"(?s)chapter 'broken' failed in cell \d+ .*ValueError: deliberate"
        r".*kept at .*smoke/failed/broken.ipynb",
    ):
        runner.run_chapter("broken", "smoke", {}, out_dir=out, results_root=res)
    assert sorted(p.name for p in (res / "smoke").iterdir()) == ["broken.json", "failed"]  # the old result, untouched
    assert (res / "smoke" / "broken.json").read_text() == '{"tables": [], "fingerprint": "old"}'
    assert (res / "smoke" / "failed" / "broken.ipynb").is_file()
    assert not list(res.glob(".staging-*"))
    assert "deliberate failure" in (out / "broken.ipynb").read_text()  # the book shows the failure
    failures = runner.reproduce("smoke", only=["broken"], out_dir=out, results_root=res).failures
    assert len(failures) == 1 and "broken" in failures[0]
    from qkov_lib.__main__ import main

    assert main(["reproduce", "--profile", "smoke", "--only", "broken", "--results", str(res), "--out", str(out)]) == 1
    assert "1 chapter(s) failed" in capsys.readouterr().err


def test_scorecard_collects_claims_and_reruns_when_they_change(smoke_book, tmp_path):
    from qkov_lib.chapters import scorecard

    folder = smoke_book / "data" / "results" / "smoke"
    table, missing = scorecard.gather(folder)
    from qkov_lib.core.contents import GATHERERS, title

    claimless = {"atlas", "errata"}  # the atlas's verdicts fill a column; the errata check no claim of the paper
    assert set(table["chapter"]) == {title(n) for n in catalog.CHAPTERS if n not in GATHERERS and n not in claimless}
    assert missing == {} and set(table["verdict"]) <= {"holds", "fails", "undecided", "not evidence"}
    assert (load(folder, "scorecard")[0]["main"]["claim"] == table["claim"]).all()
    res, out = tmp_path / "res", tmp_path / "nb"
    (res / "smoke").mkdir(parents=True)
    assert runner.run_chapter("scorecard", "smoke", {}, out_dir=out, results_root=res) == "ran"
    assert load(res / "smoke", "scorecard")[0]["main"].empty  # nothing has run there yet
    assert runner.run_chapter("scorecard", "smoke", {}, out_dir=out, results_root=res) == "skipped"
    for path in folder.glob(f"{FIG4}.*"):  # the Figure 4 unit, whole
        (res / "smoke" / path.name).write_bytes(path.read_bytes())
    assert runner.run_chapter("scorecard", "smoke", {}, out_dir=out, results_root=res) == "ran"
    assert len(load(res / "smoke", "scorecard")[0]["main"]) == 4
