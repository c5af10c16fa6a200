"""A small Sphinx extension for the book (named in ``_config.yml``): plotly.js (4.8 MB) is linked only from pages
that hold a figure."""
from __future__ import annotations

from typing import Any

PLOTLY_JS = "plotly.min.js"
FIGURE_MARK = "plotly-graph-div"  # the class of the div each figure's HTML draws into (plots.show)


def _page_scripts(app: Any, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    if FIGURE_MARK in context.get("body", ""):
        app.builder.add_js_file(PLOTLY_JS, priority=800)  # this page only: Sphinx resets the list per page


def setup(app: Any) -> dict[str, Any]:
    app.connect("html-page-context", _page_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
