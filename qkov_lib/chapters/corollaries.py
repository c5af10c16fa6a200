"""Section 8's untested corollaries on the Figure 2 task: other ways of slowing the OV circuit (its learning rate,
weight decay, initial scale), and the effective QK/OV ratio under SGD and AdamW."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch

from ..engine import UpdateRatios
from ..metrics import mean_ci
from ..synthetic_runs import Panel, PanelResult, Run, SyntheticSetup, synthetic_data, train_runs
from ..validation import require_positive_numbers
from ..verdicts import claim_table

REALISED_FACTOR = 2.0  # a multiplier is "not the effective ratio" when realised/nominal is outside [1/2, 2]


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
            raise ValueError(f"ov_lr_max_steps must be an integer >= 1, or None for max_steps / ov_mult "
                             f"(got {self.ov_lr_max_steps})")
        if not 0 < self.ov_mult <= 1 or self.qk_mult < 1 or self.ov_decay < 0 or not self.ov_init_mult > 0:
            raise ValueError(f"need ov_mult in (0, 1], qk_mult >= 1, ov_decay >= 0, ov_init_mult > 0 (got "
                             f"{self.ov_mult}, {self.qk_mult}, {self.ov_decay}, {self.ov_init_mult})")
        require_positive_numbers("adam_lrs", self.adam_lrs)
        if not self.adam_max_steps >= 1:
            raise ValueError(f"adam_max_steps must be a positive integer (got {self.adam_max_steps!r})")
        UpdateRatios(self.record_every)


PROFILES = {
    "default": dict(ov_lr_max_steps=700_000),
    "smoke": dict(seeds=(0, 1), n_train=640, n_test=640, lr=1.0, max_steps=300, eval_every=20, adam_max_steps=100,
                  record_every=5),
}


def runs(setup: Setup) -> list[Run]:
    """Section 8's untested corollaries on the Figure 2 task, each with the settings it runs under.

    FAFO baseline; QK x k (the paper's intervention, for reference); OV learning rate x ov_mult at the base QK rate
    (its step cap ``ov_lr_max_steps``, or when None the cap divided by ov_mult: the same ratio on a slower clock);
    decoupled weight decay on W_O, W_V only; OV factors initialised x ov_init_mult; and AdamW at each of
    ``adam_lrs`` with multipliers 1 and k."""
    k, run, cap = setup.qk_mult, setup.run, setup.ov_lr_max_steps
    slow = replace(run, max_steps=round(run.max_steps / setup.ov_mult) if cap is None else cap)
    out = [(Panel("base", "FAFO"), run), (Panel("QK", "FAFO", qk_mult=k), run),
           (Panel("OV lr", "FAFO", ov_mult=setup.ov_mult), slow),
           (Panel("OV decay", "FAFO", ov_decay=setup.ov_decay), run),
           (Panel("OV init", "FAFO", ov_init_mult=setup.ov_init_mult), run)]
    for lr in setup.adam_lrs:
        adam = replace(run, lr=lr, max_steps=setup.adam_max_steps)
        out += [(Panel(f"AdamW {lr:g}", "FAFO", optimizer="adamw"), adam),
                (Panel(f"AdamW {lr:g} QK", "FAFO", qk_mult=k, optimizer="adamw"), adam)]
    return out


def run(setup: Setup, device: torch.device) -> tuple[list[PanelResult], pd.DataFrame]:
    """Every run and seed trained and evaluated; and the effective-ratio records (``UpdateRatios`` rows)."""
    data = synthetic_data(setup.data, setup.seeds, setup.n_train, setup.n_test)
    recorder = UpdateRatios(setup.record_every)
    results = train_runs(runs(setup), setup, data, device, recorder=recorder)
    return results, pd.DataFrame(recorder.rows)


def effective_ratios(ratios: pd.DataFrame, runs: Sequence[Run]) -> pd.DataFrame:
    """Per run: the nominal QK/OV rate ratio, and over seeds the mean (with 95% CI) of each seed's median
    effective ratio over its recorded steps (``UpdateRatios`` rows with a ``panel`` column), split into the first
    and second half of its training."""
    rows = []
    for panel, settings in runs:
        part = ratios[ratios["panel"] == panel.key]
        if part.empty:
            continue
        half = part.groupby("seed")["step"].transform("max") / 2
        row = {"panel": panel.key, "optimizer": panel.optimizer, "lr": settings.lr,
               "nominal ratio": panel.qk_mult / panel.ov_mult}
        for name, sel in (("whole run", part), ("first half", part[part["step"] <= half]),
                          ("second half", part[part["step"] > half])):
            med = sel.groupby("seed")["effective_ratio"].median()
            mean, ci = mean_ci(med.to_numpy()) if len(med) else (np.nan, np.nan)
            row[f"effective, {name}"], row[f"± 95% CI, {name}"] = mean, ci
        rows.append(row)
    return pd.DataFrame(rows)


def claims(effects: pd.DataFrame, ratios: pd.DataFrame, labels: dict[str, str]) -> pd.DataFrame:
    """Section 8's corollaries (each intervention sharpens attention: the MRTA effect's 95% CI lies above 0) and
    the AdamW question (realised multiplier = effective ratio of the QK x k run over the run without it).
    ``labels`` names each run key for the claim text."""
    mrta = effects[effects["metric"] == "MRTA"].set_index("panel")
    acmc = effects[effects["metric"] == "ACMC"].set_index("panel")
    rows = []
    for panel, e in mrta.iterrows():
        rows.append((f"sharpens_{panel}", f"{labels.get(panel, panel)}: sharpens attention (MRTA up vs the FAFO baseline)",
                     f"MRTA {e['baseline']:.1f} -> {e['with change']:.1f} %, effect {e['effect']:+.1f} "
                     f"[{e['ci_low']:+.1f}, {e['ci_high']:+.1f}]; ACMC effect {acmc.loc[panel, 'effect']:+.1f} "
                     f"[{acmc.loc[panel, 'ci_low']:+.1f}, {acmc.loc[panel, 'ci_high']:+.1f}]", bool(e["ci_low"] > 0)))
    eff = ratios.set_index("panel")["effective, whole run"]
    for opt, part in ratios.groupby("optimizer", sort=False):
        for lr, sub in part.groupby("lr", sort=False):
            base = sub[sub["nominal ratio"] == 1]
            for _, row in sub[sub["nominal ratio"] != 1].iterrows():
                if base.empty:
                    continue
                realised = row["effective, whole run"] / float(eff[base["panel"].iloc[0]])
                k = row["nominal ratio"]
                rows.append((f"nominal_not_effective_{row['panel']}_lr{lr:g}",
                             f"{labels.get(row['panel'], row['panel'])} (lr {lr:g}): the nominal ratio {k:g} is not "
                             "the effective ratio",
                             f"effective ratio {row['effective, whole run']:.3g} vs {float(eff[base['panel'].iloc[0]]):.3g}"
                             f" without it: realised multiplier {realised:.3g}",
                             bool(not 1 / REALISED_FACTOR <= realised / k <= REALISED_FACTOR)))
    return claim_table(rows)
