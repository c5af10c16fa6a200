"""Plotly figure builders shared by the chapters, and ``show``, which renders in JupyterLab and in the built book."""
from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

PALETTE = qualitative.D3


_shown = itertools.count(1)


def show(fig: go.Figure) -> None:
    """Display a figure as plotly JSON (JupyterLab) and as HTML that uses the book's local plotly.js (no CDN). The
    HTML's element id is numbered, not random, so a rerun writes the same notebook."""
    from IPython.display import display
    fig.update_xaxes(exponentformat="power")  # 10⁻⁴, not SI prefixes like "100μ" (μ is a variable here)
    fig.update_yaxes(exponentformat="power")
    html = fig.to_html(full_html=False, include_plotlyjs=False, config={"responsive": True},
                       div_id=f"qkov-figure-{next(_shown)}")
    display({"application/vnd.plotly.v1+json": fig.to_plotly_json(), "text/html": html}, raw=True)


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
    from .metrics import mean_std
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


def _band(fig: go.Figure, x, mean, std, color: str, name: str, row: int, col: int, show: bool) -> None:
    """A mean line with a shaded mean ± std band."""
    fill = "rgba" + color[3:-1] + ",0.18)" if color.startswith("rgb(") else color
    fig.add_trace(go.Scatter(x=x, y=mean + std, line=dict(width=0), hoverinfo="skip", showlegend=False,
                             legendgroup=name), row=row, col=col)
    fig.add_trace(go.Scatter(x=x, y=mean - std, line=dict(width=0), fill="tonexty", fillcolor=fill,
                             hoverinfo="skip", showlegend=False, legendgroup=name), row=row, col=col)
    fig.add_trace(go.Scatter(x=x, y=mean, name=name, legendgroup=name, showlegend=show, line_color=color),
                  row=row, col=col)


FIG3_ROWS = {"train_loss": ("training loss", "training loss"),
             "incentive_per_delta": ("incentive / δ", "(L(α) − L(α+δ)) / δ"),
             "incentive": ("incentive", "L(α) − L(α+δ)")}


def figure3(curves: pd.DataFrame, models: Sequence[str],
            rows: Sequence[str] = ("train_loss", "incentive_per_delta")) -> go.Figure:
    """Figure 3 with one column per OV model and one row per quantity (training loss, incentive per unit alpha,
    raw incentive) against epochs, one curve per fixed alpha, mean ± std over seeds."""
    paper = {("train_loss", 0): "(a) ", ("train_loss", 1): "(b) ", ("incentive_per_delta", 0): "(c) ",
             ("incentive_per_delta", 1): "(d) "}  # the paper's panel names, for its two models
    titles = [f"{paper.get((y, i), '')}{m}<br>{FIG3_ROWS[y][0]}" for y in rows for i, m in enumerate(models)]
    fig = make_subplots(rows=len(rows), cols=len(models), subplot_titles=titles, horizontal_spacing=0.07,
                        vertical_spacing=0.18)
    fig.update_annotations(font_size=13)  # two short lines per panel title: long ones ran into each other
    colors = qualitative.Plotly + qualitative.D3
    for col, model in enumerate(models, start=1):
        sub = curves[curves["model"] == model]
        for i, (a, g) in enumerate(sub.groupby("alpha")):
            stats = g.groupby("epoch")[list(rows)].agg(["mean", "std"]).fillna(0)
            color = _hex_to_rgb(colors[i % len(colors)])
            for row, y in enumerate(rows, start=1):
                if g[y].isna().all():  # no incentive at alpha = 1: alpha + delta would leave [0, 1]
                    continue
                _band(fig, stats.index, stats[(y, "mean")], stats[(y, "std")], color, f"α = {a:g}", row, col,
                      show=col == 1 and row == 1)
    fig.update_xaxes(title_text="epoch")
    for row, y in enumerate(rows, start=1):
        fig.update_yaxes(title_text=FIG3_ROWS[y][1], row=row, col=1)
        if y == "train_loss":
            fig.update_yaxes(type="log", row=row)
    fig.update_layout(template="plotly_white", height=380 * len(rows), legend_title_text="fixed α",
                      margin=dict(l=60, r=20, t=80, b=50))
    return fig


def _hex_to_rgb(color: str) -> str:
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


def verdict_grid(table: pd.DataFrame, claims: Sequence[tuple[str, str]], title: str) -> go.Figure:
    """The atlas: one panel per claim (id, short title), a cell per setting (rows: initialisation; columns: learning
    rate and score scaling), green where the claim holds and red where it fails. ``table`` has init, init_scale,
    lr, scaled_scores, claim_id and holds (one multiplier set)."""
    t = table.assign(row=table["init"] + " " + table["init_scale"].map("{:g}".format),
                     col="lr " + table["lr"].map("{:g}".format) + np.where(table["scaled_scores"], ", 1/√d", ", 1"))
    rows, cols = list(dict.fromkeys(t["row"])), list(dict.fromkeys(t["col"]))
    n_cols = 2
    n_rows = -(-len(claims) // n_cols)
    fig = make_subplots(rows=n_rows, cols=n_cols, subplot_titles=[name for _, name in claims], shared_yaxes=True,
                        horizontal_spacing=0.04, vertical_spacing=0.3)
    for i, (cid, _) in enumerate(claims):
        z = t[t["claim_id"] == cid].pivot(index="row", columns="col", values="holds").reindex(index=rows, columns=cols)
        fig.add_trace(go.Heatmap(z=z.to_numpy(dtype=float), x=cols, y=rows, zmin=0, zmax=1, showscale=False,
                                 colorscale=[[0, "#d62728"], [1, "#2ca02c"]], xgap=2, ygap=2,
                                 text=np.where(z.to_numpy(dtype=float) > 0.5, "holds", "fails"),
                                 texttemplate="%{text}", hovertemplate="%{y}, %{x}: %{text}<extra></extra>"),
                      row=i // n_cols + 1, col=i % n_cols + 1)
    fig.update_layout(title=title, height=n_rows * (130 + 40 * len(rows)) + 60, margin=dict(t=90))
    fig.update_xaxes(tickangle=-40)
    return fig
