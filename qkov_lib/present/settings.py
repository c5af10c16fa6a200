"""The folded box under a chapter's title: how it ran (profile, device, versions), the settings that differ from
the defaults (all of them a click further) and the command that reruns it; and ``begin``, the first call of every
chapter page, which starts the chapter (``core.chapter.start``) and shows the box."""

from __future__ import annotations

import html
import types
from collections.abc import Mapping, Sequence
from typing import Any

from IPython.display import HTML, display

from .. import __version__
from ..core import results
from ..core.chapter import Chapter, as_dict, start


def begin(module: types.ModuleType, profile: str = "default", overrides: Mapping[str, Any] | None = None) -> Chapter:
    """Start the chapter (its setup for a profile plus overrides, checked) and show its settings box."""
    chapter = start(module, profile, overrides)
    display(HTML(settings_box(chapter, module.Setup)))
    return chapter


def settings_box(chapter: Chapter, setup_type: type) -> str:
    """The folded box under a chapter's title: how it ran, its settings against the defaults (the paper's where it
    states them, this book's choices where it is silent; the page's text describes them), those that differ shown
    first, the rest a click further, and the command that reruns it, with the parameters' names."""
    env, params, defaults = chapter.environment, chapter.params, as_dict(setup_type())
    differ = [k for k in params if params[k] != defaults[k]]

    def rows(names: Sequence[str]) -> str:
        cells = "".join(
            f"<tr><td><code>{html.escape(k)}</code></td><td>{html.escape(repr(params[k]))}</td>"
            f"<td>{html.escape(repr(defaults[k]))}</td></tr>"
            for k in names
        )
        return (
            f"<table><thead><tr><th>parameter</th><th>this run</th><th>the default</th></tr></thead>"
            f"<tbody>{cells}</tbody></table>"
        )

    ran = (
        f"Profile <code>{chapter.profile}</code> on {html.escape(env['device'])} "
        f"({html.escape(env['device_name'])}), torch {html.escape(env['torch'])}, qkov_lib {__version__}."
    )
    if not params:
        shown = "<p>This chapter takes no parameters.</p>"
    else:
        shown = (rows(differ) if differ else "<p>Every setting is the default.</p>") + (
            f"<details><summary>All {len(params)} settings</summary>{rows(list(params))}</details>"
        )
    command = f"python -m qkov_lib reproduce --profile {chapter.profile} --only {chapter.name}"
    example = f" -p {next(iter(params))} VALUE" if params else ""
    rerun = (
        f"<p><strong>Rerun this chapter:</strong> <code>{html.escape(command)}</code>; change a setting with "
        f"<code>{html.escape(command + example)}</code>. Or edit <code>overrides</code> in the notebook, "
        f"<code>notebooks/{chapter.name}.md</code>, and run it: a chapter run by hand saves its results into "
        f"<code>data/results/{results.INTERACTIVE}/</code>, apart from the published ones; to keep an edit, pass "
        f"it with <code>-p</code> rather than saving it into the source, which would make the published "
        f"chapter stale (the book's JupyterLab, <code>make lab</code>, never saves on its own).</p>"
    )
    label = (
        f"{len(differ)} of {len(params)} settings differ from the defaults the text describes (the paper's, where "
        "it states them)"
        if params
        else "How this page ran"
    )
    return (
        f'<details class="qkov-settings"><summary>{label}; rerun this chapter</summary><p>{ran}</p>{shown}'
        f"{rerun}</details>"
    )
