"""The book's figures: one plotly template for all of them (fonts, sizes, margins), the builders the chapters share
(DTAP heatmap grids, learning curves, panels of lines), and the wrapper that shows a figure in JupyterLab and in the
built book, where a chapter places it in a numbered, captioned figure (``prose.figure``).

Every figure is titled by its caption, not inside the plot: titles inside a plot get clipped or run into the panel
titles on a narrow screen. Panel titles are short and wrap; each axis title is written once per figure."""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from IPython.core.formatters import format_display_data
from IPython.display import display
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from ..metrics import mean_std
from .describe import describe

PALETTE = qualitative.D3
FONT = "Helvetica, Arial, sans-serif"
TICK_SIZE = 13  # px: tick labels, heatmap cell numbers, legend entries (at least 12 on every screen)
TITLE_SIZE = 14  # px: panel titles and axis titles

pio.templates["qkov"] = go.layout.Template(
    layout=dict(
        font=dict(family=FONT, size=TICK_SIZE, color="#24292f"),
        xaxis=dict(tickfont_size=TICK_SIZE, title_font_size=TITLE_SIZE, automargin=True, exponentformat="power"),
        yaxis=dict(tickfont_size=TICK_SIZE, title_font_size=TITLE_SIZE, automargin=True, exponentformat="power"),
        legend=dict(font_size=TICK_SIZE, title_font_size=TICK_SIZE),
        annotationdefaults=dict(font_size=TITLE_SIZE),
        margin=dict(l=60, r=20, t=40, b=50),
        hoverlabel=dict(font_size=TICK_SIZE),
    )
)
pio.templates.default = "plotly_white+qkov"

_shown = itertools.count(1)


ALT_CLASS = "qkov-alt"  # the figure's text alternative: hidden on screen (read out), printed in the report


class Shown:
    """A figure as the page shows it: plotly JSON for JupyterLab, and HTML that draws with the book's local
    plotly.js (no CDN), its element id numbered, not random, so a rerun writes the same notebook. ``glue`` stores
    it for a captioned ``{glue:figure}``; ``display`` shows it in place. The HTML carries the figure's text
    alternative (``describe.describe``, from its data): ``role="img"`` and ``aria-label`` on its container, and the
    same words in a visually hidden paragraph that prints."""

    def __init__(self, fig: go.Figure) -> None:
        self.fig = fig
        self.alt = describe(fig)
        plot = fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            config={"responsive": True, "displayModeBar": False},
            div_id=f"qkov-figure-{next(_shown)}",
        )
        alt = html.escape(self.alt)
        self.html = (
            f'<div class="qkov-figure" role="img" aria-label="{alt}">{plot}<p class="{ALT_CLASS}">{alt}</p></div>'
        )

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"application/vnd.plotly.v1+json": self.fig.to_plotly_json(), "text/html": self.html}


def show(fig: go.Figure) -> None:
    """Display a figure where the cell is (a figure without a caption: prefer ``prose.figure``)."""
    display(Shown(fig))


GLUE_PREFIX = "application/papermill.record/"  # myst-nb's mark of an output glued without being displayed


def glue(name: str, value: object, display_it: bool) -> None:
    """``myst_nb.glue(name, value, display=display_it)``, written as myst-nb writes it (one display output whose
    metadata names it), without importing myst-nb and Sphinx into every chapter's kernel."""
    bundle, metadata = format_display_data(value)
    prefix = "" if display_it else GLUE_PREFIX
    metadata["scrapbook"] = dict(name=name, mime_prefix=prefix)
    display({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)


def clear_axis_titles(fig: go.Figure, x_label: str | None, y_label: str | None) -> None:
    """Move the figure-wide axis titles of ``make_subplots`` (``x_title``, ``y_title``) clear of the tick labels,
    which plotly leaves them on top of."""
    for note in fig.layout.annotations:
        if x_label and note.text == x_label:
            note.update(yshift=-45)
        elif y_label and note.text == y_label:
            note.update(xshift=-50)


def legend_below(fig: go.Figure, gap: int = 80) -> None:
    """The legend under the plot, ``gap`` px below the plotting area (clear of the tick labels and the x title). The
    bottom margin holds the legend even on a phone, where each entry takes its own line, and the figure grows by what
    the margin grows, so the plotting area keeps its height; call after the figure's height is set."""
    entries = sum(1 for t in fig.data if t.showlegend is not False and t.name)
    top = fig.layout.margin.t if fig.layout.margin.t is not None else 40
    old = fig.layout.margin.b if fig.layout.margin.b is not None else 50
    bottom = gap + 24 * max(entries, 1) + 10
    height = (fig.layout.height or 450) + bottom - old
    fig.update_layout(
        height=height,
        margin_b=bottom,
        legend=dict(orientation="h", yanchor="top", x=0, y=-gap / (height - top - bottom)),
    )


def log_axes(fig: go.Figure, x: bool = False, y: bool = False, **where) -> None:
    """Log scales; an axis whose data span a decade or more is labelled at each power of ten only (plotly's minor
    labels read as other powers), a narrower one keeps plotly's plain numbers. ``where``: row, col."""
    traces = list(fig.select_traces(**where)) if where else list(fig.data)
    for letter, on in (("x", x), ("y", y)):
        if not on:
            continue
        getattr(fig, f"update_{letter}axes")(type="log", **where)
        spans: dict[str, list[float]] = {}
        for trace in traces:
            values = np.asarray(getattr(trace, letter) if getattr(trace, letter) is not None else [], dtype=float)
            values = values[np.isfinite(values) & (values > 0)]
            if values.size:
                ref = getattr(trace, f"{letter}axis") or letter
                span = spans.setdefault(ref, [np.inf, 0.0])
                span[0], span[1] = min(span[0], values.min()), max(span[1], values.max())
        for ref, (low, high) in spans.items():
            if high >= 10 * low:  # a label every power of ten, or every few on a long axis
                fig.layout[ref.replace(letter, f"{letter}axis", 1)].update(
                    dtick=max(1, math.ceil(math.log10(high / low) / 6))
                )


def dtap_grid(
    maps: Sequence[np.ndarray],
    titles: Sequence[str],
    bins: Sequence[float],
    cols: int = 2,
    zmax: float | None = None,
    x_label: str = "attention on the distinct tokens",
    y_label: str = "probability of the correct answer",
    unit: str = "%",
) -> go.Figure:
    """A grid of DTAP heatmaps (the share of test examples per cell, to the nearest whole number), high probability
    at the top as in the paper; two panels to a row sharing their axes' labels, so that a cell's number stays
    readable on a phone."""
    rows = -(-len(maps) // cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=list(titles),
        horizontal_spacing=0.04,
        vertical_spacing=0.45 / rows,
        x_title=x_label,
        y_title=y_label,
        shared_xaxes=True,
        shared_yaxes=True,
    )
    edges = [f"{b:g}".removeprefix("0") if 0 < b < 1 else f"{b:g}" for b in bins]
    centres = [f"{lo}–{hi}" for lo, hi in itertools.pairwise(edges)]
    zmax = zmax if zmax is not None else max(float(np.max(m)) for m in maps)
    for i, m in enumerate(maps):
        fig.add_trace(
            go.Heatmap(
                z=m,
                x=centres,
                y=centres,
                zmin=0,
                zmax=zmax,
                colorscale="Blues",
                showscale=False,
                text=np.round(m).astype(int),
                texttemplate="%{text}",
                textfont=dict(size=TICK_SIZE),
                xgap=1,
                ygap=1,
                hovertemplate=f"attention %{{x}}<br>probability %{{y}}<br>%{{z:.2f}}{unit}<extra></extra>",
            ),
            row=i // cols + 1,
            col=i % cols + 1,
        )
    fig.update_xaxes(tickangle=-45)
    clear_axis_titles(fig, x_label, y_label)
    fig.update_layout(height=240 * rows + 150, margin=dict(l=100, r=10, t=40, b=110))
    return fig


def dtap_conditions(
    maps: dict[str, np.ndarray], bins: Sequence[float], x_label: str, y_label: str = "probability of the correct answer"
) -> go.Figure:
    """Figures 5-7: each condition's DTAP mean over seeds (left) and standard deviation over seeds (right), one
    condition to a row; ``maps`` [seeds, y, x] per condition."""
    titles, panels = [], []
    for condition, m in maps.items():
        mean, std = mean_std(m)
        titles += [f"{condition}:<br>mean", f"{condition}:<br>std. deviation"]
        panels += [mean, std]
    return dtap_grid(panels, titles, bins, cols=2, x_label=x_label, y_label=y_label)


def learning_curves(
    curves: pd.DataFrame,
    y: str = "train_nll",
    y_label: str = "training loss (cross-entropy)",
    x: str = "step",
    x_label: str = "training step",
) -> go.Figure:
    """One line per run (mean over seeds) against training steps, log axes; ``curves`` has label, ``x``, seed and
    ``y``."""
    fig = go.Figure()
    for i, (label, cur) in enumerate(curves.groupby("label", sort=False)):
        mean = cur.groupby(x)[y].mean()
        fig.add_trace(go.Scatter(x=mean.index, y=mean.values, name=label, line_color=PALETTE[i % len(PALETTE)]))
    fig.update_xaxes(title_text=x_label)
    fig.update_yaxes(title_text=y_label)
    log_axes(fig, x=True, y=True)
    fig.update_layout(height=480)
    legend_below(fig)
    return fig


def band(fig: go.Figure, x, mean, std, color: str, name: str, row: int, col: int, show: bool) -> None:
    """A mean line with a shaded mean ± std band."""
    fill = "rgba" + color[3:-1] + ",0.18)" if color.startswith("rgb(") else color
    fig.add_trace(
        go.Scatter(x=x, y=mean + std, line=dict(width=0), hoverinfo="skip", showlegend=False, legendgroup=name),
        row=row,
        col=col,
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=mean - std,
            line=dict(width=0),
            fill="tonexty",
            fillcolor=fill,
            hoverinfo="skip",
            showlegend=False,
            legendgroup=name,
        ),
        row=row,
        col=col,
    )
    fig.add_trace(
        go.Scatter(x=x, y=mean, name=name, legendgroup=name, showlegend=show, line_color=color), row=row, col=col
    )


def hex_to_rgb(color: str) -> str:
    if color.startswith("#"):
        r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
        return f"rgb({r},{g},{b})"
    return color


def style_legend(fig: go.Figure, name: str, dash: str, description: str) -> None:
    """A legend entry for a line style (e.g. dashed: a bound), in grey, with no data of its own."""
    fig.add_trace(
        go.Scatter(
            x=[None],
            y=[None],
            mode="lines",
            name=description,
            legendgroup=f"style-{name}",
            line=dict(color="#6e7781", dash=dash, width=1.5),
            hoverinfo="skip",
        )
    )


def line_panels(
    data: pd.DataFrame,
    x: str,
    panels: Sequence[tuple[str, str]],
    group: str,
    x_label: str,
    log_x: bool = True,
    log_y: Sequence[bool] = (),
    dashed: str | None = None,
    dashed_label: str = "",
    cols: int = 2,
) -> go.Figure:
    """One panel per (column, title) of ``panels``, ``cols`` to a row: a line per value of ``group`` against ``x``.

    ``dashed`` names a boolean column whose True rows are drawn dashed as separate lines (e.g. a reference ODE),
    ``dashed_label`` says in the legend what a dashed line is.
    """
    cols = min(cols, len(panels))
    rows = -(-len(panels) // cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[t for _, t in panels],
        horizontal_spacing=0.14,
        vertical_spacing=0.45 / rows,
        x_title=x_label,
    )
    styles = [(False, "solid")] + ([(True, "dash")] if dashed else [])
    for i, (key, part) in enumerate(data.groupby(group, sort=False)):
        for flag, dash in styles:
            sub = part[part[dashed] == flag] if dashed else part
            if sub.empty:
                continue
            name = f"{key}"
            for j, (column, _) in enumerate(panels):
                fig.add_trace(
                    go.Scatter(
                        x=sub[x],
                        y=sub[column],
                        name=name,
                        legendgroup=name,
                        showlegend=j == 0 and not flag,
                        line=dict(color=PALETTE[i % len(PALETTE)], dash=dash),
                    ),
                    row=j // cols + 1,
                    col=j % cols + 1,
                )
    if dashed:
        style_legend(fig, dashed, "dash", dashed_label or f"dashed: {dashed}")
    clear_axis_titles(fig, x_label, None)
    for j in range(len(panels)):
        where = dict(row=j // cols + 1, col=j % cols + 1)
        log_axes(fig, x=log_x, y=j < len(log_y) and log_y[j], **where)
    fig.update_layout(height=330 * rows + 200, margin=dict(l=60, r=20, t=50))
    legend_below(fig)
    return fig
