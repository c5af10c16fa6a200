"""Runs on the synthetic task (Section 4): the panels of Figure 2 and the summaries the chapters tabulate."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from .data.synthetic import FreshBatches, SyntheticConfig, SyntheticSplit, make_splits, stack_splits
from .metrics import attention_summary, dtap_histogram
from .models import AttentionConfig, init_params
from .optim import RateSchedule, circuit_groups
from .training import FixedSetBatches, History, TrainConfig, UpdateRatios, attention_loss, evaluate, train


@dataclass(frozen=True)
class Panel:
    """One run of the synthetic task: a parameterisation and its QK learning-rate multiplier (constant or 1 -> k
    ramp, Figure 2), plus the other ways of slowing OV (Section 8's corollaries): an OV learning-rate multiplier,
    decoupled weight decay on the OV factors only, and OV factors initialised ``ov_init_mult`` times larger; and
    the optimiser (``sgd`` or ``adamw``)."""

    key: str
    parameterisation: str
    qk_mult: float = 1.0
    qk_schedule: str = "constant"
    ov_mult: float = 1.0
    ov_decay: float = 0.0
    ov_init_mult: float = 1.0
    optimizer: str = "sgd"

    @property
    def label(self) -> str:
        parts = [f"({self.key}) {self.parameterisation}"]
        if self.qk_schedule == "ramp":
            parts.append(f"QK 1→{self.qk_mult:g}x")
        elif self.qk_mult != 1:
            parts.append(f"QK x{self.qk_mult:g}")
        parts += [text for cond, text in ((self.ov_mult != 1, f"OV lr x{self.ov_mult:g}"),
                                          (self.ov_decay > 0, f"OV decay {self.ov_decay:g}"),
                                          (self.ov_init_mult != 1, f"OV init x{self.ov_init_mult:g}"),
                                          (self.optimizer != "sgd", self.optimizer)) if cond]
        return ", ".join(parts)


def figure2_panels(mult_e: float, ramp_f: float, mult_g: float, ramp_h: float) -> list[Panel]:
    """(a-d) the four parameterisations at equal rates; (e) FAFO QK x k; (f) FAFO ramp; (g) CACO x k; (h) ramp."""
    return [Panel("a", "FAFO"), Panel("b", "FACO"), Panel("c", "CAFO"), Panel("d", "CACO"),
            Panel("e", "FAFO", mult_e), Panel("f", "FAFO", ramp_f, "ramp"), Panel("g", "CACO", mult_g),
            Panel("h", "CACO", ramp_h, "ramp")]


@dataclass
class PanelResult:
    panel: Panel
    history: History
    heatmaps: np.ndarray  # [seeds, y bins, x bins], percent; row 0 = lowest probability
    summary: pd.DataFrame  # one row per seed


def synthetic_data(cfg: SyntheticConfig, seeds: Sequence[int], n_train: int, n_test: int
                   ) -> tuple[SyntheticSplit, SyntheticSplit]:
    """Per-seed training and held-out test sets, stacked on a leading seed dimension."""
    splits = [make_splits(cfg, n_train, n_test, seed) for seed in seeds]
    return stack_splits([a for a, _ in splits]), stack_splits([b for _, b in splits])


def run_panel(panel: Panel, data_cfg: SyntheticConfig, data: tuple[SyntheticSplit, SyntheticSplit],
              seeds: Sequence[int], p: dict[str, Any], device: torch.device, progress: bool = True,
              recorder: UpdateRatios | None = None) -> PanelResult:
    """Train one panel's seeds at once and evaluate on the held-out set. ``p`` holds the chapter's parameters
    (init, init_scale, score_scale, attend_to_query, d_model, lr, batch_size, target_nll, max_steps, eval_every,
    ramp_steps, fresh_batches, bins). ``recorder`` sees the parameter updates every few steps."""
    train_set, test_set = (s.apply(lambda t: t.to(device)) for s in data)
    cfg = AttentionConfig(panel.parameterisation, vocab=data_cfg.vocab, d_model=p["d_model"] or None, init=p["init"],
                          init_scale=p["init_scale"], score_scale=p["score_scale"],
                          attend_to_query=p["attend_to_query"])
    params = init_params(cfg, seeds, device)
    with torch.no_grad():
        for name in circuit_groups(params)["ov"]:
            params[name].mul_(panel.ov_init_mult)
    schedule = RateSchedule(lr=p["lr"], qk_mult=panel.qk_mult, qk_schedule=panel.qk_schedule,
                            ramp_steps=p["ramp_steps"], ov_mult=panel.ov_mult)
    tc = TrainConfig(schedule, batch_size=p["batch_size"], target_nll=p["target_nll"], max_steps=p["max_steps"],
                     eval_every=p["eval_every"], optimizer=panel.optimizer,
                     weight_decay=(("ov", panel.ov_decay),) if panel.ov_decay else ())
    seeds = list(seeds)
    batches = (FreshBatches(data_cfg, seeds, tc.batch_size, device) if p["fresh_batches"]
               else FixedSetBatches(train_set.tokens, train_set.labels, seeds, tc.batch_size))
    monitor = lambda prm: evaluate(prm, cfg, train_set.tokens, train_set.labels)["nll"].mean(1)  # noqa: E731
    hist = train(params, attention_loss(cfg), tc, batches, monitor, seeds, progress, desc=panel.label,
                 recorder=recorder)
    ev = evaluate(params, cfg, test_set.tokens, test_set.labels, test_set.distinct)
    maps = np.stack([dtap_histogram(ev["attn_distinct"][i], ev["prob_true"][i], p["bins"], p["bins"])
                     for i in range(len(seeds))])
    stop = np.where(hist.hit_cap, hist.steps[-1], hist.stopped_at)
    rows = [{"panel": panel.key, "label": panel.label, "seed": seed, "steps": int(stop[i]),
             "hit_cap": bool(hist.hit_cap[i]), "final_train_nll": float(hist.train_nll[-1][i]),
             "test_nll": float(ev["nll"][i].mean()), "query_attention %": 100 * float(ev["attn_query"][i].mean()),
             **attention_summary(ev["attn_distinct"][i], ev["prob_true"][i], ev["correct"][i])}
            for i, seed in enumerate(seeds)]
    return PanelResult(panel, hist, maps, pd.DataFrame(rows))


def mean_pm_std(summary: pd.DataFrame, columns: Sequence[str], by: str = "label") -> pd.DataFrame:
    """'mean ± std' strings per group (std over seeds, ddof=1), for the chapter tables."""
    agg = summary.groupby(by, sort=False)[list(columns)].agg(["mean", "std"])
    return pd.DataFrame({c: [f"{m:.1f} ± {s:.1f}" for m, s in zip(agg[(c, "mean")], agg[(c, "std")].fillna(0))]
                         for c in columns}, index=agg.index)


def heatmap_cells(results: Sequence[PanelResult], seeds: Sequence[int], bins: Sequence[float]) -> pd.DataFrame:
    """Every seed's heatmaps in long form: panel, seed, probability bin, attention bin, percent."""
    names = [f"{lo:g}-{hi:g}" for lo, hi in zip(bins[:-1], bins[1:])]
    return pd.DataFrame([{"panel": r.panel.key, "label": r.panel.label, "seed": seed, "prob_bin": names[i],
                          "attention_bin": names[j], "percent": float(r.heatmaps[s, i, j])}
                         for r in results for s, seed in enumerate(seeds)
                         for i in range(len(names)) for j in range(len(names))])


def curve_table(results: Sequence[PanelResult], seeds: Sequence[int]) -> pd.DataFrame:
    """Training NLL per evaluation in long form: label, step, seed, train_nll."""
    return pd.DataFrame([{"label": r.panel.label, "step": step, "seed": seed, "train_nll": float(nll[i])}
                         for r in results for step, nll in zip(r.history.steps, r.history.train_nll)
                         for i, seed in enumerate(seeds)])


def corollary_runs(p: dict[str, Any]) -> list[tuple[Panel, dict[str, Any]]]:
    """Section 8's untested corollaries on the Figure 2 task, each with the parameters it runs under.

    FAFO baseline; QK x k (the paper's intervention, for reference); OV learning rate x ov_mult at the base QK rate
    (its step cap divided by ov_mult: the same ratio on a slower clock); decoupled weight decay on W_O, W_V only;
    OV factors initialised x ov_init_mult; and AdamW at each of ``adam_lrs`` with multipliers 1 and k."""
    k = p["qk_mult"]
    runs = [(Panel("base", "FAFO"), p), (Panel("QK", "FAFO", qk_mult=k), p),
            (Panel("OV lr", "FAFO", ov_mult=p["ov_mult"]), p | {"max_steps": round(p["max_steps"] / p["ov_mult"])}),
            (Panel("OV decay", "FAFO", ov_decay=p["ov_decay"]), p),
            (Panel("OV init", "FAFO", ov_init_mult=p["ov_init_mult"]), p)]
    for lr in p["adam_lrs"]:
        q = p | {"lr": lr, "max_steps": p["adam_max_steps"]}
        runs += [(Panel(f"AdamW {lr:g}", "FAFO", optimizer="adamw"), q),
                 (Panel(f"AdamW {lr:g} QK", "FAFO", qk_mult=k, optimizer="adamw"), q)]
    return runs


def effective_ratios(ratios: pd.DataFrame, runs: Sequence[tuple[Panel, dict[str, Any]]]) -> pd.DataFrame:
    """Per run: the nominal QK/OV rate ratio, and over seeds the mean (with 95% CI) of each seed's median
    effective ratio over its recorded steps (``UpdateRatios`` rows with a ``panel`` column), split into the first
    and second half of its training."""
    from .metrics import mean_ci
    rows = []
    for panel, q in runs:
        part = ratios[ratios["panel"] == panel.key]
        if part.empty:
            continue
        half = part.groupby("model")["step"].transform("max") / 2
        row = {"panel": panel.key, "optimizer": panel.optimizer, "lr": q["lr"],
               "nominal ratio": panel.qk_mult / panel.ov_mult}
        for name, sel in (("whole run", part), ("first half", part[part["step"] <= half]),
                          ("second half", part[part["step"] > half])):
            med = sel.groupby("model")["effective_ratio"].median()
            mean, ci = mean_ci(med.to_numpy()) if len(med) else (np.nan, np.nan)
            row[f"effective, {name}"], row[f"± 95% CI, {name}"] = mean, ci
        rows.append(row)
    return pd.DataFrame(rows)
