"""The HTML the build adds to the book's pages and the site's own: a chapter's links to run it yourself, the note on
a chapter computed at another commit than the book's (and how its banner renders that commit), and the site's index
page, one entry per profile's book. ``runner.book_ext`` and ``runner.publish`` decide where each goes."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

# the commit in a chapter's banner (reproduce.banner), as Sphinx renders ``commit `0123abcd…```
BANNER_COMMIT = re.compile(
    r'(commit <code class="[^"]*"><span class="pre">)([0-9a-f]{7,40})((?:\+dirty)?</span>'
    r"</code>)"
)
SITE_TITLE = "Faster Query-Key Learning Sharpens Attention: a reproducible companion"


def launch_html(links: Mapping[str, str]) -> str:
    """A chapter's links to open its source (Binder, Colab, the repository), under its title."""
    items = " · ".join(
        f'<a class="reference external" href="{html.escape(url)}">{html.escape(text)}</a>'
        for text, url in links.items()
    )
    return (
        f'<p class="qkov-launch">Run this chapter yourself: {items}. On Binder or a CPU, set '
        f'<code>profile = "smoke"</code> in the parameters cell for a quick first run.</p>'
    )


def with_launch_links(body: str, links: Mapping[str, str]) -> str:
    """A chapter page's ``body`` with its launch links (``launch_html``) under its title; unchanged without one."""
    return body.replace("</h1>", "</h1>\n" + launch_html(links), 1)


def older_note(book_commit: str) -> str:
    """'(the book is at Y)', set after the commit of a chapter's banner computed at another commit than the book."""
    short = html.escape(book_commit[:12] + ("+dirty" if book_commit.endswith("+dirty") else ""))
    return f' (the book is at <code class="docutils literal notranslate"><span class="pre">{short}</span></code>)'


class Entry(NamedTuple):
    """A profile's book on the site: its folder, what the profile is, and the commit and date it was built at
    (None where the build left no stamp)."""

    folder: str
    description: str
    commit: str | None
    date: str | None


def profiles_page(entries: Sequence[Entry]) -> str:
    """The site's index: a small page linking every profile's book, with the commit and date each was built at."""
    items = []
    for e in entries:
        built = (
            f" Built at commit <code>{html.escape(e.commit[:12])}</code> on {html.escape(e.date or '?')}."
            if e.commit is not None
            else ""
        )
        items.append(
            f'<li><a href="{e.folder}/index.html"><strong>{html.escape(e.folder)}</strong></a>: '
            f"{html.escape(e.description)}.{built}</li>"
        )
    return (
        '<!doctype html>\n<html lang="en">\n<head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{SITE_TITLE}</title></head>\n"
        '<body style="font-family: sans-serif; max-width: 48em; margin: 2em auto; line-height: 1.5">\n'
        f"<h1>{SITE_TITLE}</h1>\n"
        "<p>The same book, run under each profile (each chapter's module says what a profile changes); every page says "
        "at which commit it was computed.</p>\n<ul>\n" + "\n".join(items) + "\n</ul>\n</body>\n</html>\n"
    )
