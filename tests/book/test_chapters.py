"""Every chapter under the smoke profile: papermill run, nbval re-run, and a strict Jupyter Book build."""

import os
import re
import subprocess
import sys
from html import unescape
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from conftest import TEST_REPOSITORY

from qkov_lib.core import results
from qkov_lib.core.chapter import ParameterError
from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.runner.book import _book_config
from qkov_lib.runner.book_ext import launch_links
from qkov_lib.runner.catalog import CHAPTERS


@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_chapter_prints_environment_and_has_checked_outputs(smoke_book, chapter):
    nb = nbformat.read(smoke_book / "book" / "chapters" / f"{chapter}.ipynb", as_version=4)
    shown_html = "".join(
        o.get("data", {}).get("text/html", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert 'class="qkov-settings"' in shown_html and "Profile <code>smoke</code> on " in shown_html  # the box
    assert f"--only {chapter}" in shown_html  # ... with the command that reruns the chapter
    head = nb.cells[0].source.splitlines()
    claims = any(c.cell_type == "markdown" and "## The claims, checked" in c.source for c in nb.cells)
    assert head[2].startswith("**Verdict: ") == claims  # a page that judges claims opens with their tally
    assert head[4 if claims else 2].startswith("*This page was run with profile `smoke` · ")  # then the banner
    tagged = [c for c in nb.cells if "nbval-check-output" in c.metadata.get("tags", [])]
    assert tagged and all(c.outputs for c in tagged)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not any(o.output_type == "error" or o.get("name") == "stderr" for o in outputs)  # no warnings, no bars
    shown = nbformat.writes(nb)
    assert str(smoke_book) not in shown and "PosixPath" not in shown  # no machine paths on a page


@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_nbval_second_run_gives_same_outputs(smoke_book, chapter, tmp_path):
    env = {
        **os.environ,
        "QKOV_RESULTS_DIR": str(tmp_path / "results"),
        "QKOV_RESULTS_ROOT": str(smoke_book / "data" / "results"),
        "QKOV_STORE": "off",  # every run trained again, none read from the store
    }  # where the scorecard reads the others
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--nbval-lax",
            "--rootdir",
            str(tmp_path),
            str(smoke_book / "book" / "chapters" / f"{chapter}.ipynb"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, (
        proc.stdout[-3000:]
        + proc.stderr[-2000:]
        + _rerun_diagnosis(smoke_book / "data" / "results" / "smoke", tmp_path / "results", chapter)
    )
    assert " passed" in proc.stdout


def _rerun_diagnosis(first: Path, rerun: Path, chapter: str) -> str:
    """What differed between the smoke book's run and the re-run, beyond the cells nbval shows: the environment
    entries that a number can depend on (``device.describe``), and each table's largest numeric difference."""

    def tables(folder: Path) -> tuple[dict, dict]:
        meta = results.read_meta(folder, chapter)
        return {t: pd.read_csv(results.table_path(folder, chapter, t)) for t in meta["tables"]}, meta

    try:
        (a, meta_a), (b, meta_b) = tables(first), tables(rerun)
    except Exception as err:  # noqa: BLE001 - the diagnosis must never hide the failure it explains
        return f"\n(no diagnosis: {type(err).__name__}: {err})"
    keys = ["cpu", "cpu_id", "cpu_capability", "torch", "numpy", "python", "qkov_lib", "git_commit"]
    env = [f"{k}: {meta_a.get(k)!r} -> {meta_b.get(k)!r}" for k in keys if meta_a.get(k) != meta_b.get(k)]
    lines = [
        f"environment differs: {'; '.join(env)}"
        if env
        else f"same environment ({meta_a.get('cpu_id')}, {meta_a.get('cpu_capability')})"
    ]
    for name in sorted(set(a) & set(b)):
        x, y = a[name].select_dtypes("number"), b[name].select_dtypes("number")
        if x.shape != y.shape or list(x.columns) != list(y.columns):
            lines.append(f"{name}: shapes {a[name].shape} -> {b[name].shape}")
            continue
        diff = (x - y).abs().max()
        if len(diff) and diff.max() > 0:
            lines.append(f"{name}: largest difference {diff.max():.3g} (in {diff.idxmax()})")
    return "\nre-run diagnosis:\n  " + "\n  ".join(lines)


def test_book_builds_warning_free_and_offline(built_book):
    assert (built_book / "index.html").exists()
    html = (built_book / "book" / "chapters" / "fig4_mu_trajectories.html").read_text()
    assert "plotly-graph-div" in html and "_static/plotly.min.js" in html
    assert "cdn.plot.ly" not in html and "_static/mathjax/MathJax.js" in html
    assert '"exponentformat":"power"' in html and 'id="qkov-figure-1"' in html
    assert "# Parameters" not in html  # papermill's injected cell is hidden; the box under the title lists them
    assert html.count('class="qkov-settings"') == 1 and "<code>ratios</code>" in html  # the settings, folded
    for page in (built_book / "book" / "chapters").glob("*.html"):  # the pages show results, not code
        shown = re.findall(r'<div class="cell_input', page.read_text())
        folded = re.findall(r'class="cell tag_[^"]*hide-input[^"]*docutils container"', page.read_text())
        assert len(shown) == len(folded), f"{page.name} shows {len(shown) - len(folded)} code cell(s)"
    assert (built_book / "_static" / "plotly.min.js").exists()


def test_chapter_pages_link_the_repository_and_launch_their_own_source(built_book):
    """Every chapter page links the repository and opens its source on Binder and its notebook in Colab; each
    source link names a file that exists."""
    pages = sorted((built_book / "book" / "chapters").glob("*.html"))
    assert len(pages) == len(CHAPTERS)
    for page in pages:
        html = page.read_text()
        links = re.findall(r'href="([^"]+)">(open on Binder|open in Colab|source)</a>', html)
        assert [text for _, text in links] == ["open on Binder", "open in Colab", "source"], page.name
        binder, colab, source = (unescape(url) for url, _ in links)
        assert (
            colab
            == f"https://colab.research.google.com/github/example-owner/qkov-companion/blob/colab/{page.stem}.ipynb"
        )
        assert 'profile = "smoke"' in html  # the hint for a first run
        assert (
            binder
            == f"https://mybinder.org/v2/gh/example-owner/qkov-companion/main?urlpath=lab/tree/notebooks/{page.stem}.md"
        )
        assert source == f"{TEST_REPOSITORY}/blob/main/notebooks/{page.stem}.md"
        assert (REPO_ROOT / source.split("/blob/main/", 1)[1]).is_file()
        assert f'href="{TEST_REPOSITORY}"' in html  # the theme's repository button
    assert "open on Binder" not in (built_book / "book" / "intro.html").read_text()


def test_launch_links_outside_github_and_a_bad_repository_url(tmp_path):
    assert launch_links("https://gitlab.example.org/a/b", "dev", "fig2_dtap") == {
        "source": "https://gitlab.example.org/a/b/blob/dev/notebooks/fig2_dtap.md"
    }
    (tmp_path / "_config.yml").write_text("title: t\n")
    with pytest.raises(ParameterError, match="not an http"):
        _book_config(tmp_path, "github.com/owner/repo", "main")


def test_references_page_links_every_work_and_states_the_data_licences(built_book):
    html = (built_book / "book" / "references.html").read_text()
    for link in ("https://doi.org/10.1137/0904010", "https://arxiv.org/abs/2608.06776", "aclanthology.org/Q16-1037"):
        assert link in html
    assert "CC BY-NC 4.0" in html and "CC BY-SA 4.0" in html
    chapter = (built_book / "book" / "chapters" / "hatexplain.html").read_text()
    assert "references.html#" in chapter
