"""Section 8's untested corollaries on the Figure 2 task: other ways of slowing the OV circuit (its learning rate,
weight decay, initial scale), and the effective QK/OV ratio under SGD and AdamW."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from ..core.device import pick_device
from ..core.validation import require_positive_ints, require_positive_numbers
from ..metrics import mean_ci
from ..metrics.verdicts import FAILS, HOLDS, REVIEW, UNDECIDED, Claim, Interval, above, claim_table, rule
from ..present.plots import line_panels
from ..present.tables import listed
from ..runs.synthetic_runs import Panel, PanelResult, SyntheticSetup, synthetic_data, train_runs
from ..train.stack_optim import UpdateRatios
from . import fig2_dtap

METRICS = ("MRTA", "ACMC", "top_right_cell", "accuracy")  # the held-out measures compared, in percent
REALISED_FACTOR = 2.0  # a multiplier is "not the effective ratio" when realised/nominal is outside [1/2, 2]
UNIFORM_TOLERANCE = 0.01  # a run "as good as uniform": its query token's attention within 1% of 1/length
MIN_RECORDS = 5  # records of the effective ratio a seed's run needs for a verdict on it (every ``record_every`` steps)


@dataclass(frozen=True, kw_only=True)
class Setup(SyntheticSetup):
    """Figure 2's setup (``SyntheticSetup``) and the corollaries' interventions, the AdamW runs and how often the
    effective ratio is recorded (Section 8 names the interventions without settings: these are this companion's)."""

    ramp_steps: int = 1  # no ramps here: the multipliers are constant
    qk_mult: float = 10.0  # the paper's intervention, QK x k, for reference (Figure 2's (e))
    ov_mult: float = 0.1  # "a smaller OV learning rate": OV x 0.1 at the base QK rate
    ov_lr_max_steps: int | None = None  # that run's step cap (None: max_steps / ov_mult, the same flow time)
    ov_decay: float = 1e-4  # "weight decay on W_O, W_V": decoupled, on the OV factors only
    ov_init_mult: float = 0.01  # "unbalanced initialisation": OV factors this many times smaller
    adam_lrs: tuple[float, ...] = (1e-3, 1e-2)  # AdamW's rates for the effective-ratio question (the referee's)
    adam_max_steps: int = 20_000  # AdamW runs' step cap
    record_every: int = 50  # steps between records of the effective ratio

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.ov_lr_max_steps is not None and self.ov_lr_max_steps < 1:
            raise ValueError(
                f"ov_lr_max_steps must be an integer >= 1, or None for max_steps / ov_mult (got {self.ov_lr_max_steps})"
            )
        if not 0 < self.ov_mult <= 1 or self.qk_mult < 1 or self.ov_decay < 0 or not self.ov_init_mult > 0:
            raise ValueError(
                f"need ov_mult in (0, 1], qk_mult >= 1, ov_decay >= 0, ov_init_mult > 0 (got "
                f"{self.ov_mult}, {self.qk_mult}, {self.ov_decay}, {self.ov_init_mult})"
            )
        require_positive_numbers("adam_lrs", self.adam_lrs)
        require_positive_ints(self, ("adam_max_steps", "record_every"))


# Under ``official``: Figure 2's task as the authors' notebooks set it (the settings of Figure 2's ``official`` profile
# that the shared setup has: layout, weights, vocabulary, length, scaling, fresh batches, classes, collapsed start,
# step cap, how often the stop rule is read) and their QK multiplier for panel (e). The interventions are this
# companion's (the notebooks run none): every run under the one cap, the effective ratio read every 500 steps so that a
# million-step run fits the store's budget.
_FIG2 = fig2_dtap.PROFILES["official"]
PROFILES = {
    "default": dict(ov_lr_max_steps=700_000),
    "official": {
        **{f.name: _FIG2[f.name] for f in fields(SyntheticSetup) if f.name in _FIG2},
        "qk_mult": _FIG2["mult_e"],
        "ov_lr_max_steps": _FIG2["max_steps"],
        "record_every": 500,
    },
    "smoke": dict(
        seeds=(0, 1), n_train=640, n_test=640, lr=1.0, max_steps=300, eval_every=20, adam_max_steps=100, record_every=5
    ),
}


def task_words(setup: Setup, profile: str) -> str:
    """The sentence the page adds on the task under ``profile`` (empty but for ``official``: the authors' task)."""
    if profile != "official":
        return ""
    return (
        "Under the `official` profile the task is Figure 2's as the authors' notebooks set it (their token layout and "
        f"weights over {setup.vocab_size} ids, a fresh batch every step, each sequence's class drawn at random, "
        f"scores scaled by {setup.score_scale:.3g}, a cap of {setup.max_steps:,} steps, the stop rule read every "
        f"{setup.eval_every} steps) and the faster-QK run uses their multiplier x{setup.qk_mult:g}; every factor "
        f"starts at the identity x {setup.init_scale:g}, as their row-2 notebook starts its faster FAFO runs."
    )


def runs(setup: Setup) -> list[Panel]:
    """Section 8's untested corollaries on the Figure 2 task, each with the rate and step cap it runs under.

    FAFO baseline; QK x k (the paper's intervention, for reference); OV learning rate x ov_mult at the base QK rate
    (its step cap ``ov_lr_max_steps``, or when None the cap divided by ov_mult: the same ratio on a slower clock);
    decoupled weight decay on W_O, W_V only; OV factors initialised x ov_init_mult; and AdamW at each of
    ``adam_lrs`` with multipliers 1 and k, its step cap ``adam_max_steps``."""
    k, cap = setup.qk_mult, setup.ov_lr_max_steps
    slow = round(setup.max_steps / setup.ov_mult) if cap is None else cap
    out = [
        setup.panel("base", "FAFO"),
        setup.panel("QK", "FAFO", k),
        setup.panel("OV lr", "FAFO", ov_mult=setup.ov_mult, max_steps=slow),
        setup.panel("OV decay", "FAFO", ov_decay=setup.ov_decay),
        setup.panel("OV init", "FAFO", ov_init_mult=setup.ov_init_mult),
    ]
    for lr in setup.adam_lrs:
        adam: dict[str, Any] = {"lr": lr, "max_steps": setup.adam_max_steps, "optimizer": "adamw"}
        out += [setup.panel(f"AdamW {lr:g}", "FAFO", **adam), setup.panel(f"AdamW {lr:g} QK", "FAFO", k, **adam)]
    return out


def run(
    setup: Setup, *, device: torch.device | None = None, progress: bool = True
) -> tuple[list[PanelResult], pd.DataFrame]:
    """Every run and seed trained and evaluated; and the effective-ratio records (``UpdateRatios`` rows);
    ``device`` None: ``pick_device()``."""
    data = synthetic_data(setup.data, setup.seeds, setup.n_train, setup.n_test)
    recorder = UpdateRatios(setup.record_every)
    results = train_runs(runs(setup), setup, data, device or pick_device(), progress, recorder=recorder)
    return results, pd.DataFrame(recorder.rows)


def effective_ratios(ratios: pd.DataFrame, runs: Sequence[Panel]) -> pd.DataFrame:
    """Per run: the nominal QK/OV rate ratio, and over seeds the mean (with 95% CI) of each seed's median
    effective ratio over its recorded steps (``UpdateRatios`` rows with a ``panel`` column), split into the first
    and second half of its training."""
    rows = []
    for panel in runs:
        part = ratios[ratios["panel"] == panel.key]
        if part.empty:
            continue
        half = part.groupby("seed")["step"].transform("max") / 2
        row = {"panel": panel.key, "optimizer": panel.optimizer, "lr": panel.rates.lr, "nominal ratio": _nominal(panel)}
        row["records, fewest a seed"] = _fewest_records(part)
        for name, sel in (
            ("whole run", part),
            ("first half", part[part["step"] <= half]),
            ("second half", part[part["step"] > half]),
        ):
            med = sel.groupby("seed")["effective_ratio"].median()
            mean, ci = mean_ci(med.to_numpy()) if len(med) else (np.nan, np.nan)
            row[f"effective, {name}"], row[f"± 95% CI, {name}"] = mean, ci
        rows.append(row)
    return pd.DataFrame(rows)


def _fewest_records(rows: pd.DataFrame) -> int:
    """The fewest ``UpdateRatios`` records any seed of these rows (one run's) holds."""
    return int(rows.groupby("seed").size().min())


def _nominal(panel: Panel) -> float:
    """The run's nominal QK/OV learning-rate ratio."""
    return panel.rates.qk_mult / panel.rates.ov_mult


def describe(panel: Panel) -> str:
    """A run in words: 'the FAFO baseline', 'OV learning rate x0.1', 'AdamW at 0.001, QK x10'."""
    rates = panel.rates
    parts = [
        text
        for cond, text in (
            (panel.optimizer == "adamw", f"AdamW at {rates.lr:g}"),
            (rates.qk_mult != 1, f"QK learning rate x{rates.qk_mult:g}"),
            (rates.ov_mult != 1, f"OV learning rate x{rates.ov_mult:g}"),
            (panel.ov_decay > 0, f"weight decay {panel.ov_decay:g} on OV"),
            (panel.ov_init_mult != 1, f"OV initialised x{panel.ov_init_mult:g}"),
        )
        if cond
    ]
    return ", ".join(parts) or "the FAFO baseline"


def names(setup: Setup) -> dict[str, str]:
    """Each run's key -> its description (``describe``)."""
    return {panel.key: describe(panel) for panel in runs(setup)}


def claims(effects: pd.DataFrame, updates: pd.DataFrame, runs: Sequence[Panel], labels: dict[str, str]) -> pd.DataFrame:
    """Section 8's corollaries (each intervention sharpens attention: the paired MRTA effect's 95% interval lies
    above 0) and the AdamW question (the realised multiplier, each seed's median effective ratio of the QK x k run
    over the run without it, against the nominal k). ``updates`` holds ``UpdateRatios`` rows; ``labels`` names each
    run key for the claim text."""
    rows = []
    for _, e in effects[effects["metric"] == "MRTA"].iterrows():
        mrta = Interval(e["effect"], e["ci_low"], e["ci_high"], int(e["seeds"]))
        rows.append(
            Claim(
                f"sharpens_{e['panel']}",
                f"{_capital(labels.get(e['panel'], e['panel']))} sharpens attention, as a faster query-key rate does.",
                f"mean attention on the distinct tokens {e['baseline']:.1f} "
                f"→ {e['with change']:.1f}%, change {mrta.text(1, True)} points",
                above(mrta, 0.0),
                rule("above", "mean attention on the distinct tokens (MRTA)", "0", paired=True),
                *mrta.numbers,
            )
        )
    medians = updates.groupby(["panel", "seed"])["effective_ratio"].median()
    for (_opt, lr), group in _by_optimiser(runs).items():
        base = next((panel for panel in group if panel.rates.qk_mult == 1 and panel.rates.ov_mult == 1), None)
        for panel in group:
            k = _nominal(panel)
            if base is None or k == 1 or panel.key not in medians or base.key not in medians:
                continue
            realised = Interval.of((medians[panel.key] / medians[base.key]).dropna() / k)
            fewest = min(_fewest_records(updates[updates["panel"] == key]) for key in (panel.key, base.key))
            few = f"; only {fewest} record{'s' * (fewest != 1)} in a seed's run" if fewest < MIN_RECORDS else ""
            rows.append(
                Claim(
                    f"nominal_not_effective_{panel.key}_lr{lr:g}",
                    f"Under {labels.get(panel.key, panel.key)}, "
                    f"the nominal multiplier {k:g} is not the effective QK/OV ratio.",
                    f"realised multiplier over nominal: {realised.text(3)}{few}",
                    UNDECIDED if few else _outside(realised),
                    f"holds if the 95% interval over seeds of the realised multiplier over the nominal one "
                    f"lies outside [1/{REALISED_FACTOR:g}, {REALISED_FACTOR:g}]; fails if it lies inside; "
                    f"undecided if it straddles an end, or if a seed of either run has fewer than {MIN_RECORDS} "
                    "records of the effective ratio (a run that stops before a few records is not measured over "
                    "its training)",
                    *realised.numbers,
                )
            )
    return claim_table(replace(row, kind=REVIEW) for row in rows)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _by_optimiser(runs: Sequence[Panel]) -> dict[tuple[str, float], list[Panel]]:
    """The runs grouped by optimiser and learning rate, in order."""
    groups: dict[tuple[str, float], list[Panel]] = {}
    for panel in runs:
        groups.setdefault((panel.optimizer, panel.rates.lr), []).append(panel)
    return groups


def _outside(interval: Interval) -> str:
    """'Not the effective ratio': the realised/nominal interval outside [1/REALISED_FACTOR, REALISED_FACTOR]."""
    lo, hi = 1 / REALISED_FACTOR, REALISED_FACTOR
    if interval.n < 2:
        return UNDECIDED
    if interval.low > hi or interval.high < lo:
        return HOLDS
    return FAILS if interval.low >= lo and interval.high <= hi else UNDECIDED


def per_run(summary: pd.DataFrame, labels: dict[str, str]) -> pd.DataFrame:
    """Each run's mean over seeds of the held-out measures (%), its steps, and how many seeds hit the step cap."""
    table = (
        summary.groupby("panel", sort=False)
        .agg({**{m: "mean" for m in METRICS}, "steps": "mean", "hit_cap": "sum"})
        .rename(columns={"hit_cap": "capped"})
    )
    table["steps"] = table["steps"].round().astype(int)
    return table.rename(index=labels).rename_axis("run")


def uniform_words(summary: pd.DataFrame, seq_len: int, labels: dict[str, str]) -> str:
    """A sentence naming the runs whose every seed ends with the query token's attention within ``UNIFORM_TOLERANCE``
    (relative) of uniform attention over ``seq_len`` positions (empty when none does)."""
    uniform = 100 / seq_len
    near = (summary["query_attention %"] / uniform - 1).abs() <= UNIFORM_TOLERANCE
    runs = [labels.get(k, k) for k, ok in near.groupby(summary["panel"], sort=False).all().items() if ok]
    if not runs:
        return ""
    return (
        f"In {listed(runs)}, every seed ends with the query token's attention within {UNIFORM_TOLERANCE:.0%} of "
        f"its value under uniform attention over the {seq_len} positions ({uniform:.3g}%): a sign that the query-key "
        "circuit has barely left its start, where attention is uniform."
    )


def effect_table(effects: pd.DataFrame, labels: dict[str, str]) -> pd.DataFrame:
    """Paired effects (``metrics.paired_effects``) as text, one row per run and one column per measure: the change
    against the baseline in points, with its 95% interval over seeds."""
    text = effects.assign(
        change=[Interval(r.effect, r.ci_low, r.ci_high, int(r.seeds)).text(1, True) for r in effects.itertuples()]
    )
    table = text.pivot(index="panel", columns="metric", values="change")
    return (
        table.loc[effects["panel"].unique(), list(METRICS)].rename(index=labels).rename_axis(index="run", columns=None)
    )


def ratio_table(ratios: pd.DataFrame, labels: dict[str, str]) -> pd.DataFrame:
    """``effective_ratios`` as text: per run its nominal ratio and, over its whole run and each half, the mean over
    seeds of the seed's median effective ratio ± the 95% half-width (three significant digits; a dash where a half
    holds no record), and the fewest records a seed's run has."""
    out = pd.DataFrame(
        {"nominal QK/OV ratio": ratios["nominal ratio"].map("{:g}".format).to_numpy()},
        index=pd.Index([labels.get(k, k) for k in ratios["panel"]], name="run"),
    )
    for part in ("whole run", "first half", "second half"):
        out[part] = [
            "—" if np.isnan(m) else f"{m:.3g} ± {c:.2g}"
            for m, c in zip(ratios[f"effective, {part}"], ratios[f"± 95% CI, {part}"])
        ]
    out["records (fewest in a seed)"] = ratios["records, fewest a seed"].to_numpy()
    return out


def ratio_figure(updates: pd.DataFrame, labels: dict[str, str]) -> go.Figure:
    """The effective QK/OV ratio (median over seeds) against training steps, one line per run, log axes."""
    curve = updates.groupby(["panel", "step"], sort=False)["effective_ratio"].median().reset_index()
    curve = curve[curve["effective_ratio"] > 0].assign(run=lambda d: d["panel"].map(lambda k: labels.get(k, k)))
    fig = line_panels(curve, "step", [("effective_ratio", "")], "run", "training step", log_y=[True], cols=1)
    fig.update_yaxes(title_text="effective QK/OV ratio")
    return fig
