"""The book's references as plain Markdown for JupyterLab (``present.references``), and the prose helpers
(``present.prose``) that put a page's computed text and figures into hidden cells' outputs."""

from __future__ import annotations

import pytest

from qkov_lib.present import prose
from qkov_lib.present.references import citation, document_link, plain, plain_parts, restore


def test_each_role_reads_as_words_a_reader_can_use():
    text = (
        "The {term}`DTAP` map, the {term}`faster rate <faster QK>`, {doc}`lemma3`, {doc}`the deviations "
        "<../deviations>`, {numref}`fig-a` and {numref}`fig-b`, {cite:p}`petzold1983lsoda`, "
        "{cite:t}`deyoung2020eraser`."
    )
    shown = plain(text, figures_above=["fig-a"])
    assert "{" not in shown and "lemma3.md" in shown and "(../book/deviations.md)" in shown
    assert "the figure above" in shown and "the figure below" in shown
    assert "(Petzold, 1983)" in shown and "DeYoung et al. (2020)" in shown


def test_a_document_link_is_titled_by_its_heading_and_points_at_a_source_that_exists():
    assert document_link("fig2_dtap").startswith("[Figure 2") and document_link("fig2_dtap").endswith("(fig2_dtap.md)")
    assert document_link("../reproduce").endswith("(../book/reproduce.md)")
    assert document_link("no_such_page") == "no_such_page"  # no dead link: plain words


def test_a_citation_of_several_works_names_each():
    assert citation("petzold1983lsoda, qkov2026") == "(Petzold, 1983; The authors of arXiv:2608.06776, 2026)"


def test_restoring_an_edit_gives_the_roles_back_where_their_words_remain():
    text = "See {term}`DTAP` and {doc}`lemma3`."
    shown, parts = plain_parts(text)
    assert restore(shown, parts) == text
    edited = shown.replace("See", "Compare")
    assert restore(edited, parts) == "Compare {term}`DTAP` and {doc}`lemma3`."
    assert restore(shown.replace("DTAP", "the map"), parts) == "See the map and {doc}`lemma3`."


def test_a_template_needs_every_value_and_uses_every_value():
    assert prose.fill("a {{x}} and $\\mu_{OV}$", {"x": 3}) == "a 3 and $\\mu_{OV}$"
    with pytest.raises(ValueError, match="no value for x"):
        prose.fill("a {{x}}", {})
    with pytest.raises(ValueError, match="no place for y"):
        prose.fill("a {{x}}", {"x": 1, "y": 2})


@pytest.mark.parametrize("runner", [True, False])
def test_prose_is_myst_in_the_book_and_plain_outside_it(monkeypatch, runner):
    monkeypatch.setattr(prose, "in_runner", lambda: runner)
    text = prose.say("With {{n}} seeds ({doc}`lemma3`).", n=5).data
    assert ("{doc}`lemma3`" in text) == runner and ("(lemma3.md)" in text) != runner and "5 seeds" in text


@pytest.mark.parametrize("runner", [True, False])
def test_a_figure_is_glued_under_its_caption_in_the_book_and_drawn_in_place_outside(monkeypatch, runner):
    shown = []
    monkeypatch.setattr(prose, "in_runner", lambda: runner)
    monkeypatch.setattr(prose, "display", lambda value, **k: shown.append(value))
    monkeypatch.setattr(prose, "glue", lambda key, value, display_it: shown.append(("glued", key, display_it)))
    monkeypatch.setattr(prose, "_figures_shown", [])
    fig = prose.go.Figure(prose.go.Scatter(x=[1, 2], y=[3, 4]))
    prose.figure("k", fig, "Caption with {{n}} seeds.", n=3)
    if runner:
        assert shown[0] == ("glued", "k", False)
        assert shown[1].data == "```{glue:figure} k\n:name: fig-k\n\nCaption with 3 seeds.\n```"
    else:
        assert isinstance(shown[0], prose.Shown) and shown[1].data == "*Figure.* Caption with 3 seeds."
        assert prose.say("{numref}`fig-k`").data == "The figure above"


def test_a_figure_reference_starting_a_sentence_is_capitalised_and_repeats_merge():
    assert plain("{numref}`fig-a` shows it. See {numref}`fig-b`.") == "The figure below shows it. See the figure below."
    merged = plain("{numref}`fig-a`, {numref}`fig-b` and {numref}`fig-c` show maps.", ["fig-a", "fig-b", "fig-c"])
    assert merged == "The figures above show maps."
