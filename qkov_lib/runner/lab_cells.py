"""What JupyterLab shows of a chapter's cells, and what saving writes back (``lab.ChapterContentsManager`` calls
both; the book and papermill never do):

- the cells the book hides are collapsed: a tag ``remove-input`` or ``hide-input`` sets the cell metadata
  JupyterLab reads, ``jupyter.source_hidden``; ``remove-output``/``hide-output`` set ``outputs_hidden``;
  ``remove-cell``/``hide-cell`` both;
- the book's references in Markdown cells (``{term}``, ``{doc}``, ``{numref}``, ``{cite}``) read as plain Markdown
  (``present.references``), which jupyterlab-myst shows without warning markers or dead links.

What a cell had before is kept in its metadata under ``qkov_lab``, and saving puts it back: an unedited chapter is
written back byte for byte, and an edited Markdown cell is a three-way merge (``present.references.merge_edit``):
the reader's words as written, each reference whose words the edit left alone back in place, and the references an
edit changed named in JupyterLab's log (the chapter's source gets the reader's words and no line of metadata). The
metadata comes back from the browser, so it is trusted only as far as it can be checked: a Markdown cell's recorded
source must give exactly the view it records (so it can differ from what the reader saw by references alone), a code
cell's may only name the flags the view set; anything else is a ``ViewError`` and nothing is saved."""

from __future__ import annotations

import re
from typing import Any

from ..present.references import merge_edit, plain_parts

KEY = "qkov_lab"  # cell metadata: what this view changed, removed again on saving
FLAGS = ("source_hidden", "outputs_hidden")
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
                cell["metadata"][KEY] = {"source": source, "shown": shown, "figures": list(figures)}


class ViewError(ValueError):
    """A cell's view metadata that this view did not write (garbled, forged, or pasted onto another kind of cell)."""


def from_lab(nb: dict[str, Any]) -> dict[int, list[str]]:
    """Undo ``to_lab`` in place on a notebook JupyterLab saves, keeping the reader's edits; the references each
    edited cell lost (cell index -> their MyST). ViewError, with the notebook untouched, when a cell's view
    metadata does not check."""
    views = {i: _checked(i, cell) for i, cell in enumerate(nb["cells"]) if KEY in cell["metadata"]}
    lost: dict[int, list[str]] = {}
    for i, was in views.items():
        cell = nb["cells"][i]
        del cell["metadata"][KEY]
        jupyter = cell["metadata"].get("jupyter", {})
        for flag in was.get("hidden", []):
            jupyter.pop(flag, None)
        if not jupyter:
            cell["metadata"].pop("jupyter", None)
        if "source" in was:
            cell["source"], gone = merge_edit(was["source"], was["figures"], _text(cell["source"]))
            if gone:  # named in JupyterLab's log (``lab``), never in the chapter's source
                lost[i] = gone
    return lost


def _checked(i: int, cell: dict[str, Any]) -> dict[str, Any]:
    """A cell's view metadata after checking that this view could have written it for this cell."""
    was = cell["metadata"][KEY]
    where = f"cell {i + 1}'s {KEY} metadata"
    fix = "delete it (the cell's metadata, in the property inspector) and save again; nothing was saved"
    if cell["cell_type"] == "code":
        if not (isinstance(was, dict) and set(was) == {"hidden"} and _strings(was["hidden"], FLAGS)):
            raise ViewError(f"{where} is not what this view writes on a code cell (the cells it collapsed); {fix}")
        return was
    if not (
        cell["cell_type"] == "markdown"
        and isinstance(was, dict)
        and set(was) == {"source", "shown", "figures"}
        and isinstance(was["source"], str)
        and isinstance(was["shown"], str)
        and _strings(was["figures"])
    ):
        raise ViewError(f"{where} is garbled or on a cell this view did not change; {fix}")
    if plain_parts(was["source"], was["figures"])[0] != was["shown"]:
        raise ViewError(f"{where} records a source that does not give the view it records (altered?); {fix}")
    return was


def _strings(value: Any, allowed: tuple[str, ...] | None = None) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and (allowed is None or v in allowed) for v in value)
