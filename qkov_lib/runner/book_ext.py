"""A small Sphinx extension for the book (named in ``_config.yml``): plotly.js (4.8 MB) is linked only from pages
that hold a figure, and, when the book names its repository (``repository.url``), each chapter page gets links to
open its source, ``notebooks/<chapter>.md``, live on Binder (JupyterLab, opened as a notebook through jupytext), to
open its notebook in Colab (the one the publishing job puts on the ``colab`` branch, ``qkov_lib/runner/publish.py``) and
to read it in the repository; a chapter computed at another commit than the book's says so in its header
("commit X (the book is at Y)")."""

from __future__ import annotations

import re
from typing import Any

from ..core.results import git_commit
from ..present.site_html import BANNER_COMMIT, older_note, with_launch_links
from .notebooks import colab_link

BOOK_COMMIT = "qkov_book_commit"  # a config value: the commit the book is built at (a change rewrites every page)
REPOSITORY = "qkov_repository"  # a config value: the repository the book names ('' : none, so no launch links)
PLOTLY_JS = "plotly.min.js"
FIGURE_MARK = "plotly-graph-div"  # the class of the div each figure's HTML draws into (plots.show)
CHAPTER_PAGES = "book/chapters/"  # where the executed chapters are; their sources are notebooks/<name>.md
BINDER = "https://mybinder.org/v2/gh"


def launch_links(repo_url: str, branch: str, chapter: str) -> dict[str, str]:
    """Where to open a chapter's source: on Binder and Colab (GitHub repositories only) and in the repository's web
    view."""
    source = f"notebooks/{chapter}.md"
    links = {}
    github = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?", repo_url)
    if github:
        owner, repo = github.groups()
        links["open on Binder"] = f"{BINDER}/{owner}/{repo}/{branch}?urlpath=lab/tree/{source}"
        links["open in Colab"] = colab_link(owner, repo, chapter)
    links["source"] = f"{repo_url.rstrip('/')}/blob/{branch}/{source}"
    return links


def mark_older(body: str, book_commit: str | None) -> str:
    """Add "(the book is at Y)" after the commit in a chapter's banner when the chapter was computed at another
    commit than the book's ``Y``."""
    found = BANNER_COMMIT.search(body)
    if not found or not book_commit or book_commit.removesuffix("+dirty").startswith(found.group(2)):
        return body
    return body[: found.end()] + older_note(book_commit) + body[found.end() :]


def _page(app: Any, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    body = context.get("body", "")
    if FIGURE_MARK in body:
        app.builder.add_js_file(PLOTLY_JS, priority=800)  # this page only: Sphinx resets the list per page
    if pagename.startswith(CHAPTER_PAGES):
        body = context["body"] = mark_older(body, app.config[BOOK_COMMIT])
    repository = app.config[REPOSITORY]  # the book's own repository only: Jupyter Book fills in one of its own
    if pagename.startswith(CHAPTER_PAGES) and repository:
        branch = app.config.html_theme_options.get("repository_branch") or "main"
        context["body"] = with_launch_links(body, launch_links(repository, branch, pagename[len(CHAPTER_PAGES) :]))


def setup(app: Any) -> dict[str, Any]:
    app.add_config_value(BOOK_COMMIT, git_commit(), "html")
    app.add_config_value(REPOSITORY, "", "html")
    app.connect("html-page-context", _page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
