"""Where Figure 2's claims hold: the Figure 2 panels retrained over a grid of settings the paper does not state.

A grid cell is a *setting*: the initialisation (kind and scale), the learning rate and the score scaling (1, or
1/sqrt(d) as in the authors' notebooks). In each setting the four parameterisations (a-d) and, for every set of QK
multipliers, the four faster-QK panels (e-h) train for every seed, one task of ``sweep.run_sweep``; Figure 2's own
claim checks (``fig2_dtap.claims``) then give a verdict per setting and multiplier set.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..device import pick_device
from ..metrics.stats import mean_ci
from ..models.attention import INITS
from ..synthetic_runs import Panel, SyntheticSetup, SyntheticTask, synthetic_data, train_runs
from ..validation import is_positive_int
from ..workers import one_thread
from . import fig2_dtap

SETTING = ["init", "init_scale", "lr", "scaled_scores"]  # the grid's axes; with mult_set, a verdict's key
METRICS = ["ACMC", "top_right_cell", "top_left", "accuracy"]
PER_SETTING = ("inits", "lrs", "scaled_scores")  # the parameters a setting takes its values from
RUN_ONLY = ("scheduler", "workers")  # where the sweep runs, which changes no number
VERDICTS = "verdicts"  # the table of verdicts per setting, which the scorecard reads


@dataclass(frozen=True, kw_only=True)
class Setup(SyntheticTask):
    """Figure 2's task and training (``SyntheticTask``), and the grid: [init kind, scale] pairs, learning rates,
    score scalings and multiplier sets [mult_e, ramp_f, mult_g, ramp_h]; where the sweep runs (a Dask scheduler's
    address, ``"serial"``, or None: a local cluster of ``workers`` processes, one per core when None). The paper
    states one setting, partly unstated: the grid around it is this companion's."""

    inits: tuple[tuple[str, float], ...] = (("identity", 1e-6), ("balanced", 0.01), ("balanced", 0.1),
                                            ("balanced", 1.0), ("pytorch", 1.0))  # the authors' and around it
    lrs: tuple[float, ...] = (0.01, 0.1, 1.0)  # SGD's rate: the authors' 0.01 and larger
    scaled_scores: tuple[bool, ...] = (False, True)  # no score scaling (eq. 1), or the authors' 1/sqrt(d)
    mult_sets: tuple[tuple[float, float, float, float], ...] = (
        (10.0, 20.0, 5.0, 10.0), (20.0, 40.0, 5.0, 10.0))  # the paper's multipliers (Figure 2), the code's
    scheduler: str | None = None  # a Dask scheduler's address, "serial", or None: a local cluster
    workers: int | None = None  # the local cluster's processes (None: one per core)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in PER_SETTING + ("mult_sets",):
            if not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty list (got {list(getattr(self, name))!r})")
        if self.scheduler == "":
            raise ValueError("scheduler must be None, 'serial' or a scheduler address (got '')")
        if not (self.workers is None or is_positive_int(self.workers)):
            raise ValueError(f"workers must be None (one per core) or an integer >= 1 (got {self.workers!r})")
        for kind, _ in self.inits:
            if kind not in INITS:
                raise ValueError(f"each of inits must be [kind, scale], kind one of {', '.join(INITS)} (got {kind!r})")
        common = shared(self)
        for cell in grid(self):  # every setting and multiplier set a valid Figure 2 setup
            base = setting(cell, common).shared()
            for mults in self.mult_sets:
                fig2_dtap.Setup(**_values(base), **dict(zip(fig2_dtap.MULTIPLIERS, mults)))


PROFILES = {
    "default": dict(inits=(("identity", 1e-6), ("balanced", 0.1), ("pytorch", 1.0)), lrs=(0.1, 1.0),
                    mult_sets=((10.0, 20.0, 5.0, 10.0),), max_steps=60_000, ramp_steps=20_000),
    "smoke": dict(seeds=(0, 1), n_train=320, n_test=320, inits=(("identity", 1e-6), ("balanced", 0.1)), lrs=(1.0,),
                  scaled_scores=(False,), mult_sets=((10.0, 20.0, 5.0, 10.0),), max_steps=200, eval_every=20,
                  ramp_steps=100, scheduler="serial"),
}


def _values(setup: Any) -> dict[str, Any]:
    return {f.name: getattr(setup, f.name) for f in fields(setup) if f.init}


def shared(setup: Setup) -> dict[str, Any]:
    """What every setting shares (the sweep's ``common``; with the code, it names the folder of finished cells)."""
    return {k: v for k, v in _values(setup).items() if k not in PER_SETTING + RUN_ONLY}


def grid(setup: Setup) -> list[dict[str, Any]]:
    """Every setting of the grid: each [init kind, scale] x learning rate x score scaling (False: 1, True: 1/sqrt d)."""
    return [{"init": kind, "init_scale": float(scale), "lr": float(lr), "scaled_scores": bool(scaled)}
            for kind, scale in setup.inits for lr in setup.lrs for scaled in setup.scaled_scores]


def setting(cell: Mapping[str, Any], common: Mapping[str, Any]) -> SyntheticSetup:
    """A grid cell's synthetic setup: the shared task and training, the cell's initialisation, rate and scaling."""
    task = SyntheticTask(**{f.name: common[f.name] for f in fields(SyntheticTask) if f.init})
    score_scale = 1 / np.sqrt(task.vocab) if cell["scaled_scores"] else 1.0
    return SyntheticSetup(**_values(task), init=cell["init"], init_scale=cell["init_scale"], lr=cell["lr"],
                          score_scale=score_scale)


def panels(mult_sets: Sequence[Sequence[float]]) -> list[tuple[int, Panel]]:
    """Panels a-d once (multiplier set -1) and e-h for each multiplier set [mult_e, ramp_f, mult_g, ramp_h]."""
    runs = [(-1, panel) for panel in fig2_dtap.panels(*mult_sets[0])[:4]]
    for j, mults in enumerate(mult_sets):
        runs += [(j, panel) for panel in fig2_dtap.panels(*mults)[4:]]
    return runs


def run_setting(cell: Mapping[str, Any], common: Mapping[str, Any]) -> pd.DataFrame:
    """One sweep task: every panel and seed of one setting, trained here on one thread; one row per panel and seed
    (the setting, the multiplier set, Figure 2's metrics, steps and whether the step cap stopped it)."""
    setup = setting(cell, common)
    runs = panels(common["mult_sets"])
    with one_thread():
        data = synthetic_data(setup.data, setup.seeds, setup.n_train, setup.n_test)
        results = train_runs([(panel, setup.run) for _, panel in runs], setup, data, pick_device(), progress=False,
                             workers=1)
    rows = []
    for (j, panel), result in zip(runs, results):
        s = result.summary
        rows.append(pd.DataFrame({**{k: cell[k] for k in SETTING}, "mult_set": j, "panel": panel.key,
                                  "parameterisation": panel.parameterisation, "qk_mult": panel.qk_mult,
                                  "qk_schedule": panel.qk_schedule, "seed": s["seed"],
                                  **{m: s[m] for m in METRICS}, "MRTA": s["MRTA"], "steps": s["steps"],
                                  "hit_cap": s["hit_cap"]}))
    return pd.concat(rows, ignore_index=True)


def verdicts(rows: pd.DataFrame) -> pd.DataFrame:
    """Figure 2's claims checked in every setting and multiplier set, on seed means (as the chapter does)."""
    out = []
    base = rows[rows["mult_set"] < 0]
    for key, faster in rows[rows["mult_set"] >= 0].groupby(SETTING + ["mult_set"], sort=False):
        setting_values, j = dict(zip(SETTING, key[:-1])), key[-1]
        panels_here = pd.concat([base[(base[SETTING] == pd.Series(setting_values)).all(axis=1)], faster])
        table = fig2_dtap.claims(panels_here.groupby("panel")[["ACMC", "top_left", "accuracy"]].mean())
        capped = int(panels_here["hit_cap"].sum())
        out += [{**setting_values, "mult_set": j, "claim_id": row["id"], "claim": row["claim"],
                 "this run": row["this run"], "holds": bool(row["reproduced"]), "capped models": capped}
                for _, row in table.iterrows()]
    return pd.DataFrame(out)


def where_claims_hold(table: pd.DataFrame) -> pd.DataFrame:
    """Per claim: in how many settings (and multiplier sets) it holds, of how many."""
    g = table.groupby(["claim_id", "claim"], sort=False)["holds"]
    return pd.DataFrame({"holds in": g.sum().astype(int), "settings": g.size(),
                         "share %": (100 * g.mean()).round(1)}).reset_index()


def panel_table(rows: pd.DataFrame, columns: Sequence[str] = ("ACMC", "top_right_cell", "MRTA")) -> pd.DataFrame:
    """Seed means with 95% confidence half-widths ('mean ± hw') per setting, multiplier set and panel."""
    def fmt(values: pd.Series) -> str:
        mean, half = mean_ci(values.to_numpy())
        return f"{mean:.1f}" if np.isnan(half) else f"{mean:.1f} ± {half:.1f}"
    keys = SETTING + ["mult_set", "panel"]
    return rows.groupby(keys, sort=False)[list(columns)].agg(fmt).reset_index()


def by_axis(table: pd.DataFrame) -> pd.DataFrame:
    """Per claim and per value of each grid axis: in how many of the settings with that value the claim holds, as
    'k/n' (a claim that holds for every setting with one value and no setting with another hinges on that axis)."""
    t = table.assign(init=table["init"] + " " + table["init_scale"].map("{:g}".format),
                     scores=np.where(table["scaled_scores"], "1/sqrt(d)", "1"), lr=table["lr"].map("{:g}".format))
    parts = []
    for axis in ("init", "lr", "scores"):
        g = t.groupby(["claim_id", axis], sort=False)["holds"]
        held, size = g.sum(), g.size()
        parts.append(pd.DataFrame({"axis": axis, "value": [k[1] for k in held.index],
                                   "claim_id": [k[0] for k in held.index],
                                   "holds": [f"{int(h)}/{size[k]}" for k, h in held.items()]}))
    ids = list(dict.fromkeys(table["claim_id"]))  # the claims in Figure 2's order
    return pd.concat(parts).pivot(index=["axis", "value"], columns="claim_id", values="holds")[ids]


def share_by_claim(table: pd.DataFrame) -> dict[str, str]:
    """'k of n settings' per claim id, for the scorecard."""
    share = where_claims_hold(table)
    return {r.claim_id: f"{r['holds in']} of {r.settings} settings" for _, r in share.iterrows()}


def figure(table: pd.DataFrame, claims: Sequence[tuple[str, str]], title: str) -> go.Figure:
    """One panel per claim (id, short title), a cell per setting (rows: initialisation; columns: learning rate and
    score scaling), green where the claim holds and red where it fails. ``table`` has init, init_scale, lr,
    scaled_scores, claim_id and holds (one multiplier set)."""
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
