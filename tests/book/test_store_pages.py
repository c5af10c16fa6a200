"""A chapter's page re-made from its stored runs: the rerun of a smoke chapter takes every run from the store (the
runner says so, nothing trains) and writes the same tables, byte for byte, as the run that computed them; and the
page's banner names the commit its runs were computed at."""

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
    capsys.readouterr()
    summary = reproduce("smoke", only=[chapter], force=True, out_dir=tmp_path / "out", results_root=results)
    assert summary.failures == [] and summary.done == {"ran": [chapter]}
    said = capsys.readouterr()
    assert f"{chapter} (smoke): {runs} of {runs} runs from the store, 0 to compute" in said.out + said.err
    after = {p.name: p.read_bytes() for p in (results / "smoke").glob(f"{chapter}*.csv")}
    assert after == before
    page = nbformat.read(tmp_path / "out" / f"{chapter}.ipynb", as_version=4)
    title = next(c for c in page.cells if c.cell_type == "markdown").source
    assert f"its {runs} stored runs computed at `" in title and f"{runs} of them read from the store" in title
