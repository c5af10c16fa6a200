"""Where Figure 2's claims hold (Section 4): the Figure 2 panels retrained over a grid of settings the paper does not
state, and an ablation from the paper's text to the authors' code, one factor at a time.

A grid cell is a *setting*: the initialisation (kind and scale), the learning rate and the score scaling (1, or
1/sqrt(d) as in the authors' notebooks). In each setting the four parameterisations (a-d) and, for every set of QK
multipliers, the four faster-QK panels (e-h) train for every seed, one task of ``sweep.run_sweep``; Figure 2's own
claim checks (``fig2_dtap.claims``) then give a verdict per setting and multiplier set.

The ablation runs Figure 2 from the paper's text (``fig2_dtap.Setup()``) towards the authors' code
(``fig2_dtap.PROFILES["official"]``), whose keys fall into nine factors (``FACTORS``): from the paper's settings each
factor switched on alone, from the authors' settings each switched off alone, and the two end points, every run one
task of the same sweep. Its budget is time-rescaled: the learning rate times ``ablation_speedup`` and every step count
divided by it, so that rate x steps, the time of gradient flow, stays the paper's and the authors'.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..core.device import pick_device
from ..core.validation import is_positive_int
from ..core.workers import one_thread
from ..metrics.stats import mean_ci
from ..metrics.verdicts import COLOURS, FAILS, HOLDS, UNDECIDED
from ..models.attention import INITS
from ..present.tables import listed
from ..present.text import power
from ..runs.sweep import SweepRun, cell_folder, run_sweep
from ..runs.synthetic_runs import Panel, SyntheticSetup, SyntheticTask, synthetic_data, train_runs
from . import fig2_dtap

SETTING = ["init", "init_scale", "lr", "scaled_scores"]  # the grid's axes; with mult_set, a verdict's key
METRICS = ["ACMC", "top_right_cell", "top_left", "accuracy"]
PER_SETTING = ("inits", "lrs", "scaled_scores")  # the parameters a setting takes its values from
ABLATION = ("ablation_factors", "ablation_speedup", "ablation_cap")  # the ablation's own: each run's cell holds them
RUN_ONLY = ("scheduler", "workers")  # where the sweep runs, which changes no number
VERDICTS = "verdicts"  # the table of verdicts per setting, which the scorecard reads
RUN = "run"  # the column naming an ablation run (absent from the grid's rows)
PAPER_LR = fig2_dtap.Setup().lr  # the paper's and the authors' SGD rate, 0.01, which the ablation's speedup scales

# Figure 2's claims (fig2_dtap.claims ids) in a few words, for the headers of the figures and tables.
SHORT = {"collapsed_ov_top_right": "collapsed OV top-right", "fafo_top_left": "FAFO top-left",
         "faster_qk_top_right": "faster QK top-right", "prediction_kept": "prediction kept"}
SYMBOL = {HOLDS: "✓", FAILS: "✗", UNDECIDED: "?"}  # a verdict in a cell of a verdict map


@dataclass(frozen=True)
class Factor:
    """One factor of the ablation: a short name and the keys of fig2_dtap's official profile that it sets (switched
    off, each key keeps the paper's value, ``fig2_dtap.Setup``'s default); ``factor_text`` says what it does."""

    key: str
    name: str
    keys: tuple[str, ...]


# The official profile's keys, every one in exactly one factor (tests/unit/chapters/test_atlas.py checks it): one thing the
# authors' code does differently per factor, so that a flip can be attributed.
FACTORS = (
    Factor("layout", "token layout", ("layout", "vocab_size", "seq_len", "seq_len_gh")),
    Factor("weights", "distinct-token weights", ("distinct_weights",)),
    Factor("scaling", "score scaling", ("score_scale",)),
    Factor("fresh", "fresh batches", ("fresh_batches",)),
    Factor("classes", "random classes", ("class_draw",)),
    Factor("collapsed", "collapsed start", ("collapsed_init",)),
    Factor("init", "per-panel initialisation", ("pytorch_init",)),
    Factor("multipliers", "the code's multipliers", ("mult_e", "ramp_f")),
    Factor("budgets", "per-panel budgets and stop rule", ("panel_steps", "panel_stop", "max_steps", "eval_every")),
)
FACTOR_KEYS = tuple(f.key for f in FACTORS)
STEP_COUNTS = ("max_steps", "ramp_steps")  # with panel_steps' values: what the ablation's speedup divides


@dataclass(frozen=True, kw_only=True)
class Setup(SyntheticTask):
    """Figure 2's task and training (``SyntheticTask``), and the grid: [init kind, scale] pairs, learning rates,
    score scalings and multiplier sets [mult_e, ramp_f, mult_g, ramp_h]; the ablation's factors and budget; where the
    sweep runs (a Dask scheduler's address, ``"serial"``, or None: a local cluster of ``workers`` processes, one per
    core when None). The paper states one setting, partly unstated: the grid around it is this companion's."""

    inits: tuple[tuple[str, float], ...] = (("identity", 1e-6), ("balanced", 0.01), ("balanced", 0.1),
                                            ("balanced", 1.0), ("pytorch", 1.0))  # the authors' and around it
    lrs: tuple[float, ...] = (0.01, 0.1, 1.0)  # SGD's rate: the authors' 0.01 and larger
    scaled_scores: tuple[bool, ...] = (False, True)  # no score scaling (eq. 1), or the authors' 1/sqrt(d)
    mult_sets: tuple[tuple[float, float, float, float], ...] = (
        (10.0, 20.0, 5.0, 10.0), (20.0, 40.0, 5.0, 10.0))  # the paper's multipliers (Figure 2), the code's
    ablation_factors: tuple[str, ...] = FACTOR_KEYS  # the factors switched one at a time (all of FACTORS)
    ablation_speedup: int = 1  # the rate x this, step counts / this; 1: the paper's 0.01, the authors' budgets
    ablation_cap: int | None = None  # a cap on every ablation run's steps (None: the budgets alone, as the authors)
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
        self._check_ablation()
        for cell in ablation(self):  # every ablation run a valid Figure 2 setup
            ablation_setup(cell, common)

    def _check_ablation(self) -> None:
        """The ablation's parameters: known, distinct factors, a whole-number speedup, a positive cap or None."""
        unknown = [f for f in self.ablation_factors if f not in FACTOR_KEYS]
        if not self.ablation_factors or unknown or len(set(self.ablation_factors)) < len(self.ablation_factors):
            raise ValueError(f"ablation_factors must be a non-empty list of distinct factors from "
                             f"{', '.join(FACTOR_KEYS)} (got {list(self.ablation_factors)!r})")
        if not is_positive_int(self.ablation_speedup):
            raise ValueError(f"ablation_speedup must be an integer >= 1: the ablation's rate is {PAPER_LR:g} times "
                             f"it and its step counts are divided by it (got {self.ablation_speedup!r})")
        if not (self.ablation_cap is None or is_positive_int(self.ablation_cap)):
            raise ValueError(f"ablation_cap must be None (the budgets alone) or an integer >= 1 "
                             f"(got {self.ablation_cap!r})")


# A grid that fits a CPU: three starts, three rates, the paper's multipliers, 60,000 steps (ramps over 20,000).
CPU_GRID = dict(inits=(("identity", 1e-6), ("balanced", 0.1), ("pytorch", 1.0)), lrs=(0.01, 0.1, 1.0),
                mult_sets=((10.0, 20.0, 5.0, 10.0),), max_steps=60_000, ramp_steps=20_000)
PROFILES = {
    "default": dict(**CPU_GRID, ablation_speedup=10),
    # The ablation at the authors' rate 0.01 and their own budgets. The grid is this companion's, not theirs: under
    # official it is the default's (the paper's 60 settings at 700,000 steps would take days on a CPU).
    "official": dict(**CPU_GRID, ablation_speedup=1),
    "smoke": dict(seeds=(0, 1), n_train=320, n_test=320, inits=(("identity", 1e-6), ("balanced", 0.1)), lrs=(1.0,),
                  scaled_scores=(False,), mult_sets=((10.0, 20.0, 5.0, 10.0),), max_steps=200, eval_every=20,
                  ramp_steps=100, ablation_speedup=100, ablation_cap=100, scheduler="serial"),
}


def _values(setup: Any) -> dict[str, Any]:
    return {f.name: getattr(setup, f.name) for f in fields(setup) if f.init}


def shared(setup: Setup) -> dict[str, Any]:
    """What every setting shares (the sweep's ``common``; with the code, it names the folder of finished cells)."""
    return {k: v for k, v in _values(setup).items() if k not in PER_SETTING + ABLATION + RUN_ONLY}


def sweep_folders(setup: Setup) -> list[Path]:
    """Where the atlas keeps its finished sweep cells (the runner packs them with the chapter's results)."""
    return [cell_folder("atlas", shared(setup), run_setting)]


def run(setup: Setup, *, device: torch.device | None = None, progress: bool = True) -> SweepRun:
    """The atlas: every grid setting and ablation run not yet finished under this code and these shared settings,
    on the setup's scheduler (serial, a local cluster, or a Dask scheduler), then every cell's rows. ``device`` is
    unused: every cell trains on a CPU worker of one thread."""
    return run_sweep(run_setting, tasks(setup), shared(setup), sweep_folders(setup)[0], scheduler=setup.scheduler,
                     workers=setup.workers, progress=progress, desc="atlas")


def grid(setup: Setup) -> list[dict[str, Any]]:
    """Every setting of the grid: each [init kind, scale] x learning rate x score scaling (False: 1, True: 1/sqrt d)."""
    return [{"init": kind, "init_scale": float(scale), "lr": float(lr), "scaled_scores": bool(scaled)}
            for kind, scale in setup.inits for lr in setup.lrs for scaled in setup.scaled_scores]


def tasks(setup: Setup) -> list[dict[str, Any]]:
    """The sweep's tasks: the ablation's runs (the longest, so first) and the grid's settings."""
    return ablation(setup) + grid(setup)


def setting(cell: Mapping[str, Any], common: Mapping[str, Any]) -> SyntheticSetup:
    """A grid cell's synthetic setup: the shared task and training, the cell's initialisation, rate and scaling."""
    task = SyntheticTask(**{f.name: common[f.name] for f in fields(SyntheticTask) if f.init})
    score_scale = 1 / np.sqrt(task.vocab) if cell["scaled_scores"] else 1.0
    return SyntheticSetup(**_values(task), init=cell["init"], init_scale=cell["init_scale"], lr=cell["lr"],
                          score_scale=score_scale)


def panels(setup: SyntheticSetup, mult_sets: Sequence[Sequence[float]]) -> list[tuple[int, Panel]]:
    """Panels a-d once (multiplier set -1) and e-h for each multiplier set [mult_e, ramp_f, mult_g, ramp_h], under
    ``setup``'s rate, ramp and step cap."""
    runs = [(-1, panel) for panel in fig2_dtap.panels(setup, *mult_sets[0])[:4]]
    for j, mults in enumerate(mult_sets):
        runs += [(j, panel) for panel in fig2_dtap.panels(setup, *mults)[4:]]
    return runs


def run_setting(cell: Mapping[str, Any], common: Mapping[str, Any]) -> pd.DataFrame:
    """One sweep task, trained here on one thread: a grid setting (every panel and seed; one row per panel and seed
    with the setting, the multiplier set, Figure 2's metrics, steps and whether the step cap stopped it) or, for a
    cell that names an ablation run, that run (``run_ablation``)."""
    if RUN in cell:
        return run_ablation(cell, common)
    setup = setting(cell, common)
    runs = panels(setup, common["mult_sets"])
    rows = _train(setup, [panel for _, panel in runs])
    rows.insert(0, "mult_set", [j for j, _ in runs for _ in setup.seeds])
    for k in reversed(SETTING):
        rows.insert(0, k, cell[k])
    return rows


def _train(setup: SyntheticSetup, runs: Sequence[Panel]) -> pd.DataFrame:
    """Every (panel, seed) of ``runs`` trained on one thread and evaluated: one row per panel and seed, in order."""
    with one_thread():
        data = synthetic_data(setup.data, setup.seeds, setup.n_train, setup.n_test)
        results = train_runs(runs, setup, data, pick_device(), progress=False, workers=1)
    return pd.DataFrame([{"panel": r.panel.key, "parameterisation": r.panel.parameterisation,
                          "qk_mult": r.panel.rates.qk_mult, "qk_schedule": r.panel.rates.qk_schedule,
                          "seed": s["seed"],
                          **{m: s[m] for m in METRICS}, "MRTA": s["MRTA"], "steps": s["steps"],
                          "hit_cap": s["hit_cap"]}
                         for r in results for _, s in r.summary.iterrows()])


def verdicts(rows: pd.DataFrame) -> pd.DataFrame:
    """Figure 2's claims checked in every setting and multiplier set, on the per-seed rows (as the chapter does);
    rows of ablation runs are left out."""
    rows = grid_rows(rows)
    out = []
    base = rows[rows["mult_set"] < 0]
    for key, faster in rows[rows["mult_set"] >= 0].groupby(SETTING + ["mult_set"], sort=False):
        setting_values, j = dict(zip(SETTING, key[:-1])), key[-1]
        panels_here = pd.concat([base[(base[SETTING] == pd.Series(setting_values)).all(axis=1)], faster])
        out += _claim_rows(panels_here, {**setting_values, "mult_set": j})
    return pd.DataFrame(out)


def _claim_rows(panels_here: pd.DataFrame, key: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Figure 2's claims on one run's per-seed rows, one row per claim led by ``key``, with its capped models."""
    table = fig2_dtap.claims(panels_here)
    capped = int(panels_here["hit_cap"].sum())
    return [{**key, "claim_id": row["id"], "claim": row["claim"], "this run": row["this run"],
             "verdict": row["verdict"], "capped models": capped, "models": len(panels_here)}
            for _, row in table.iterrows()]


def grid_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The grid's rows of a sweep's rows (the ablation's left out), with their columns' own types."""
    if RUN not in rows:
        return rows
    out = rows[rows[RUN].isna()].drop(columns=RUN).dropna(axis=1, how="all")
    key = SETTING + ["mult_set"]
    out = out[key + [c for c in out.columns if c not in key]]  # the grid's own column order
    return out.astype({"scaled_scores": bool, "mult_set": int}).reset_index(drop=True)


def ablation_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The ablation's rows of a sweep's rows (the grid's left out)."""
    if RUN not in rows:
        return rows.iloc[:0]
    return rows[rows[RUN].notna()].drop(columns=SETTING + ["mult_set"]).reset_index(drop=True)


def where_claims_hold(table: pd.DataFrame) -> pd.DataFrame:
    """Per claim: in how many settings (and multiplier sets) it holds, fails and is undecided, of how many."""
    out = table.groupby(["claim_id", "claim"], sort=False)["verdict"].value_counts().unstack(fill_value=0)
    out = out.reindex(columns=[HOLDS, FAILS, UNDECIDED], fill_value=0).astype(int)
    out["settings"] = out.sum(axis=1)
    out["holds %"] = (100 * out[HOLDS] / out["settings"]).round(1)
    return out.reset_index()


def share_by_claim(table: pd.DataFrame) -> dict[str, str]:
    """'holds in k of n settings (fails in f, undecided in u)' per claim id, for the scorecard and the summary."""
    share = where_claims_hold(table)
    return {r.claim_id: f"holds in {r[HOLDS]} of {r.settings} settings (fails in {r[FAILS]}, undecided in "
                        f"{r[UNDECIDED]})" for _, r in share.iterrows()}


# --- the ablation: from the paper's text to the authors' code, one factor at a time --------------------------------

@dataclass(frozen=True)
class AblationRun:
    """One run of the ablation: its key, the factors set as the authors' code sets them, the end point it starts
    from (``paper`` or ``authors``) and the factor it switches (None: the end point itself)."""

    key: str
    on: tuple[str, ...]
    start: str
    factor: str | None


def ablation_runs(factors: Sequence[str] = FACTOR_KEYS) -> list[AblationRun]:
    """The paper's settings, each of ``factors`` switched on alone from them, the authors' settings, and each of
    ``factors`` switched off alone from them (Section 4 as written against the authors' notebooks)."""
    unknown = [f for f in factors if f not in FACTOR_KEYS]
    if unknown:
        raise ValueError(f"unknown ablation factors {unknown}; the factors are {', '.join(FACTOR_KEYS)}")
    every = tuple(FACTOR_KEYS)
    return ([AblationRun("paper", (), "paper", None)]
            + [AblationRun(f"paper+{f}", (f,), "paper", f) for f in factors]
            + [AblationRun("authors", every, "authors", None)]
            + [AblationRun(f"authors-{f}", tuple(g for g in every if g != f), "authors", f) for f in factors])


def ablation(setup: Setup) -> list[dict[str, Any]]:
    """The ablation's sweep cells: each run's key, its factors on, and the budget (speedup, cap)."""
    return [{RUN: r.key, "on": list(r.on), "speedup": setup.ablation_speedup, "cap": setup.ablation_cap}
            for r in ablation_runs(setup.ablation_factors)]


def factor_changes(on: Sequence[str]) -> dict[str, Any]:
    """fig2_dtap's official values of the keys of the factors ``on``; ValueError if that profile sets a key that no
    factor names (the ablation would silently leave it at the paper's value)."""
    official = fig2_dtap.PROFILES["official"]
    named = {k for f in FACTORS for k in f.keys}
    if set(official) - named:
        raise ValueError(f"fig2_dtap's official profile sets {sorted(set(official) - named)}, which no factor of "
                         f"the atlas's ablation names; add each to one of atlas.FACTORS")
    keys = {k for f in FACTORS if f.key in on for k in f.keys}
    return {k: v for k, v in official.items() if k in keys}


def ablation_setup(cell: Mapping[str, Any], common: Mapping[str, Any]) -> fig2_dtap.Setup:
    """An ablation run's Figure 2 setup: the atlas's task (seeds, sizes, batch, loss target, bins), the paper's
    values (``fig2_dtap.Setup``) with the authors' for the factors on, then the budget rescaled: the rate times the
    speedup, every step count (the step caps, the per-panel budgets, the QK ramps) divided by it and capped at the
    cell's cap. The authors' stop rule keeps its epochs (100-250 steps): how often it is checked, not a budget."""
    paper = _values(fig2_dtap.Setup())
    task = {f.name: common[f.name] for f in fields(SyntheticTask) if f.init and f.name not in STEP_COUNTS
            and f.name != "eval_every"}
    values = {**paper, **task, **{k: paper[k] for f in FACTORS for k in f.keys}, **factor_changes(cell["on"])}
    k, cap = cell["speedup"], cell["cap"] or math.inf
    values["lr"] = PAPER_LR * k
    for name in STEP_COUNTS:
        values[name] = int(max(1, min(values[name] // k, cap)))
    values["panel_steps"] = {p: int(max(1, min(v // k, cap))) for p, v in values["panel_steps"].items()}
    return fig2_dtap.Setup(**values)


def run_ablation(cell: Mapping[str, Any], common: Mapping[str, Any]) -> pd.DataFrame:
    """One ablation run, trained here on one thread: one row per panel and seed (the run's key, Figure 2's metrics,
    steps and whether the step cap stopped it)."""
    setup = ablation_setup(cell, common)
    rows = _train(setup, fig2_dtap.runs(setup))
    rows.insert(0, RUN, cell[RUN])
    return rows


def ablation_budget(setup: Setup) -> dict[str, Any]:
    """What the ablation trains with, for the page: the rate, each end point's step caps (panel -> steps) and QK
    ramp length, against the paper's and the authors' own (speedup 1, no cap)."""
    common = shared(setup)
    ends = {}
    for key, on in (("paper", ()), ("authors", FACTOR_KEYS)):
        s = ablation_setup({RUN: key, "on": list(on), "speedup": setup.ablation_speedup, "cap": setup.ablation_cap},
                           common)
        full = ablation_setup({RUN: key, "on": list(on), "speedup": 1, "cap": None}, common)
        ends[key] = {"caps": {p.key: p.max_steps for p in fig2_dtap.runs(s)},
                     "full caps": {p.key: p.max_steps for p in fig2_dtap.runs(full)},
                     "ramp": s.ramp_steps, "full ramp": full.ramp_steps}
    return {"lr": PAPER_LR * setup.ablation_speedup, "paper lr": PAPER_LR, "speedup": setup.ablation_speedup,
            "cap": setup.ablation_cap, **ends}


def ablation_verdicts(rows: pd.DataFrame, factors: Sequence[str] = FACTOR_KEYS) -> pd.DataFrame:
    """Figure 2's claims checked in every ablation run (``ablation_runs(factors)``, in that order): run, start,
    factor, claim_id, claim, this run, verdict, capped models."""
    out = []
    for r in ablation_runs(factors):
        here = rows[rows[RUN] == r.key]
        if here.empty:
            raise ValueError(f"the ablation's rows have no run {r.key!r}; rerun the chapter to train it")
        out += _claim_rows(here, {RUN: r.key, "start": r.start, "factor": r.factor})
    return pd.DataFrame(out)


def effect(before: str, after: str) -> str:
    """What switching a factor did to a verdict: 'flips' (holds <-> fails), 'no change', or 'unclear' (one side
    undecided)."""
    if before == after:
        return "no change"
    return "flips" if {before, after} == {HOLDS, FAILS} else "unclear"


def flips(table: pd.DataFrame) -> pd.DataFrame:
    """The factor x claim table: per factor and claim, the verdict without and with the factor from the paper's
    settings (switched on) and with and without it from the authors' settings (switched off), and what each switch
    did (``effect``). ``table`` is ``ablation_verdicts``' output."""
    verdict = table.set_index([RUN, "claim_id"])["verdict"]
    claims = list(dict.fromkeys(table["claim_id"]))
    out = []
    for factor in dict.fromkeys(table["factor"].dropna()):
        for cid in claims:
            p0, p1 = verdict[("paper", cid)], verdict[(f"paper+{factor}", cid)]
            a1, a0 = verdict[("authors", cid)], verdict[(f"authors-{factor}", cid)]
            out.append({"factor": factor, "claim_id": cid, "paper": p0, "paper + factor": p1,
                        "from the paper's": effect(p0, p1), "authors": a1, "authors - factor": a0,
                        "from the authors'": effect(a1, a0)})
    return pd.DataFrame(out)


def _factor(key: str) -> Factor:
    return next(f for f in FACTORS if f.key == key)


def clock(setup: Setup) -> str:
    """The rate and budget the ablation ran at, in a few words: 'rate 0.01, full budgets' or 'rate 0.1, step counts
    ÷10' (and the cap)."""
    k, cap = setup.ablation_speedup, setup.ablation_cap
    if k == 1 and cap is None:
        return f"rate {PAPER_LR:g}, full budgets"
    return f"rate {PAPER_LR * k:g}" + (f", step counts ÷{k}" if k > 1 else "") + (f", at most {cap:,} steps"
                                                                                  if cap else "")


def flip_table(table: pd.DataFrame, ran_at: str = "") -> pd.DataFrame:
    """``flips`` for reading, one row per factor and claim (in words, the index): each direction as 'before →
    after', and whether the factor flips the claim (from both ends, from one, or not); ``ran_at`` (``clock``) labels
    the two directions' columns with the profile and rate they ran at."""
    def both(r: pd.Series) -> str:
        paper, authors = r["from the paper's"] == "flips", r["from the authors'"] == "flips"
        return ("from both ends" if paper and authors else "from the paper's" if paper
                else "from the authors'" if authors else "no")

    f = flips(table)
    index = pd.MultiIndex.from_arrays([[_factor(k).name for k in f["factor"]],
                                       [SHORT.get(c, c) for c in f["claim_id"]]], names=["factor", "claim"])
    at = f" ({ran_at})" if ran_at else ""
    return pd.DataFrame({f"switched on in the paper's settings{at}":
                             (f["paper"] + " → " + f["paper + factor"]).to_numpy(),
                         f"switched off in the authors' settings{at}":
                             (f["authors"] + " → " + f["authors - factor"]).to_numpy(),
                         "flips it": f.apply(both, axis=1).to_numpy()}, index=index)


def reading(table: pd.DataFrame, ran_at: str = "") -> str:
    """The ablation in sentences, generated from ``ablation_verdicts``' output: per claim, its verdict at both end
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
            flipped = [_factor(k).name for k in part.loc[part[side] == "flips", "factor"]]
            if flipped:
                after = FAILS if before == HOLDS else HOLDS
                said.append(f"switching {switch} the authors' {listed(flipped, 'or')} alone flips it from {before} "
                            f"to {after}")
        unclear = [_factor(r["factor"]).name for _, r in part.iterrows()
                   if "unclear" in (r["from the paper's"], r["from the authors'"])]
        together = paper != authors and UNDECIDED not in (paper, authors)
        body = "; ".join(said) + "." if said else \
            "no single factor flips it" + (": it takes several together." if together else ".")
        if unclear:
            body += f" Undecided on one side of the switch: {listed(unclear)}."
        lines.append(f"- **{SHORT.get(cid, cid)}** {paper} in the paper's settings and {authors} in the authors'. "
                     f"{body[0].upper()}{body[1:]}")
    return "\n".join(lines)


def decided(table: pd.DataFrame) -> dict[str, int]:
    """How many of a verdict table's verdicts are decided (holds or fails), undecided, and in all."""
    words = table["verdict"]
    return {"decided": int(words.isin([HOLDS, FAILS]).sum()), "undecided": int((words == UNDECIDED).sum()),
            "verdicts": len(words)}


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
        "collapsed": f"a collapsed matrix starting as its two factors' product ({paper.init_scale ** 2:g}·I), so all "
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
    return "\n".join(f"- **{_factor(k).name}**: {factor_text(k)};" for k in factors).removesuffix(";") + "."


def budget_text(setup: Setup) -> str:
    """The ablation's budget in a sentence, against the paper's and the authors' own (``ablation_budget``)."""
    b = ablation_budget(setup)
    if b["speedup"] == 1 and b["cap"] is None:
        return f"Every run trains at the paper's rate {b['paper lr']:g} with the full budgets."
    paper, authors = b["paper"], b["authors"]
    how = (f"Each run trains at the rate {b['lr']:g} instead of {b['paper lr']:g}, with every step count divided by "
           f"{b['speedup']}")
    how += (", so that rate × steps, the time of gradient flow, stays the paper's and the authors'" if b["cap"] is None
            else f" and at most {b['cap']:,} (a quick check: rate × steps, the time of gradient flow, is then shorter "
                 f"than the paper's and the authors')")
    return (f"{how}: the paper's step cap of {_span(paper['full caps'].values())} becomes "
            f"{_span(paper['caps'].values())}, the authors' per-panel budgets of "
            f"{_span(authors['full caps'].values())} steps become {_span(authors['caps'].values())}, and the QK "
            f"ramps take {paper['ramp']:,} steps instead of {paper['full ramp']:,}.")


def _span(values: Any) -> str:
    """'10,000 to 100,000', or '100' where every value is the same."""
    lo, hi = min(values), max(values)
    return f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"


def decided_text(table: pd.DataFrame) -> str:
    """How many of the ablation's verdicts this budget decides, and how many of its models its step caps stopped."""
    d = decided(table)
    runs = table.drop_duplicates(RUN)
    return (f"At this budget {d['decided']} of the ablation's {d['verdicts']} verdicts are decided (the claim holds "
            f"or fails) and {d['undecided']} undecided; {int(runs['capped models'].sum()):,} of its "
            f"{int(runs['models'].sum()):,} models stopped at their step cap or trained their whole budget.")


# --- display: labels in words, verdict maps, tables --------------------------------------------------------------

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
    start, factor = (key.split("+") if "+" in key else key.split("-", 1))
    return ("+ " if start == "paper" else "− ") + _factor(factor).name


START = {"paper": "the paper's settings", "authors": "the authors' settings"}


def verdict_map(words: pd.DataFrame, groups: Sequence[str], extra: Sequence[str] | None = None,
                extra_name: str = "") -> go.Figure:
    """A map of verdicts: one row per run (``words``' index), the rows of each group (``groups``, one per row) in a
    panel titled by it, one column per claim (``words``' columns), each cell the verdict's symbol on its colour;
    ``extra`` (text per row) a last, grey column, e.g. the models stopped at the step cap."""
    names = list(dict.fromkeys(groups))
    sizes = [list(groups).count(g) for g in names]
    fig = make_subplots(rows=len(names), cols=1, shared_xaxes=True, row_heights=sizes,
                        vertical_spacing=min(0.3, 50 / (30 * len(words) + 50 * len(names))))
    columns = [_wrap(c) for c in words.columns] + ([_wrap(extra_name)] if extra is not None else [])
    levels = {FAILS: 0.0, UNDECIDED: 1 / 3, HOLDS: 2 / 3}
    scale = [[0, COLOURS[FAILS]], [1 / 6, COLOURS[FAILS]], [1 / 6, COLOURS[UNDECIDED]], [1 / 2, COLOURS[UNDECIDED]],
             [1 / 2, COLOURS[HOLDS]], [5 / 6, COLOURS[HOLDS]], [5 / 6, "#eaeef2"], [1, "#eaeef2"]]
    groups = np.asarray(groups)
    for i, name in enumerate(names):
        part = words[groups == name]
        z = part.replace(levels).to_numpy(dtype=float)
        text = part.replace(SYMBOL).to_numpy(dtype=object)
        hover = part.to_numpy(dtype=object)
        if extra is not None:
            here = np.asarray(extra, dtype=object)[groups == name][:, None]
            z, text, hover = np.hstack([z, np.ones_like(z[:, :1])]), np.hstack([text, here]), np.hstack([hover, here])
        fig.add_trace(go.Heatmap(z=z, x=columns, y=list(part.index), zmin=0, zmax=1, showscale=False, xgap=3, ygap=3,
                                 colorscale=scale, text=text, texttemplate="%{text}", textfont=dict(size=14),
                                 customdata=hover, hovertemplate="%{y}<br>%{x}: %{customdata}<extra></extra>"),
                      row=i + 1, col=1)
        top = fig.get_subplot(i + 1, 1).yaxis.domain[1]  # the group's name over its rows' labels
        fig.add_annotation(text=f"<b>{name}</b>", x=0, xref="paper", xanchor="right", y=top, yref="paper",
                           yanchor="bottom", showarrow=False)
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
    return "<br>".join(lines + [line])


def grid_figure(table: pd.DataFrame, rows: pd.DataFrame, mult_sets: Sequence[Sequence[float]]) -> go.Figure:
    """Figure 2's claims per setting of the grid (``table``: ``verdicts``' output): rows grouped by initialisation,
    one column per claim (the faster-QK claims once per multiplier set when there are several), and the models of
    each setting (``rows``: the sweep's) stopped at the step cap."""
    t = table.assign(group=[init_label(k, s) for k, s in zip(table["init"], table["init_scale"])],
                     rate=[rate_label(lr, bool(s)) for lr, s in zip(table["lr"], table["scaled_scores"])])
    faster = {"faster_qk_top_right", "prediction_kept"}
    several = len(mult_sets) > 1
    t["column"] = [SHORT.get(c, c) + (f" ({multipliers_label(mult_sets[int(j)])})" if several and c in faster
                                      else "") for c, j in zip(t["claim_id"], t["mult_set"])]
    t = t[~t.duplicated(["group", "rate", "column"])]  # a-d's claims are the same in every multiplier set
    order = list(dict.fromkeys(zip(t["group"], t["rate"])))
    words = t.pivot(index=["group", "rate"], columns="column", values="verdict")
    words = words.reindex(index=pd.MultiIndex.from_tuples(order), columns=list(dict.fromkeys(t["column"])))
    g = grid_rows(rows).groupby(SETTING, sort=False)["hit_cap"]
    capped = {(init_label(k, s), rate_label(lr, bool(sc))): f"{int(n)}/{size}"
              for ((k, s, lr, sc), n), size in zip(g.sum().items(), g.size())}
    return verdict_map(words.set_axis([r for _, r in order]), [grp for grp, _ in order], [capped[r] for r in order],
                       "at the step cap")


def ablation_figure(table: pd.DataFrame) -> go.Figure:
    """Figure 2's claims in every ablation run: the paper's settings and each factor switched on, the authors'
    settings and each switched off; one column per claim and the models stopped at the step cap."""
    keys = list(dict.fromkeys(table[RUN]))
    words = table.pivot(index=RUN, columns="claim_id", values="verdict").reindex(
        index=keys, columns=list(dict.fromkeys(table["claim_id"])))
    words.columns = [SHORT.get(c, c) for c in words.columns]
    first = table.drop_duplicates(RUN).set_index(RUN)
    extra = [f"{first.loc[k, 'capped models']}/{first.loc[k, 'models']}" for k in keys]
    return verdict_map(words.set_axis([run_label(k) for k in keys]), [START[first.loc[k, 'start']] for k in keys],
                       extra, "at the step cap")


def share_table(table: pd.DataFrame) -> pd.DataFrame:
    """``where_claims_hold`` for reading: per claim (its short name, the index), the settings where it holds, fails
    and is undecided, of how many."""
    share = where_claims_hold(table)
    return pd.DataFrame({"holds": share[HOLDS].to_numpy(), "fails": share[FAILS].to_numpy(),
                         "undecided": share[UNDECIDED].to_numpy(), "of settings": share["settings"].to_numpy()},
                        index=pd.Index([SHORT.get(c, c) for c in share["claim_id"]], name="claim"))


def by_axis(table: pd.DataFrame) -> pd.DataFrame:
    """Per value of each grid axis (rows, in words) and claim (columns, short names): in how many of the settings
    with that value the claim holds, 'k of n' (a claim that holds for every setting with one value and no setting
    with another hinges on that axis)."""
    t = table.assign(initialisation=[init_label(k, s) for k, s in zip(table["init"], table["init_scale"])],
                     **{"learning rate": table["lr"].map("{:g}".format),
                        "score scaling": np.where(table["scaled_scores"], "×1/√d", "none")},
                     holds=table["verdict"] == HOLDS)
    parts = []
    for axis in ("initialisation", "learning rate", "score scaling"):
        g = t.groupby([axis, "claim_id"], sort=False)["holds"]
        counted = pd.DataFrame({"held": g.sum(), "of": g.size()}).reset_index()
        parts.append(pd.DataFrame({"axis": axis, "value": counted[axis], "claim_id": counted["claim_id"],
                                   "holds": [f"{h} of {n}" for h, n in zip(counted["held"], counted["of"])]}))
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
    rows = grid_rows(rows)
    keys = SETTING + ["mult_set", "panel"]
    g = rows.groupby(keys, sort=False)
    out = g[list(columns)].agg(fmt).reset_index()
    out["capped"] = g["hit_cap"].sum().astype(int).to_numpy().astype(str) + " of " + g.size().to_numpy().astype(str)
    labels = g[["parameterisation", "qk_mult", "qk_schedule"]].first().reset_index()
    out.insert(0, "setting", [setting_label(r) for _, r in out.iterrows()])
    out["panel"] = [panel_label(r) for _, r in labels.iterrows()]
    return out.drop(columns=SETTING + ["mult_set"])


def panel_label(row: Mapping[str, Any]) -> str:
    """'(e) FAFO, QK ×10', '(f) FAFO, QK 1→20', '(a) FAFO'."""
    mult, schedule = float(row["qk_mult"]), row["qk_schedule"]
    speed = "" if mult == 1 and schedule == "constant" else \
        f", QK 1→{mult:g}" if schedule == "ramp" else f", QK ×{mult:g}"
    return f"({row['panel']}) {row['parameterisation']}{speed}"
