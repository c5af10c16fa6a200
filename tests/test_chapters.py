"""Every chapter under the smoke profile: papermill run, nbval re-run, and a strict Jupyter Book build."""
import os
import subprocess
import sys

import nbformat
import pytest

from qkov_lib.profiles import CHAPTERS


@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_chapter_prints_environment_and_has_checked_outputs(smoke_book, chapter):
    nb = nbformat.read(smoke_book / "book" / "chapters" / f"{chapter}.ipynb", as_version=4)
    first = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "profile: smoke" in first and "device:" in first and "torch" in first
    assert nb.cells[0].source.splitlines()[2].startswith("*This page was run with profile `smoke` · ")  # banner
    tagged = [c for c in nb.cells if "nbval-check-output" in c.metadata.get("tags", [])]
    assert tagged and all(c.outputs for c in tagged)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not any(o.output_type == "error" or o.get("name") == "stderr" for o in outputs)  # no warnings, no bars
    shown = nbformat.writes(nb)
    assert str(smoke_book) not in shown and "PosixPath" not in shown  # no machine paths on a page


@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_nbval_second_run_gives_same_outputs(smoke_book, chapter, tmp_path):
    env = {**os.environ, "QKOV_RESULTS_DIR": str(tmp_path / "results"),
           "QKOV_RESULTS_ROOT": str(smoke_book / "data" / "results")}  # where the scorecard reads the others
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                           "--rootdir", str(tmp_path), str(smoke_book / "book" / "chapters" / f"{chapter}.ipynb")],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout


def test_book_builds_warning_free_and_offline(built_book):
    assert (built_book / "index.html").exists()
    html = (built_book / "book" / "chapters" / "fig4_mu_trajectories.html").read_text()
    assert "plotly-graph-div" in html and "_static/plotly.min.js" in html
    assert "cdn.plot.ly" not in html and "_static/mathjax/MathJax.js" in html
    assert '"exponentformat":"power"' in html and 'id="qkov-figure-1"' in html
    assert "# Parameters" not in html  # papermill's injected cell is hidden; the header lists the parameters
    assert (built_book / "_static" / "plotly.min.js").exists()
