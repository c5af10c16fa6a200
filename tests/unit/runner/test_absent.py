"""A chapter the build does not compute gets a page saying so, and why where the chapter knows (the atlas's cost
under ``official``)."""

import nbformat

from qkov_lib.runner import plan


def _page(tmp_path, chapter: str, profile: str) -> str:
    out = tmp_path / profile / chapter
    plan.defer(chapter, profile, "38 of 38 runs not in the store", tmp_path / "none", out, stored_only=True)
    return nbformat.read(out / f"{chapter}.ipynb", as_version=4).cells[0].source


def test_a_chapter_not_computed_says_why_where_it_knows(tmp_path):
    atlas = _page(tmp_path, "atlas", "official")
    assert "*Not computed (profile `official`)" in atlas and "--only atlas` computes it.*" in atlas
    assert "hours on 2 cores" in atlas and atlas.endswith(".")  # the cost, from the committed default runs
    assert _page(tmp_path, "atlas", "default").endswith("computes it.*")
    assert _page(tmp_path, "fig2_dtap", "official").endswith("computes it.*")
