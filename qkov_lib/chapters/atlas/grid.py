"""The atlas's grid: its settings (initialisation, learning rate, score scaling), each trained as Figure 2's panels for
every multiplier set, and Figure 2's claims checked in each setting."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

import numpy as np
import pandas as pd

from ...core.device import pick_device
from ...core.workers import one_thread
from ...runs import fig2_panels
from ...runs.synthetic_runs import Panel, SyntheticSetup, SyntheticTask, synthetic_data, train_runs
from .setup import Setup, values

SETTING = ["init", "init_scale", "lr", "scaled_scores"]  # the grid's axes; with mult_set, a verdict's key
METRICS = ["ACMC", "top_right_cell", "top_left", "accuracy"]
RUN = "run"  # the column naming an ablation run (absent from the grid's rows)


def settings(setup: Setup) -> list[dict[str, Any]]:
    """Every setting of the grid: each [init kind, scale] x learning rate x score scaling (False: 1, True: 1/sqrt d)."""
    return [
        {"init": kind, "init_scale": float(scale), "lr": float(lr), "scaled_scores": bool(scaled)}
        for kind, scale in setup.inits
        for lr in setup.lrs
        for scaled in setup.scaled_scores
    ]


def setting(cell: Mapping[str, Any], common: Mapping[str, Any]) -> SyntheticSetup:
    """A grid cell's synthetic setup: the shared task and training, the cell's initialisation, rate and scaling."""
    task = SyntheticTask(**{f.name: common[f.name] for f in fields(SyntheticTask) if f.init})
    score_scale = 1 / np.sqrt(task.vocab) if cell["scaled_scores"] else 1.0
    return SyntheticSetup(
        **values(task), init=cell["init"], init_scale=cell["init_scale"], lr=cell["lr"], score_scale=score_scale
    )


def panels(setup: SyntheticSetup, mult_sets: Sequence[Sequence[float]]) -> list[tuple[int, Panel]]:
    """Panels a-d once (multiplier set -1) and e-h for each multiplier set [mult_e, ramp_f, mult_g, ramp_h], under
    ``setup``'s rate, ramp and step cap."""
    runs = [(-1, panel) for panel in _fig2(setup, mult_sets[0])[:4]]
    for j, mults in enumerate(mult_sets):
        runs += [(j, panel) for panel in _fig2(setup, mults)[4:]]
    return runs


def _fig2(setup: SyntheticSetup, mults: Sequence[float]) -> list[Panel]:
    """Figure 2's eight panels under one multiplier set [mult_e, ramp_f, mult_g, ramp_h]."""
    mult_e, ramp_f, mult_g, ramp_h = mults
    return fig2_panels.panels(setup, mult_e, ramp_f, mult_g, ramp_h)


def train_setting(cell: Mapping[str, Any], common: Mapping[str, Any]) -> pd.DataFrame:
    """A grid setting trained here on one thread: every panel and seed, one row per panel and seed with the setting,
    the multiplier set, Figure 2's metrics, steps and whether the step cap stopped it."""
    setup = setting(cell, common)
    runs = panels(setup, common["mult_sets"])
    rows = train(setup, [panel for _, panel in runs])
    rows.insert(0, "mult_set", [j for j, _ in runs for _ in setup.seeds])
    for k in reversed(SETTING):
        rows.insert(0, k, cell[k])
    return rows


def train(setup: SyntheticSetup, runs: Sequence[Panel]) -> pd.DataFrame:
    """Every (panel, seed) of ``runs`` trained on one thread and evaluated: one row per panel and seed, in order."""
    with one_thread():
        data = synthetic_data(setup.data, setup.seeds, setup.n_train, setup.n_test)
        results = train_runs(runs, setup, data, pick_device(), progress=False, workers=1)
    return pd.DataFrame(
        [
            {
                "panel": r.panel.key,
                "parameterisation": r.panel.parameterisation,
                "qk_mult": r.panel.rates.qk_mult,
                "qk_schedule": r.panel.rates.qk_schedule,
                "seed": s["seed"],
                **{m: s[m] for m in METRICS},
                "MRTA": s["MRTA"],
                "steps": s["steps"],
                "hit_cap": s["hit_cap"],
            }
            for r in results
            for _, s in r.summary.iterrows()
        ]
    )


def rows_of(rows: pd.DataFrame) -> pd.DataFrame:
    """The grid's rows of a sweep's rows (the ablation's left out), with their columns' own types."""
    if RUN not in rows:
        return rows
    out = rows[rows[RUN].isna()].drop(columns=RUN).dropna(axis=1, how="all")
    key = [*SETTING, "mult_set"]
    out = out[key + [c for c in out.columns if c not in key]]  # the grid's own column order
    return out.astype({"scaled_scores": bool, "mult_set": int}).reset_index(drop=True)
