"""Where Figure 2's claims hold: the Figure 2 panels retrained over a grid of settings the paper does not state.

A grid cell is a *setting*: the initialisation (kind and scale), the learning rate and the score scaling (1, or
1/sqrt(d) as in the authors' notebooks). In each setting the four parameterisations (a-d) and, for every set of QK
multipliers, the four faster-QK panels (e-h) train for every seed, one task of ``sweep.run_sweep``; Figure 2's own
claim checks (``claims.figure2``) then give a verdict per setting and multiplier set.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from . import claims
from .data.synthetic import synthetic_config
from .device import pick_device
from .engine import one_thread
from .experiments import Panel, SyntheticSetup, figure2_panels, synthetic_data, train_runs
from .metrics.stats import mean_ci

SETTING = ["init", "init_scale", "lr", "scaled_scores"]  # the grid's axes; with mult_set, a verdict's key
CLAIM_IDS = ("collapsed_ov_top_right", "fafo_top_left", "faster_qk_top_right", "prediction_kept")  # claims.figure2
METRICS = ["ACMC", "top_right_cell", "top_left", "accuracy"]
PER_SETTING = ("inits", "lrs", "scaled_scores")  # the parameters a setting takes its values from
RUN_ONLY = ("scheduler", "workers")  # where the sweep runs, which changes no number


def shared(p: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters every setting shares (the sweep's ``common``; they name its folder of finished cells)."""
    return {k: v for k, v in p.items() if k not in PER_SETTING + RUN_ONLY}


def grid(p: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every setting of the grid: each [init kind, scale] x learning rate x score scaling (False: 1, True: 1/sqrt d)."""
    return [{"init": kind, "init_scale": float(scale), "lr": float(lr), "scaled_scores": bool(scaled)}
            for kind, scale in p["inits"] for lr in p["lrs"] for scaled in p["scaled_scores"]]


def panels(mult_sets: Sequence[Sequence[float]]) -> list[tuple[int, Panel]]:
    """Panels a-d once (multiplier set -1) and e-h for each multiplier set [mult_e, ramp_f, mult_g, ramp_h]."""
    runs = [(-1, panel) for panel in figure2_panels(*mult_sets[0])[:4]]
    for j, mults in enumerate(mult_sets):
        runs += [(j, panel) for panel in figure2_panels(*mults)[4:]]
    return runs


def run_setting(cell: Mapping[str, Any], common: Mapping[str, Any]) -> pd.DataFrame:
    """One sweep task: every panel and seed of one setting, trained here on one thread; one row per panel and seed
    (the setting, the multiplier set, Figure 2's metrics, steps and whether the step cap stopped it)."""
    p = dict(common) | dict(cell)
    p["score_scale"] = 1 / np.sqrt(synthetic_config(p).vocab) if cell["scaled_scores"] else 1.0
    setup = SyntheticSetup.of(p)
    runs = panels(p["mult_sets"])
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
    """Figure 2's four claims checked in every setting and multiplier set, on seed means (as the chapter does)."""
    out = []
    base = rows[rows["mult_set"] < 0]
    for key, faster in rows[rows["mult_set"] >= 0].groupby(SETTING + ["mult_set"], sort=False):
        setting, j = dict(zip(SETTING, key[:-1])), key[-1]
        panels_here = pd.concat([base[(base[SETTING] == pd.Series(setting)).all(axis=1)], faster])
        table = claims.figure2(panels_here.groupby("panel")[["ACMC", "top_left", "accuracy"]].mean())
        if tuple(table["id"]) != CLAIM_IDS:
            raise RuntimeError("claims.figure2 changed its claims; update atlas.CLAIM_IDS")
        capped = int(panels_here["hit_cap"].sum())
        out += [{**setting, "mult_set": j, "claim_id": row["id"], "claim": row["claim"],
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
    return pd.concat(parts).pivot(index=["axis", "value"], columns="claim_id", values="holds")[list(CLAIM_IDS)]


def share_by_claim(table: pd.DataFrame) -> dict[str, str]:
    """'k of n settings' per claim id, for the scorecard."""
    share = where_claims_hold(table)
    return {r.claim_id: f"{r['holds in']} of {r.settings} settings" for _, r in share.iterrows()}
