"""A chapter run by hand works as it does in the book, and opening it changes nothing: the sources are written as
JupyterLab and jupytext write them back; their digest ignores notebook metadata; a chapter written as an .ipynb runs
under plain papermill and shows its figures inline, while inside the runner they are glued for the book only."""

from __future__ import annotations

import copy

import jupytext
import nbformat
import papermill
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from myst_nb.ext import glue as myst_glue

from qkov_lib.core.chapter import ParameterError
from qkov_lib.core.codehash import source_digest
from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.core.results import RESULTS_ENV, ROOT_ENV
from qkov_lib.present import plots
from qkov_lib.runner.notebooks import write_notebook
from qkov_lib.runner.reproduce import reproduce

SOURCES = sorted((REPO_ROOT / "notebooks").glob("*.md"))
PLOTLY = "application/vnd.plotly.v1+json"
FAST = "fig4_mu_trajectories"  # seconds under the smoke profile, one figure


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_a_jupytext_round_trip_of_every_chapter_source_is_byte_identical(source):
    text = source.read_text(encoding="utf-8")
    assert jupytext.writes(jupytext.read(source), fmt="md:myst") == text


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_a_chapter_opened_and_run_in_jupyterlab_is_saved_unchanged(source):
    """What JupyterLab adds when it opens a chapter and runs every cell: the kernelspec of the kernel it starts (this
    environment's ipykernel), the kernel's language_info, each cell's outputs, execution count and timing."""
    spec = KernelSpecManager().get_kernel_spec("python3")
    nb = jupytext.read(source)
    nb.metadata["kernelspec"] = {"display_name": spec.display_name, "language": spec.language, "name": "python3"}
    nb.metadata["language_info"] = {
        "name": "python",
        "version": "3.11",
        "file_extension": ".py",
        "codemirror_mode": {"name": "ipython", "version": 3},
    }
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.execution_count = i + 1
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
            cell.metadata["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00.000Z"}
            cell.metadata["trusted"] = True
    assert jupytext.writes(nb, fmt="md:myst") == source.read_text(encoding="utf-8")


def test_the_source_digest_ignores_metadata_and_sees_every_cell(tmp_path):
    source = tmp_path / f"{FAST}.md"
    text = (REPO_ROOT / "notebooks" / f"{FAST}.md").read_text(encoding="utf-8")
    source.write_text(text, encoding="utf-8")
    before = source_digest(source)
    assert before == source_digest(REPO_ROOT / "notebooks" / f"{FAST}.md")
    source.write_text(
        text.replace("display_name: Python 3 (ipykernel)", "display_name: Python 3").replace(
            "jupytext_version: 1.19.6", "jupytext_version: 1.20.0"
        ),
        encoding="utf-8",
    )
    assert source.read_text(encoding="utf-8") != text and source_digest(source) == before  # metadata only
    edits = [
        ('profile = "default"', 'profile = "smoke"'),  # a parameter
        ("## The trajectories", "## Trajectories"),  # prose
        (":tags: [remove-cell]", ":tags: [remove-input]"),
    ]  # what the page shows
    for old, new in edits:
        assert old in text
        source.write_text(text.replace(old, new, 1), encoding="utf-8")
        assert source_digest(source) != before, old


@pytest.mark.parametrize("shown", [False, True])
def test_a_glued_figure_is_written_as_myst_nb_writes_it(monkeypatch, shown):
    calls = []
    monkeypatch.setattr(plots, "display", lambda *a, **k: calls.append((a, k)))
    monkeypatch.setattr(myst_glue, "ipy_display", lambda *a, **k: calls.append((a, k)))
    fig = plots.go.Figure(plots.go.Scatter(x=[1, 2], y=[3, 4]))
    value = plots.Shown(fig)
    plots.glue("a-figure", value, display_it=shown)
    myst_glue.glue("a-figure", value, display=shown)
    ours, theirs = calls
    assert ours == theirs and (PLOTLY in ours[0][0]) == shown


def _figure_outputs(nb) -> list:
    """The outputs of the cell that shows Figure 4 (``present.prose.figure``)."""
    return next(c for c in nb.cells if 'figure("fig4-trajectories"' in c.source).outputs


def test_a_chapter_written_as_ipynb_runs_under_plain_papermill_and_shows_its_figure(tmp_path, monkeypatch):
    monkeypatch.delenv(RESULTS_ENV, raising=False)  # by hand: no runner
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "results"))
    written = write_notebook(FAST, tmp_path / "chapter.ipynb")
    assert written == tmp_path / "chapter.ipynb"
    nbformat.validate(nbformat.read(written, as_version=4))
    executed = tmp_path / "executed.ipynb"
    papermill.execute_notebook(
        str(written), str(executed), parameters={"profile": "smoke"}, cwd=str(tmp_path), progress_bar=False
    )
    nb = nbformat.read(executed, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert any(PLOTLY in o.get("data", {}) for o in outputs)  # JupyterLab draws it where the cell is
    figure = _figure_outputs(nb)
    assert len(figure) == 2 and PLOTLY in figure[0].data  # drawn where the cell is, its caption under it
    assert figure[1].data["text/markdown"].startswith("*Figure.* Theorem 1's solution for each ratio")
    prose = [
        o.data.get("text/markdown", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs if "data" in o
    ]
    assert not any("{numref}" in t or "{cite:p}" in t or "{glue" in t for t in prose)  # plain references
    assert any("(Petzold, 1983)" in t for t in prose)
    assert (tmp_path / "results" / "interactive" / "smoke" / f"{FAST}.json").is_file()


def test_inside_the_runner_a_figure_is_glued_under_its_caption_for_the_book_only(tmp_path):
    summary = reproduce("smoke", only=[FAST], force=True, out_dir=tmp_path / "out", results_root=tmp_path / "r")
    assert summary.failures == []
    nb = nbformat.read(tmp_path / "out" / f"{FAST}.ipynb", as_version=4)
    figure = _figure_outputs(nb)
    assert len(figure) == 2 and figure[0].output_type == "display_data"
    assert figure[0].metadata["scrapbook"] == {"name": "fig4-trajectories", "mime_prefix": plots.GLUE_PREFIX}
    assert sorted(figure[0].data) == sorted(plots.GLUE_PREFIX + k for k in (PLOTLY, "text/html", "text/plain"))
    assert (
        figure[1].data["text/markdown"].startswith("```{glue:figure} fig4-trajectories\n:name: fig-fig4-trajectories")
    )
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not any(PLOTLY in o.get("data", {}) for o in outputs)  # shown once, under its caption


def test_write_notebook_names_a_bad_chapter_or_file(tmp_path):
    with pytest.raises(ParameterError, match="no chapter 'fig9'; the chapters are .*fig4_mu_trajectories"):
        write_notebook("fig9", tmp_path / "x.ipynb")
    with pytest.raises(ParameterError, match="must end in .ipynb"):
        write_notebook(FAST, tmp_path / "x.md")
    assert write_notebook(FAST, tmp_path) == tmp_path / f"{FAST}.ipynb"
    assert [p.name for p in tmp_path.iterdir()] == [f"{FAST}.ipynb"]  # no temporary file left
    nb = nbformat.read(tmp_path / f"{FAST}.ipynb", as_version=4)
    assert copy.deepcopy(nb.cells[0].source) == jupytext.read(REPO_ROOT / "notebooks" / f"{FAST}.md").cells[0].source
