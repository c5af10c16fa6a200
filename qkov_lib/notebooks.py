"""A chapter as a Jupyter notebook (``.ipynb``) for plain papermill or any notebook tool: its source,
``notebooks/<name>.md`` (jupytext MyST), converted with jupytext, cells, tags and kernelspec as they are. Papermill
reads only ``.ipynb``: ``papermill notebooks/<name>.md ...`` fails with ``NotJSONError``.

    python -m qkov_lib notebook fig4_mu_trajectories -o fig4.ipynb
    papermill fig4.ipynb fig4-run.ipynb -p profile smoke -y 'overrides: {M: 20}'

A chapter run this way writes its tables to ``data/results/interactive/<profile>/``, never over what the runner
published, and shows its figures where their cells are (``plots.glue_figure``)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import jupytext

from .chapter import ParameterError
from .contents import NOTEBOOKS_DIR, chapter_names


def write_notebook(name: str, target: Path | str | None = None) -> Path:
    """Write chapter ``name`` as an ``.ipynb`` at ``target`` (default ``<name>.ipynb`` in the current folder; a
    folder: ``<name>.ipynb`` in it), replacing the file at once (never half written). Returns the path written."""
    names = chapter_names()
    if name not in names:
        raise ParameterError(f"no chapter {name!r}; the chapters are {', '.join(names)}")
    target = Path(target) if target is not None else Path(f"{name}.ipynb")
    if target.is_dir():
        target = target / f"{name}.ipynb"
    if target.suffix != ".ipynb":
        raise ParameterError(f"the notebook's file name must end in .ipynb (got {str(target)!r})")
    if not target.parent.is_dir():
        raise ParameterError(f"no folder {str(target.parent)!r} to write the notebook into")
    nb = jupytext.read(NOTEBOOKS_DIR / f"{name}.md")
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".ipynb", dir=target.parent)
    os.close(fd)
    try:
        jupytext.write(nb, tmp, fmt="ipynb")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
