"""Figures' text alternatives from their data (``present.describe``): what each kind of figure's sentence says, and
that the figure's HTML carries it for a screen reader and for print."""

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from qkov_lib.present import plots
from qkov_lib.present.describe import array, describe

BINS = [0, 0.2, 0.4, 0.6, 0.8, 1.0]


def test_a_heatmap_grid_names_each_panels_largest_cell_and_where_it_sits():
    top_right, flat = np.zeros((5, 5)), np.full((5, 5), 4.0)
    top_right[4, 4], top_right[0, 0] = 94.6, 5.4
    flat[2, 1] = 8.0
    text = describe(plots.dtap_grid([top_right, flat], ["(a) FAFO", "(b) CACO"], BINS))
    assert text.startswith("A heatmap of probability of the correct answer against attention on the distinct tokens")
    assert "(a) FAFO: the largest cell, 94.6%, is at attention .8–1, probability .8–1" in text
    assert "(b) CACO: the largest cell, 8.0%, is at attention .2–.4, probability .4–.6" in text
    assert "(a) (a)" not in text  # a title that carries its own letter is not lettered again


def test_lines_are_read_where_they_end_highest_and_lowest_first():
    curves = pd.DataFrame(
        {"label": ["fast"] * 3 + ["slow"] * 3 + ["mid"] * 3, "step": [1, 10, 100] * 3, "seed": 0}
    ).assign(train_nll=[1.0, 0.1, 0.01, 1.0, 0.9, 0.8, 1.0, 0.5, 0.3])
    text = describe(plots.learning_curves(curves))
    assert "training loss (cross-entropy) against training step" in text
    assert "at the last training step, slow highest at 0.8 and fast lowest at 0.01, of 3 lines" in text.lower()


def test_lines_that_end_together_are_said_to():
    fig = go.Figure([go.Scatter(x=[0, 1], y=[2, 1.0], name="a"), go.Scatter(x=[0, 1], y=[3, 1.0], name="b")])
    assert "both lines end at 1" in describe(fig)


def test_a_bar_chart_names_its_tallest_and_shortest_bar():
    fig = go.Figure(go.Bar(x=["HateXplain", "SVA", "SQuAD"], y=[12.0, 30.5, 4.0]))
    assert "3 bars, the tallest SVA (30.5), the shortest SQuAD (4)" in describe(fig)


def test_a_heatmap_of_words_counts_its_cells():
    words = np.array([["holds", "fails"], ["holds", "holds"]], dtype=object)
    fig = go.Figure(go.Heatmap(z=np.ones((2, 2)), customdata=words))
    assert "3 cells read “holds” and 1 cell reads “fails”" in describe(fig)


def test_plotlys_typed_arrays_are_read_as_arrays():
    z = np.arange(6, dtype=np.float64).reshape(2, 3)
    encoded = go.Figure(go.Heatmap(z=z)).to_plotly_json()["data"][0]["z"]
    assert np.array_equal(array(encoded), z)
    assert np.array_equal(array({"dtype": "f8", "bdata": "AAAAAAAA8D8AAAAAAAAAQA=="}), [1.0, 2.0])


def test_the_figures_html_carries_its_text_alternative():
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1], name="QK & OV"))
    shown = plots.Shown(fig)
    assert shown.alt == describe(fig) and shown.alt not in ("", fig.layout.title.text)
    assert 'role="img"' in shown.html and 'aria-label="A line chart.' in shown.html
    assert f'<p class="{plots.ALT_CLASS}">' in shown.html and "QK &amp; OV ends at 1" in shown.html
