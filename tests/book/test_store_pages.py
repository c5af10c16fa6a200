"""A chapter's page re-made from its stored runs: the rerun of a smoke chapter takes every run from the store (the
runner says so, nothing trains) and writes the same tables, byte for byte, as the run that computed them; and the
page's banner names the commit its runs were computed at. ``--force`` computes them afresh, and leaves each stored run
that comes back byte for byte as it was stored."""

import shutil

import nbformat
import pytest

from qkov_lib.runner.reproduce import reproduce


@pytest.mark.parametrize(("chapter", "runs"), [("fig3_incentive", 6), ("hatexplain", 5)])
def test_a_rerun_reads_every_run_from_the_store_and_writes_the_same_tables(smoke_book, chapter, runs, tmp_path, capsys):
    results = tmp_path / "results"
    shutil.copytree(smoke_book / "data" / "results", results)
    before = {p.name: p.read_bytes() for p in (results / "smoke").glob(f"{chapter}*.csv")}
    assert before and (results / "store" / "smoke" / chapter).is_dir()
    (results / "smoke" / f"{chapter}.json").unlink()  # the page is stale, its runs are not
    capsys.readouterr()
    summary = reproduce("smoke", only=[chapter], out_dir=tmp_path / "out", results_root=results)
    assert summary.failures == [] and summary.done == {"ran": [chapter]}
    said = capsys.readouterr()
    assert f"{chapter} (smoke): {runs} of {runs} runs from the store, 0 to compute" in said.out + said.err
    after = {p.name: p.read_bytes() for p in (results / "smoke").glob(f"{chapter}*.csv")}
    assert after == before
    page = nbformat.read(tmp_path / "out" / f"{chapter}.ipynb", as_version=4)
    title = next(c for c in page.cells if c.cell_type == "markdown").source
    assert f"its {runs} stored runs computed at `" in title and f"{runs} of them read from the store" in title


def test_force_computes_every_stored_run_again_and_keeps_those_that_come_back_the_same(smoke_book, tmp_path, capsys):
    results = tmp_path / "results"
    shutil.copytree(smoke_book / "data" / "results", results)
    stored = {p.name: p.read_bytes() for p in (results / "store" / "smoke" / "hatexplain").iterdir()}
    capsys.readouterr()
    summary = reproduce("smoke", only=["hatexplain"], force=True, out_dir=tmp_path / "out", results_root=results)
    assert summary.failures == [] and summary.done == {"ran": ["hatexplain"]}
    said = capsys.readouterr()
    assert "hatexplain (smoke): 5 stored runs, each computed afresh (--force)" in said.out + said.err
    assert "replaced" not in said.out + said.err
    assert {p.name: p.read_bytes() for p in (results / "store" / "smoke" / "hatexplain").iterdir()} == stored
