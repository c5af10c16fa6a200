"""A chapter's launch links name the book's own repository, or none: never the repository Jupyter Book fills in for
a book that names none (its ``html_theme_options`` default)."""

from types import SimpleNamespace

from qkov_lib.runner import book_ext
from qkov_lib.runner.book import _book_config
from qkov_lib.runner.published import repository_url

JUPYTER_BOOK_DEFAULT = {"repository_url": "https://github.com/executablebooks/jupyter-book", "repository_branch": ""}


def page(repository: str) -> str:
    """The body of a chapter page after the extension, built with ``repository`` named (or none: '')."""

    class Config(dict):  # Sphinx's config: read by key and by attribute
        html_theme_options = JUPYTER_BOOK_DEFAULT

    app = SimpleNamespace(config=Config({book_ext.REPOSITORY: repository, book_ext.BOOK_COMMIT: None}))
    context = {"body": "<h1>Chapter</h1>"}
    book_ext._page(app, "book/chapters/fig2_dtap", "page.html", context, None)
    return context["body"]


def test_without_a_repository_no_launch_link_and_no_foreign_one():
    body = page("")
    assert "open on Binder" not in body and "executablebooks" not in body


def test_with_the_books_repository_its_links():
    body = page("https://github.com/owner/repo")
    assert "mybinder.org/v2/gh/owner/repo/main" in body and "executablebooks" not in body


def test_the_clones_own_remote_names_the_repository_where_it_is_on_github():
    assert repository_url("git@github.com:owner/repo.git") == "https://github.com/owner/repo"
    assert repository_url("https://github.com/owner/repo") == "https://github.com/owner/repo"
    assert repository_url("/srv/clones/repo.git") is None and repository_url(None) is None


def test_a_named_repository_reaches_the_extension(tmp_path):
    (tmp_path / "_config.yml").write_text("title: t\n")
    derived = _book_config(tmp_path, "https://github.com/owner/repo/", "main").read_text()
    assert f"{book_ext.REPOSITORY}: https://github.com/owner/repo" in derived
