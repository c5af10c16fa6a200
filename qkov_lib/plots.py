"""Plotly figure builders shared by the chapters, and ``show``, which renders in JupyterLab and in the built book."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

PALETTE = qualitative.D3


def show(fig: go.Figure) -> None:
    """Display a figure as plotly JSON (JupyterLab) and as HTML that uses the book's local plotly.js (no CDN)."""
    from IPython.display import display
    bundle = {"application/vnd.plotly.v1+json": fig.to_plotly_json(),
              "text/html": fig.to_html(full_html=False, include_plotlyjs=False, config={"responsive": True})}
    display(bundle, raw=True)


def _ratio_label(r: float) -> str:
    return f"r = {r:g}"


def figure4(curves: pd.DataFrame, matched: pd.DataFrame, alpha0: float, time_label: str) -> go.Figure:
    """Figure 4 (a-d): loss against time; mu_OV, mu_QK and alpha against the matched stopping loss.

    ``curves`` has columns ratio, time, loss; ``matched`` has ratio, stopping_loss, mu_ov, mu_qk, alpha and,
    optionally, the Lemma 3 bounds at the matched times (ov_lower, ov_upper, qk_lower, qk_upper).
    """
    fig = make_subplots(rows=2, cols=2, horizontal_spacing=0.1, vertical_spacing=0.16, subplot_titles=(
        "(a) training loss", "(b) μ_OV at matched loss", "(c) μ_QK at matched loss", "(d) α at matched loss"))
    for i, (r, cur) in enumerate(curves.groupby("ratio", sort=True)):
        color, name = PALETTE[i % len(PALETTE)], _ratio_label(r)
        fig.add_trace(go.Scatter(x=cur["time"], y=cur["loss"], name=name, legendgroup=name, line_color=color),
                      row=1, col=1)
        mat = matched[matched["ratio"] == r]
        for (row, col), column in (((1, 2), "mu_ov"), ((2, 1), "mu_qk"), ((2, 2), "alpha")):
            fig.add_trace(go.Scatter(x=mat["stopping_loss"], y=mat[column], name=name, legendgroup=name,
                                     line_color=color, showlegend=False), row=row, col=col)
        for (row, col), column, dash in (((1, 2), "ov_lower", "dot"), ((1, 2), "ov_upper", "dash"),
                                         ((2, 1), "qk_lower", "dot"), ((2, 1), "qk_upper", "dash")):
            if column in mat:
                fig.add_trace(go.Scatter(x=mat["stopping_loss"], y=mat[column], legendgroup=name, showlegend=False,
                                         name=f"{name}, Lemma 3 {column.split('_')[1]} bound",
                                         line=dict(color=color, dash=dash, width=1)), row=row, col=col)
    fig.add_hline(y=alpha0, line=dict(color="grey", dash="dash", width=1), row=2, col=2,
                  annotation_text="α₀ = m/(m+n)", annotation_position="bottom left")
    fig.update_xaxes(type="log", title_text=time_label, row=1, col=1)
    fig.update_yaxes(type="log", title_text="loss", row=1, col=1)
    for row, col, label in ((1, 2, "μ_OV"), (2, 1, "μ_QK"), (2, 2, "α")):
        fig.update_xaxes(type="log", autorange="reversed", title_text="stopping loss", row=row, col=col)
        fig.update_yaxes(title_text=label, row=row, col=col)
    fig.update_yaxes(type="log", row=2, col=1)
    fig.update_yaxes(range=[0, 1.02], row=2, col=2)
    fig.update_layout(height=760, template="plotly_white", legend_title_text="η_QK/η_OV",
                      margin=dict(l=60, r=20, t=60, b=50))
    return fig

