"""What the atlas's page shows: labels in words, the verdict maps of the grid and the ablation, tables for reading,
and the prose generated from the results (the ablation's budget, its flips, its reading)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...metrics.stats import mean_ci
from ...metrics.verdicts import COLOURS, FAILS, HOLDS, UNDECIDED
from ...present.tables import listed
from ...present.text import power
from .. import fig2_dtap
from .ablation import budget, factor
from .claims import decided, flips, where_claims_hold
from .cost import official_cost
from .grid import RUN, SETTING, rows_of
from .setup import FACTOR_KEYS, PAPER_LR, Setup, shared

# Figure 2's claims (fig2_dtap.claims ids) in a few words, for the headers of the figures and tables.
SHORT = {
    "collapsed_ov_top_right": "collapsed OV top-right",
    "fafo_top_left": "FAFO top-left",
    "faster_qk_top_right": "faster QK top-right",
    "prediction_kept": "prediction kept",
}
SYMBOL = {HOLDS: "✓", FAILS: "✗", UNDECIDED: "?"}  # a verdict in a cell of a verdict map
START = {"paper": "the paper's settings", "authors": "the authors' settings"}


def absent(profile: str) -> str:
    """Why the page is missing under ``profile``, for the runner's page of a chapter not computed: the cost under
    ``official`` (``cost.official_cost``); '' otherwise."""
    return official_cost() if profile == "official" else ""


def clock(setup: Setup) -> str:
    """The rate and budget the ablation ran at, in a few words: 'rate 0.01, full budgets' or 'rate 0.1, step counts
    ÷10' (and the cap)."""
    k, cap = setup.ablation_speedup, setup.ablation_cap
    if k == 1 and cap is None:
        return f"rate {PAPER_LR:g}, full budgets"
    return (
        f"rate {PAPER_LR * k:g}"
        + (f", step counts ÷{k}" if k > 1 else "")
        + (f", at most {cap:,} steps" if cap else "")
    )


def flip_table(table: pd.DataFrame, ran_at: str = "") -> pd.DataFrame:
    """``flips`` for reading, one row per factor and claim (in words, the index): each direction as 'before →
    after', and whether the factor flips the claim (from both ends, from one, or not); ``ran_at`` (``clock``) labels
    the two directions' columns with the profile and rate they ran at."""

    def both(r: pd.Series) -> str:
        paper, authors = r["from the paper's"] == "flips", r["from the authors'"] == "flips"
        return (
            "from both ends"
            if paper and authors
            else "from the paper's"
            if paper
            else "from the authors'"
            if authors
            else "no"
        )

    f = flips(table)
    index = pd.MultiIndex.from_arrays(
        [[factor(k).name for k in f["factor"]], [SHORT.get(c, c) for c in f["claim_id"]]], names=["factor", "claim"]
    )
    at = f" ({ran_at})" if ran_at else ""
    return pd.DataFrame(
        {
            f"switched on in the paper's settings{at}": (f["paper"] + " → " + f["paper + factor"]).to_numpy(),
            f"switched off in the authors' settings{at}": (f["authors"] + " → " + f["authors - factor"]).to_numpy(),
            "flips it": f.apply(both, axis=1).to_numpy(),
        },
        index=index,
    )


def reading(table: pd.DataFrame, ran_at: str = "") -> str:
    """The ablation in sentences, generated from ``claims.claims_per_run``' output: per claim, its verdict at both end
    points and which factors, switched alone, flip it from which end (Markdown, one bullet per claim), after a line
    naming the profile and rate the runs trained at (``ran_at``)."""
    f = flips(table)
    verdict = table.set_index([RUN, "claim_id"])["verdict"]
    lines = [f"Every run below trained at {ran_at}.\n"] if ran_at else []
    for cid in dict.fromkeys(table["claim_id"]):
        part = f[f["claim_id"] == cid]
        paper, authors = verdict[("paper", cid)], verdict[("authors", cid)]
        said = []
        for side, switch, before in (("from the paper's", "on", paper), ("from the authors'", "off", authors)):
            flipped = [factor(k).name for k in part.loc[part[side] == "flips", "factor"]]
            if flipped:
                after = FAILS if before == HOLDS else HOLDS
                said.append(
                    f"switching {switch} the authors' {listed(flipped, 'or')} alone flips it from {before} to {after}"
                )
        unclear = [
            factor(r["factor"]).name
            for _, r in part.iterrows()
            if "unclear" in (r["from the paper's"], r["from the authors'"])
        ]
        together = paper != authors and UNDECIDED not in (paper, authors)
        body = (
            "; ".join(said) + "."
            if said
            else "no single factor flips it" + (": it takes several together." if together else ".")
        )
        if unclear:
            body += f" Undecided on one side of the switch: {listed(unclear)}."
        lines.append(
            f"- **{SHORT.get(cid, cid)}** {paper} in the paper's settings and {authors} in the authors'. "
            f"{body[0].upper()}{body[1:]}"
        )
    return "\n".join(lines)


def factor_text(key: str) -> str:
    """What a factor switches, the paper's way against the authors' (Section 4 against their notebooks), with the
    values read from fig2_dtap's setup and official profile."""
    paper, official = fig2_dtap.Setup(), fig2_dtap.PROFILES["official"]
    steps = official["panel_steps"]
    return {
        "layout": f"the paper's {paper.vocab} token ids, one per token, and {paper.seq_len - 1} context tokens, "
        f"against the authors' {official['vocab_size']} ids, the queries and next tokens among the common "
        f"ones, and {official['seq_len'] - 1} context tokens ({official['seq_len_gh'] - 1} in panels g and "
        f"h)",
        "weights": "the distinct tokens of a class drawn equally often, against weights rising from 0.1 to 1.0",
        "scaling": f"attention scores as in eq. (1), against scores divided by √{official['vocab_size']}",
        "fresh": f"a fixed training set of {paper.n_train:,} sequences per seed, against fresh random sequences at "
        f"every step",
        "classes": f"classes balanced, {paper.n_train // paper.n_classes:,} sequences of each in a training set, "
        f"against each sequence's class drawn at random",
        "collapsed": f"a collapsed matrix starting as its two factors' product ({paper.init_scale**2:g}·I), so all "
        f"four parameterisations start as one function, against the authors' {paper.init_scale:g}·I, "
        f"the start of every one of their layers",
        "init": f"every panel from the chapter's start, against PyTorch's default initialisation of some matrices "
        f"(panels {listed(sorted(official['pytorch_init']))})",
        "multipliers": f"QK multipliers ×{paper.mult_e:g} and 1→{paper.ramp_f:g} in panels e and f (the paper's "
        f"caption), against the code's ×{official['mult_e']:g} and 1→{official['ramp_f']:g}",
        "budgets": f"every panel trained until the loss reaches {paper.target_nll:g} or {paper.max_steps:,} steps, "
        f"against the authors' loop per panel: budgets of {min(steps.values()):,} to "
        f"{max(steps.values()):,} steps and their own stopping rule (none in panels "
        f"{listed([k for k, v in official['panel_stop'].items() if v is None])})",
    }[key]


def factor_list(factors: Sequence[str] = FACTOR_KEYS) -> str:
    """The ablation's factors as Markdown bullets: each one's name and what it switches (``factor_text``)."""
    return "\n".join(f"- **{factor(k).name}**: {factor_text(k)};" for k in factors).removesuffix(";") + "."


def budget_text(setup: Setup) -> str:
    """The ablation's budget in a sentence, against the paper's and the authors' own (``ablation.budget``)."""
    b = budget(setup.ablation_speedup, setup.ablation_cap, shared(setup))
    if b["speedup"] == 1 and b["cap"] is None:
        return f"Every run trains at the paper's rate {b['paper lr']:g} with the full budgets."
    paper, authors = b["paper"], b["authors"]
    how = (
        f"Each run trains at the rate {b['lr']:g} instead of {b['paper lr']:g}, with every step count divided by "
        f"{b['speedup']}"
    )
    how += (
        ", so that rate × steps, the time of gradient flow, stays the paper's and the authors'"
        if b["cap"] is None
        else f" and at most {b['cap']:,} (a quick check: rate × steps, the time of gradient flow, is then shorter "
        f"than the paper's and the authors')"
    )
    return (
        f"{how}: the paper's step cap of {_span(paper['full caps'].values())} becomes "
        f"{_span(paper['caps'].values())}, the authors' per-panel budgets of "
        f"{_span(authors['full caps'].values())} steps become {_span(authors['caps'].values())}, and the QK "
        f"ramps take {paper['ramp']:,} steps instead of {paper['full ramp']:,}."
    )


def _span(values: Any) -> str:
    """'10,000 to 100,000', or '100' where every value is the same."""
    lo, hi = min(values), max(values)
    return f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"


def decided_text(table: pd.DataFrame) -> str:
    """How many of the ablation's verdicts this budget decides, and how many of its models its step caps stopped."""
    d = decided(table)
    runs = table.drop_duplicates(RUN)
    return (
        f"At this budget {d['decided']} of the ablation's {d['verdicts']} verdicts are decided (the claim holds "
        f"or fails) and {d['undecided']} undecided; {int(runs['capped models'].sum()):,} of its "
        f"{int(runs['models'].sum()):,} models stopped at their step cap or trained their whole budget."
    )


def scale_text(x: float) -> str:
    """A scale as a reader writes it: '10⁻⁶' for a power of ten below 0.001, else '0.1', '1'."""
    exponent = math.log10(x) if x > 0 else 0.0
    if x < 1e-3 and float(exponent).is_integer():
        return power(int(exponent))
    return f"{x:g}"


def init_label(kind: str, scale: float) -> str:
    """'identity ×10⁻⁶', 'balanced ×0.1', 'PyTorch default' (scale 1) or 'PyTorch ×0.5'."""
    if kind == "pytorch":
        return "PyTorch default" if scale == 1 else f"PyTorch ×{scale_text(scale)}"
    return f"{kind} ×{scale_text(scale)}"


def rate_label(lr: float, scaled: bool) -> str:
    """'rate 0.1, scores ×1/√d' or 'rate 0.1, unscaled'."""
    return f"rate {lr:g}, " + ("scores ×1/√d" if scaled else "unscaled")


def setting_label(row: Mapping[str, Any]) -> str:
    """A grid setting in words: 'identity ×10⁻⁶, rate 0.1, unscaled'."""
    return f"{init_label(row['init'], row['init_scale'])}, {rate_label(row['lr'], bool(row['scaled_scores']))}"


def multipliers_label(mults: Sequence[float]) -> str:
    """A multiplier set [mult_e, ramp_f, mult_g, ramp_h] in words: 'QK ×10, 1→20, ×5, 1→10'."""
    e, f, g, h = mults
    return f"QK ×{e:g}, 1→{f:g}, ×{g:g}, 1→{h:g}"


def run_label(key: str) -> str:
    """An ablation run in words, within its end point: 'as written', '+ token layout', 'as coded', '− fresh
    batches'."""
    if key in ("paper", "authors"):
        return "as written" if key == "paper" else "as coded"
    start, switched = key.split("+") if "+" in key else key.split("-", 1)
    return ("+ " if start == "paper" else "− ") + factor(switched).name


def verdict_map(
    words: pd.DataFrame, groups: Sequence[str], extra: Sequence[str] | None = None, extra_name: str = ""
) -> go.Figure:
    """A map of verdicts: one row per run (``words``' index), the rows of each group (``groups``, one per row) in a
    panel titled by it, one column per claim (``words``' columns), each cell the verdict's symbol on its colour;
    ``extra`` (text per row) a last, grey column, e.g. the models stopped at the step cap."""
    names = list(dict.fromkeys(groups))
    sizes = [list(groups).count(g) for g in names]
    fig = make_subplots(
        rows=len(names),
        cols=1,
        shared_xaxes=True,
        row_heights=sizes,
        vertical_spacing=min(0.3, 50 / (30 * len(words) + 50 * len(names))),
    )
    columns = [_wrap(c) for c in words.columns] + ([_wrap(extra_name)] if extra is not None else [])
    levels = {FAILS: 0.0, UNDECIDED: 1 / 3, HOLDS: 2 / 3}
    scale = [
        [0, COLOURS[FAILS]],
        [1 / 6, COLOURS[FAILS]],
        [1 / 6, COLOURS[UNDECIDED]],
        [1 / 2, COLOURS[UNDECIDED]],
        [1 / 2, COLOURS[HOLDS]],
        [5 / 6, COLOURS[HOLDS]],
        [5 / 6, "#eaeef2"],
        [1, "#eaeef2"],
    ]
    group_of = np.asarray(groups)
    for i, name in enumerate(names):
        part = words[group_of == name]
        z = part.replace(levels).to_numpy(dtype=float)
        text = part.replace(SYMBOL).to_numpy(dtype=object)
        hover = part.to_numpy(dtype=object)
        if extra is not None:
            here = np.asarray(extra, dtype=object)[group_of == name][:, None]
            z, text, hover = np.hstack([z, np.ones_like(z[:, :1])]), np.hstack([text, here]), np.hstack([hover, here])
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=columns,
                y=list(part.index),
                zmin=0,
                zmax=1,
                showscale=False,
                xgap=3,
                ygap=3,
                colorscale=scale,
                text=text,
                texttemplate="%{text}",
                textfont=dict(size=14),
                customdata=hover,
                hovertemplate="%{y}<br>%{x}: %{customdata}<extra></extra>",
            ),
            row=i + 1,
            col=1,
        )
        top = fig.get_subplot(i + 1, 1).yaxis.domain[1]  # the group's name over its rows' labels
        fig.add_annotation(
            text=f"<b>{name}</b>",
            x=0,
            xref="paper",
            xanchor="right",
            y=top,
            yref="paper",
            yanchor="bottom",
            showarrow=False,
        )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(showticklabels=False)  # the claims name the columns once, under the last group
    fig.update_xaxes(showticklabels=True, row=len(names), col=1)
    fig.update_layout(height=30 * len(words) + 50 * len(names) + 130, margin=dict(l=10, r=20, t=40, b=90))
    return fig


def _wrap(text: str, width: int = 12) -> str:
    """Short lines joined by <br> (a column header on a phone)."""
    lines, line = [], ""
    for w in text.split():
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    return "<br>".join([*lines, line])


def grid_figure(table: pd.DataFrame, rows: pd.DataFrame, mult_sets: Sequence[Sequence[float]]) -> go.Figure:
    """Figure 2's claims per setting of the grid (``table``: ``claims.claims_per_setting``' output): rows grouped by
    initialisation,
    one column per claim (the faster-QK claims once per multiplier set when there are several), and the models of
    each setting (``rows``: the sweep's) stopped at the step cap."""
    t = table.assign(
        group=[init_label(k, s) for k, s in zip(table["init"], table["init_scale"])],
        rate=[rate_label(lr, bool(s)) for lr, s in zip(table["lr"], table["scaled_scores"])],
    )
    faster = {"faster_qk_top_right", "prediction_kept"}
    several = len(mult_sets) > 1
    t["column"] = [
        SHORT.get(c, c) + (f" ({multipliers_label(mult_sets[int(j)])})" if several and c in faster else "")
        for c, j in zip(t["claim_id"], t["mult_set"])
    ]
    t = t[~t.duplicated(["group", "rate", "column"])]  # a-d's claims are the same in every multiplier set
    order = list(dict.fromkeys(zip(t["group"], t["rate"])))
    words = t.pivot(index=["group", "rate"], columns="column", values="verdict")
    words = words.reindex(index=pd.MultiIndex.from_tuples(order), columns=list(dict.fromkeys(t["column"])))
    g = rows_of(rows).groupby(SETTING, sort=False)["hit_cap"]
    capped = {
        (init_label(k, s), rate_label(lr, bool(sc))): f"{int(n)}/{size}"
        for ((k, s, lr, sc), n), size in zip(g.sum().items(), g.size())
    }
    return verdict_map(
        words.set_axis([r for _, r in order]), [grp for grp, _ in order], [capped[r] for r in order], "at the step cap"
    )


def ablation_figure(table: pd.DataFrame) -> go.Figure:
    """Figure 2's claims in every ablation run: the paper's settings and each factor switched on, the authors'
    settings and each switched off; one column per claim and the models stopped at the step cap."""
    keys = list(dict.fromkeys(table[RUN]))
    words = table.pivot(index=RUN, columns="claim_id", values="verdict").reindex(
        index=keys, columns=list(dict.fromkeys(table["claim_id"]))
    )
    words.columns = [SHORT.get(c, c) for c in words.columns]
    first = table.drop_duplicates(RUN).set_index(RUN)
    extra = [f"{first.loc[k, 'capped models']}/{first.loc[k, 'models']}" for k in keys]
    return verdict_map(
        words.set_axis([run_label(k) for k in keys]),
        [START[first.loc[k, "start"]] for k in keys],
        extra,
        "at the step cap",
    )


def share_table(table: pd.DataFrame) -> pd.DataFrame:
    """``where_claims_hold`` for reading: per claim (its short name, the index), the settings where it holds, fails
    and is undecided, of how many."""
    share = where_claims_hold(table)
    return pd.DataFrame(
        {
            "holds": share[HOLDS].to_numpy(),
            "fails": share[FAILS].to_numpy(),
            "undecided": share[UNDECIDED].to_numpy(),
            "of settings": share["settings"].to_numpy(),
        },
        index=pd.Index([SHORT.get(c, c) for c in share["claim_id"]], name="claim"),
    )


def by_axis(table: pd.DataFrame) -> pd.DataFrame:
    """Per value of each grid axis (rows, in words) and claim (columns, short names): in how many of the settings
    with that value the claim holds, 'k of n' (a claim that holds for every setting with one value and no setting
    with another hinges on that axis)."""
    t = table.assign(
        initialisation=[init_label(k, s) for k, s in zip(table["init"], table["init_scale"])],
        **{
            "learning rate": table["lr"].map("{:g}".format),
            "score scaling": np.where(table["scaled_scores"], "×1/√d", "none"),
        },
        holds=table["verdict"] == HOLDS,
    )
    parts = []
    for axis in ("initialisation", "learning rate", "score scaling"):
        g = t.groupby([axis, "claim_id"], sort=False)["holds"]
        counted = pd.DataFrame({"held": g.sum(), "of": g.size()}).reset_index()
        parts.append(
            pd.DataFrame(
                {
                    "axis": axis,
                    "value": counted[axis],
                    "claim_id": counted["claim_id"],
                    "holds": [f"{h} of {n}" for h, n in zip(counted["held"], counted["of"])],
                }
            )
        )
    ids = list(dict.fromkeys(table["claim_id"]))  # the claims in Figure 2's order
    both = pd.concat(parts)
    out = both.pivot(index=["axis", "value"], columns="claim_id", values="holds")
    order = list(dict.fromkeys(zip(both["axis"], both["value"])))
    out = out.reindex(index=pd.MultiIndex.from_tuples(order, names=["axis", "value"]), columns=ids)
    return out.rename(columns=lambda c: SHORT.get(c, c)).rename_axis(columns=None)


def panel_table(rows: pd.DataFrame, columns: Sequence[str] = ("ACMC", "top_right_cell", "MRTA")) -> pd.DataFrame:
    """Per setting (in words), multiplier set and panel: each measure's seed mean with the half-width of its 95%
    interval ('mean ± hw'), and the seeds stopped at the step cap; one setting column, so the table stays narrow."""

    def fmt(values: pd.Series) -> str:
        mean, half = mean_ci(values.to_numpy())
        return f"{mean:.1f}" if np.isnan(half) else f"{mean:.1f} ± {half:.1f}"

    rows = rows_of(rows)
    keys = [*SETTING, "mult_set", "panel"]
    g = rows.groupby(keys, sort=False)
    out = g[list(columns)].agg(fmt).reset_index()
    out["capped"] = g["hit_cap"].sum().astype(int).to_numpy().astype(str) + " of " + g.size().to_numpy().astype(str)
    labels = g[["parameterisation", "qk_mult", "qk_schedule"]].first().reset_index()
    out.insert(0, "setting", [setting_label(r) for _, r in out.iterrows()])
    out["panel"] = [panel_label(r) for _, r in labels.iterrows()]
    return out.drop(columns=[*SETTING, "mult_set"])


def panel_label(row: Mapping[str, Any]) -> str:
    """'(e) FAFO, QK ×10', '(f) FAFO, QK 1→20', '(a) FAFO'."""
    mult, schedule = float(row["qk_mult"]), row["qk_schedule"]
    speed = (
        "" if mult == 1 and schedule == "constant" else f", QK 1→{mult:g}" if schedule == "ramp" else f", QK ×{mult:g}"
    )
    return f"({row['panel']}) {row['parameterisation']}{speed}"
