"""The book's references as plain Markdown for JupyterLab (``present.references``), and the prose helpers
(``present.prose``) that put a page's computed text and figures into hidden cells' outputs."""

from __future__ import annotations

import pytest

from qkov_lib.present import prose
from qkov_lib.present.references import citation, document_link, merge_edit, plain, plain_parts


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
    assert merge_edit(text, (), shown) == (text, [])
    assert merge_edit(text, (), shown.replace("See", "Compare")) == ("Compare {term}`DTAP` and {doc}`lemma3`.", [])
    assert merge_edit(text, (), shown.replace("DTAP", "the map")) == (
        "See the map and {doc}`lemma3`.",
        ["{term}`DTAP`"],
    )


FIGS = "A {numref}`fig-a`, B {numref}`fig-b` and C {numref}`fig-c`."  # a above; b and c below


@pytest.mark.parametrize(
    "edit,merged,lost",
    [
        # the first of three references deleted: the others keep their own roles, not their neighbours'
        (lambda t: t.replace("A the figure above, ", ""), "B {numref}`fig-b` and C {numref}`fig-c`.", []),
        # its mirror: the last deleted
        (lambda t: t.replace(" and C the second figure below", ""), "A {numref}`fig-a`, B {numref}`fig-b`.", []),
        # new words that read like a reference, before one: they stay words, the reference keeps its role
        (lambda t: "Unlike the figure below, " + t, "Unlike the figure below, " + FIGS, []),
        # their mirror, after one
        (lambda t: t + " See the figure above.", FIGS + " See the figure above.", []),
        # an insertion right before and a deletion right after a reference
        (lambda t: t.replace("B the", "B, in the").replace(" and C", " C"), None, []),
        # a reference's own words edited: they stay as written, and the loss is said
        (
            lambda t: t.replace("B the first figure below", "B the plot below"),
            "A {numref}`fig-a`, B the plot below and C {numref}`fig-c`.",
            ["{numref}`fig-b`"],
        ),
    ],
)
def test_an_edit_keeps_every_reference_it_leaves_alone_and_says_which_it_changed(edit, merged, lost):
    shown = plain(FIGS, ["fig-a"])
    assert shown == "A the figure above, B the first figure below and C the second figure below."
    text, gone = merge_edit(FIGS, ["fig-a"], edit(shown))
    assert gone == lost
    if merged is None:
        merged = "A {numref}`fig-a`, B, in {numref}`fig-b` C {numref}`fig-c`."
    assert text == merged


def test_two_references_shown_as_one_keep_both_roles_unless_their_words_are_edited():
    text = "See {numref}`fig-a` and {numref}`fig-b`, then {term}`DTAP`."
    shown = plain(text, ["fig-a", "fig-b"])
    assert shown == "See the figures above, then DTAP."
    assert merge_edit(text, ["fig-a", "fig-b"], shown.replace("then", "and then")) == (
        "See {numref}`fig-a` and {numref}`fig-b`, and then {term}`DTAP`.",
        [],
    )
    assert merge_edit(text, ["fig-a", "fig-b"], shown.replace("figures above", "two figures above")) == (
        "See the two figures above, then {term}`DTAP`.",
        ["{numref}`fig-a` and {numref}`fig-b`"],
    )


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
    assert plain("{numref}`fig-a` shows it. See {numref}`fig-b`.") == (
        "The first figure below shows it. See the second figure below."
    )  # two figures on one side: never the same words for both
    assert (
        plain("{numref}`fig-a` shows it; {numref}`fig-a` again.")
        == "The figure below shows it; the figure below again."
    )
    assert plain("{numref}`fig-b` and then {numref}`fig-a`.", ["fig-a", "fig-b"]) == (
        "The second figure above and then the first figure above."
    )  # above: in the page's order
    merged = plain("{numref}`fig-a`, {numref}`fig-b` and {numref}`fig-c` show maps.", ["fig-a", "fig-b", "fig-c"])
    assert merged == "The figures above show maps."
