"""A page's computed prose and captioned figures, as the outputs of its hidden cells: the one route by which a
number, a sentence, an equation or a figure reaches the page that both renderers show. myst-nb renders a Markdown
output as MyST (``nb_render_markdown_format: myst``), so the book resolves its references, numbers its figures and
draws its formulas; jupyterlab-myst renders the same output in JupyterLab, which has no ``{glue}`` and no Sphinx to
resolve references, so there the references are plain Markdown (``references.plain``) and a figure is drawn in
place with its caption under it. Before a chapter runs, its hidden cells have no outputs: JupyterLab then shows the
prose around them, never a key or an error box.

A template names its values ``{{name}}``; every name must be given, and every value given must be used."""

from __future__ import annotations

import re
from collections.abc import Mapping

import plotly.graph_objects as go
from IPython.display import Markdown, display

from ..core.results import in_runner
from .plots import Shown, glue
from .references import plain

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_figures_shown: list[str] = []  # outside the runner: the figures this kernel has drawn, for "the figure above"


def fill(template: str, values: Mapping[str, object]) -> str:
    """``template`` with each ``{{name}}`` replaced by ``str(values[name])``; ValueError naming a missing or
    unused value."""
    names = set(_PLACEHOLDER.findall(template))
    if missing := names - set(values):
        raise ValueError(f"no value for {', '.join(sorted(missing))} in the template {template[:60]!r}...")
    if unused := set(values) - names:
        raise ValueError(f"the template {template[:60]!r}... has no place for {', '.join(sorted(unused))}")
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), template)


def for_reader(text: str) -> Markdown:
    """MyST as this kernel's reader sees it: the book's own text inside the runner, plain references outside."""
    return Markdown(text if in_runner() else plain(text, _figures_shown))


def say(template: str, **values: object) -> Markdown:
    """A paragraph (or list, or equation) of the page with this run's values in it: display it as a hidden cell's
    output (its last expression)."""
    return for_reader(fill(template.strip(), values))


def figure(key: str, fig: go.Figure, caption: str, **values: object) -> None:
    """Show a chapter's figure with its caption (a template, as for ``say``) where the cell is. In the book: glued
    under ``key`` and placed by a ``{glue:figure}`` named ``fig-<key>``, which ``{numref}`` numbers; in JupyterLab
    and plain papermill: drawn, the caption under it."""
    text = fill(caption.strip(), values)
    shown = Shown(fig)
    if in_runner():
        glue(key, shown, display_it=False)
        display(Markdown(f"```{{glue:figure}} {key}\n:name: fig-{key}\n\n{text}\n```"))
        return
    display(shown)
    display(for_reader(f"*Figure.* {text}"))
    _figures_shown.append(f"fig-{key}")
