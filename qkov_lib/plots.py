"""Plotly figure builders shared by the chapters, and ``show``, which renders in JupyterLab and in the built book."""
from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from IPython.display import display
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from .metrics import mean_std

PALETTE = qualitative.D3


_shown = itertools.count(1)


def show(fig: go.Figure) -> None:
    """Display a figure as plotly JSON (JupyterLab) and as HTML that uses the book's local plotly.js (no CDN). The
    HTML's element id is numbered, not random, so a rerun writes the same notebook."""
    fig.update_xaxes(exponentformat="power")  # 10⁻⁴, not SI prefixes like "100μ" (μ is a variable here)
    fig.update_yaxes(exponentformat="power")
    html = fig.to_html(full_html=False, include_plotlyjs=False, config={"responsive": True},
                       div_id=f"qkov-figure-{next(_shown)}")
    display({"application/vnd.plotly.v1+json": fig.to_plotly_json(), "text/html": html}, raw=True)


def dtap_grid(maps: Sequence[np.ndarray], titles: Sequence[str], bins: Sequence[float], title: str,
              cols: int = 4, zmax: float | None = None, x_label: str = "attention on distinct tokens",
              y_label: str = "p(correct class)") -> go.Figure:
    """A grid of DTAP heatmaps (percent of test examples per cell), high probability at the top as in the paper."""
    rows = -(-len(maps) // cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=list(titles), horizontal_spacing=0.05,
                        vertical_spacing=0.14)
    centres = [f"{lo:g}–{hi:g}" for lo, hi in zip(bins[:-1], bins[1:])]
    zmax = zmax if zmax is not None else max(float(np.max(m)) for m in maps)
    for i, m in enumerate(maps):
        fig.add_trace(go.Heatmap(z=m, x=centres, y=centres, zmin=0, zmax=zmax, colorscale="Blues",
                                 showscale=i == 0, text=np.round(m, 1), texttemplate="%{text}",
                                 colorbar=dict(title="%", len=0.8),
                                 hovertemplate="attention %{x}<br>probability %{y}<br>%{z:.2f}%<extra></extra>"),
                      row=i // cols + 1, col=i % cols + 1)
    fig.update_xaxes(tickfont_size=8)
    fig.update_xaxes(title_text=x_label, title_font_size=10, row=rows)
    fig.update_yaxes(tickfont_size=8)
    fig.update_yaxes(title_text=y_label, title_font_size=10, col=1)
    fig.update_layout(title=title, height=330 * rows + 60, template="plotly_white",
                      margin=dict(l=50, r=20, t=80, b=40))
    return fig


def dtap_conditions(maps: dict[str, np.ndarray], bins: Sequence[float], title: str, x_label: str,
                    y_label: str = "p(correct class)") -> go.Figure:
    """Figures 5-7: each condition's DTAP mean over seeds (top row) and standard deviation (bottom row); ``maps``
    [seeds, y, x] per condition."""
    means, stds = zip(*(mean_std(m) for m in maps.values()))
    titles = [f"{c}, mean" for c in maps] + [f"{c}, std" for c in maps]
    return dtap_grid(list(means) + list(stds), titles, bins, title, cols=len(maps), x_label=x_label, y_label=y_label)


def learning_curves(curves: pd.DataFrame, y: str = "train_nll", title: str = "training NLL") -> go.Figure:
    """One line per panel (mean over seeds) against steps, log axes; ``curves`` has label, step, seed and ``y``."""
    fig = go.Figure()
    for i, (label, cur) in enumerate(curves.groupby("label", sort=False)):
        mean = cur.groupby("step")[y].mean()
        fig.add_trace(go.Scatter(x=mean.index, y=mean.values, name=label, line_color=PALETTE[i % len(PALETTE)]))
    fig.update_xaxes(type="log", title_text="step")
    fig.update_yaxes(type="log", title_text=title)
    fig.update_layout(template="plotly_white", height=420, margin=dict(l=60, r=20, t=30, b=50))
    return fig


def band(fig: go.Figure, x, mean, std, color: str, name: str, row: int, col: int, show: bool) -> None:
    """A mean line with a shaded mean ± std band."""
    fill = "rgba" + color[3:-1] + ",0.18)" if color.startswith("rgb(") else color
    fig.add_trace(go.Scatter(x=x, y=mean + std, line=dict(width=0), hoverinfo="skip", showlegend=False,
                             legendgroup=name), row=row, col=col)
    fig.add_trace(go.Scatter(x=x, y=mean - std, line=dict(width=0), fill="tonexty", fillcolor=fill,
                             hoverinfo="skip", showlegend=False, legendgroup=name), row=row, col=col)
    fig.add_trace(go.Scatter(x=x, y=mean, name=name, legendgroup=name, showlegend=show, line_color=color),
                  row=row, col=col)


def hex_to_rgb(color: str) -> str:
    if color.startswith("#"):
        r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
        return f"rgb({r},{g},{b})"
    return color


def line_panels(data: pd.DataFrame, x: str, panels: Sequence[tuple[str, str]], group: str,
                x_label: str, log_x: bool = True, log_y: Sequence[bool] = (), dashed: str | None = None,
                cols: int = 3) -> go.Figure:
    """One panel per (column, title) of ``panels``, ``cols`` to a row: a line per value of ``group`` against ``x``.

    ``dashed`` names a boolean column whose True rows are drawn dashed as separate lines (e.g. a reference ODE).
    """
    cols = min(cols, len(panels))
    rows = -(-len(panels) // cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[t for _, t in panels], horizontal_spacing=0.09,
                        vertical_spacing=0.16)
    styles = [(False, "solid")] + ([(True, "dash")] if dashed else [])
    for i, (key, part) in enumerate(data.groupby(group, sort=False)):
        for flag, dash in styles:
            sub = part[part[dashed] == flag] if dashed else part
            if sub.empty:
                continue
            name = f"{key}" + (f" ({dashed})" if flag else "")
            for j, (column, _) in enumerate(panels):
                fig.add_trace(go.Scatter(x=sub[x], y=sub[column], name=name, legendgroup=name,
                                         showlegend=j == 0, line=dict(color=PALETTE[i % len(PALETTE)], dash=dash)),
                              row=j // cols + 1, col=j % cols + 1)
    for j in range(len(panels)):
        where = dict(row=j // cols + 1, col=j % cols + 1)
        fig.update_xaxes(type="log" if log_x else "linear", title_text=x_label, **where)
        if j < len(log_y) and log_y[j]:
            fig.update_yaxes(type="log", **where)
    fig.update_layout(height=380 * rows + 60, template="plotly_white", margin=dict(l=60, r=20, t=60, b=50))
    return fig
