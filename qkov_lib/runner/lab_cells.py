"""What JupyterLab shows of a chapter's cells, and what saving writes back (``lab.ChapterContentsManager`` calls
both; the book and papermill never do):

- the cells the book hides are collapsed: a tag ``remove-input`` or ``hide-input`` sets the cell metadata
  JupyterLab reads, ``jupyter.source_hidden``; ``remove-output``/``hide-output`` set ``outputs_hidden``;
  ``remove-cell``/``hide-cell`` both;
- the book's references in Markdown cells (``{term}``, ``{doc}``, ``{numref}``, ``{cite}``) read as plain Markdown
  (``present.references``), which jupyterlab-myst shows without warning markers or dead links.

What a cell had before is kept in its metadata under ``qkov_lab``, and saving puts it back: an unedited chapter is
written back byte for byte, and an edited Markdown cell gets its references back where their words are left."""

from __future__ import annotations

import re
from typing import Any

from ..present.references import plain_parts, restore

KEY = "qkov_lab"  # cell metadata: what this view changed, removed again on saving
HIDDEN = {  # a tag the book reads -> the JupyterLab cell metadata (under "jupyter") that collapses the same part
    "remove-input": ("source_hidden",),
    "hide-input": ("source_hidden",),
    "remove-output": ("outputs_hidden",),
    "hide-output": ("outputs_hidden",),
    "remove-cell": ("source_hidden", "outputs_hidden"),
    "hide-cell": ("source_hidden", "outputs_hidden"),
}
_FIGURE = re.compile(r"""\bfigure\(\s*["']([\w-]+)["']""")  # present.prose.figure("key", ...): the page's fig-key


def _text(source: str | list[str]) -> str:
    return source if isinstance(source, str) else "".join(source)


def to_lab(nb: dict[str, Any]) -> None:
    """Change a chapter's notebook (a dict, as the contents manager serves it) in place for JupyterLab."""
    figures: list[str] = []  # the figures above the cell: "the figure above" or "below"
    for cell in nb["cells"]:
        source = _text(cell["source"])
        if cell["cell_type"] == "code":
            flags = sorted({f for tag in cell["metadata"].get("tags", []) for f in HIDDEN.get(tag, ())})
            jupyter = cell["metadata"].setdefault("jupyter", {})
            added = [f for f in flags if f not in jupyter]
            jupyter.update(dict.fromkeys(added, True))
            if not jupyter:
                del cell["metadata"]["jupyter"]
            if added:
                cell["metadata"][KEY] = {"hidden": added}
            figures += [f"fig-{key}" for key in _FIGURE.findall(source)]
        elif cell["cell_type"] == "markdown":
            shown, parts = plain_parts(source, figures)
            if parts:
                cell["source"] = shown
                cell["metadata"][KEY] = {"source": source, "shown": shown, "parts": parts}


def from_lab(nb: dict[str, Any]) -> None:
    """Undo ``to_lab`` in place on a notebook JupyterLab saves, keeping the reader's edits."""
    for cell in nb["cells"]:
        was = cell["metadata"].pop(KEY, None)
        if not was:
            continue
        if "hidden" in was:
            jupyter = cell["metadata"].get("jupyter", {})
            for flag in was["hidden"]:
                jupyter.pop(flag, None)
            if not jupyter:
                cell["metadata"].pop("jupyter", None)
        if "source" in was:
            shown = _text(cell["source"])
            unedited = shown == was["shown"]
            cell["source"] = was["source"] if unedited else restore(shown, [tuple(p) for p in was["parts"]])
