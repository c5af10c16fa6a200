"""Runs on the synthetic task (Section 4): the panels of Figure 2 and the summaries the chapters tabulate."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from .data.synthetic import SyntheticConfig, SyntheticSplit, make_splits, stack_splits
from .device import cpu_workers
from .engine import (CountSet, FixedBatches, FreshBatches, Member, StackConfig, UpdateRatios, count_set,
                     evaluate_counts, flush_denormals, run_independent, train_stack)
from .metrics import attention_summary, dtap_histogram
from .models import AttentionConfig, init_params
from .optim import RateSchedule, circuit_groups


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
    seq_len: int | None = None  # None: the chapter's sequence length
    pytorch_init: tuple[str, ...] = ()  # matrices drawn as PyTorch's nn.Linear default, not the chapter's init
    max_steps: int | None = None  # its own step cap within the run's (None: the run's)
    stop_epoch: int | None = None  # the authors' stop rule with epochs of this many steps (engine.StackConfig)
    early_stop: bool = True  # False: train to the cap whatever the loss

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
                                          (self.optimizer != "sgd", self.optimizer),
                                          (self.seq_len is not None, f"length {self.seq_len}"),
                                          (bool(self.pytorch_init),
                                           f"PyTorch init {' '.join(self.pytorch_init)}")) if cond]
        if self.max_steps is not None:
            parts.append(f"cap {self.max_steps:,}")
        if not self.early_stop:
            parts.append("no early stop")
        elif self.stop_epoch is not None:
            parts.append(f"authors' stop per {self.stop_epoch}-step epoch")
        return ", ".join(parts)

    def cap(self, run: "RunSettings") -> int:
        """The panel's step cap under ``run``: its own where it has one, never beyond the run's."""
        return run.max_steps if self.max_steps is None else min(self.max_steps, run.max_steps)


def figure2_panels(mult_e: float, ramp_f: float, mult_g: float, ramp_h: float, seq_len_gh: int | None = None,
                   pytorch_init: Mapping[str, Sequence[str]] | None = None,
                   panel_steps: Mapping[str, int] | None = None,
                   panel_stop: Mapping[str, int | None] | None = None) -> list[Panel]:
    """(a-d) the four parameterisations at equal rates; (e) FAFO QK x k; (f) FAFO ramp; (g) CACO x k; (h) ramp.
    ``seq_len_gh`` (None: the chapter's) gives panels g and h their own sequence length (the authors' notebook);
    the maps from a panel key give a panel the authors' own choices: ``pytorch_init`` the matrices that start from
    PyTorch's default init, ``panel_steps`` its step cap, ``panel_stop`` the authors' stop rule with epochs of that
    many steps (None: no early stop)."""
    panels = [Panel("a", "FAFO"), Panel("b", "FACO"), Panel("c", "CAFO"), Panel("d", "CACO"),
              Panel("e", "FAFO", mult_e), Panel("f", "FAFO", ramp_f, "ramp"),
              Panel("g", "CACO", mult_g, seq_len=seq_len_gh),
              Panel("h", "CACO", ramp_h, "ramp", seq_len=seq_len_gh)]
    init, steps, stops = pytorch_init or {}, panel_steps or {}, panel_stop or {}
    return [replace(panel, pytorch_init=tuple(init.get(panel.key, ())), max_steps=steps.get(panel.key),
                    stop_epoch=stops.get(panel.key), early_stop=not (panel.key in stops and stops[panel.key] is None))
            for panel in panels]


def figure2_runs(p: Mapping[str, Any], setup: "SyntheticSetup") -> list[tuple[Panel, "RunSettings"]]:
    """Figure 2's eight panels from the chapter's parameters, each under the chapter's run settings."""
    panels = figure2_panels(p["mult_e"], p["ramp_f"], p["mult_g"], p["ramp_h"], p["seq_len_gh"], p["pytorch_init"],
                            p["panel_steps"], p["panel_stop"])
    return [(panel, setup.run) for panel in panels]


@dataclass
class PanelResult:
    panel: Panel
    heatmaps: np.ndarray  # [seeds, y bins, x bins], percent; row 0 = lowest probability
    summary: pd.DataFrame  # one row per seed
    curves: pd.DataFrame  # label, step, seed, train_nll (mean mini-batch loss over each eval_every steps)


def synthetic_data(cfg: SyntheticConfig, seeds: Sequence[int], n_train: int, n_test: int
                   ) -> tuple[SyntheticSplit, SyntheticSplit]:
    """Per-seed training and held-out test sets, stacked on a leading seed dimension."""
    splits = [make_splits(cfg, n_train, n_test, seed) for seed in seeds]
    return stack_splits([a for a, _ in splits]), stack_splits([b for _, b in splits])


@dataclass(frozen=True)
class RunSettings:
    """How one run trains: the base learning rate, the QK ramp's length in steps and the step cap."""

    lr: float
    ramp_steps: int
    max_steps: int


@dataclass(frozen=True)
class SyntheticSetup:
    """What every run of a synthetic chapter shares, typed and checked (Section 4): the seeds, the task and its data
    sizes, how models start and score, the training loop, the DTAP bins, and the chapter's run settings."""

    seeds: tuple[int, ...]
    data: SyntheticConfig
    n_train: int
    n_test: int
    fresh_batches: bool
    init: str
    init_scale: float
    score_scale: float
    attend_to_query: bool
    batch_size: int
    target_nll: float
    eval_every: int
    bins: tuple[float, ...]
    run: RunSettings

    @classmethod
    def of(cls, p: Mapping[str, Any]) -> "SyntheticSetup":
        """From a chapter's resolved parameters; a ValueError names the first bad one."""
        from .data.synthetic import synthetic_config
        from .metrics import check_bins
        from .training import TrainConfig
        setup = cls(tuple(p["seeds"]), synthetic_config(p), p["n_train"], p["n_test"], p["fresh_batches"], p["init"],
                    p["init_scale"], p["score_scale"], p["attend_to_query"], p["batch_size"], p["target_nll"],
                    p["eval_every"], tuple(p["bins"]), RunSettings(p["lr"], p["ramp_steps"], p["max_steps"]))
        for name in ("n_train", "n_test"):
            if getattr(setup, name) < setup.data.n_classes:
                raise ValueError(f"{name} must be >= n_classes = {setup.data.n_classes} (got {getattr(setup, name)})")
        if setup.batch_size > setup.n_train:
            raise ValueError(f"batch_size = {setup.batch_size} exceeds n_train = {setup.n_train}")
        TrainConfig(batch_size=setup.batch_size, target_nll=setup.target_nll, max_steps=setup.run.max_steps,
                    eval_every=setup.eval_every)
        check_bins(list(setup.bins))
        return setup

    def model(self, panel: "Panel") -> AttentionConfig:
        """The panel's model config (checks init, scale and score scaling)."""
        return AttentionConfig(panel.parameterisation, vocab=self.data.vocab, init=self.init,
                               init_scale=self.init_scale, score_scale=self.score_scale)

    def schedule(self, panel: "Panel", run: RunSettings) -> RateSchedule:
        """The panel's learning rates under ``run`` (checks the rate, multiplier and ramp)."""
        return RateSchedule(lr=run.lr, qk_mult=panel.qk_mult, qk_schedule=panel.qk_schedule,
                            ramp_steps=run.ramp_steps, ov_mult=panel.ov_mult)


Run = tuple[Panel, RunSettings]


def _members(runs: Sequence[Run], setup: SyntheticSetup) -> list[Member]:
    """One member per (run, seed); model (run i, seed j) reads data row j."""
    return [Member(seed, j, setup.schedule(panel, run), ov_decay=panel.ov_decay, max_steps=panel.cap(run),
                   stop_epoch=panel.stop_epoch, early_stop=panel.early_stop)
            for panel, run in runs for j, seed in enumerate(setup.seeds)]


def _initial(runs: Sequence[Run], setup: SyntheticSetup, device: torch.device) -> dict[str, torch.Tensor]:
    """Each run's seeds initialised as the model alone would be: the chapter's init, except the panel's
    ``pytorch_init`` matrices, which get PyTorch's default (``init="pytorch"``, scale 1); OV factors then scaled
    by ``ov_init_mult``."""
    stacks = []
    for panel, _ in runs:
        cfg = setup.model(panel)
        params = {k: v.detach() for k, v in init_params(cfg, setup.seeds, device).items()}
        if panel.pytorch_init:
            default = init_params(replace(cfg, init="pytorch", init_scale=1.0), setup.seeds, device)
            params |= {name: default[name].detach() for name in panel.pytorch_init}
        for name in circuit_groups(params)["ov"]:
            params[name] = params[name] * panel.ov_init_mult
        stacks.append(params)
    return {k: torch.cat([s[k] for s in stacks]) for k in stacks[0]}


def _stack_config(panel: Panel, setup: SyntheticSetup) -> StackConfig:
    return StackConfig.of(panel.parameterisation, score_scale=setup.score_scale, optimizer=panel.optimizer,
                          batch_size=setup.batch_size, target_nll=setup.target_nll, eval_every=setup.eval_every)


def train_runs(runs: Sequence[Run], setup: SyntheticSetup, data: tuple[SyntheticSplit, SyntheticSplit],
               device: torch.device, progress: bool = True, recorder: UpdateRatios | None = None,
               workers: int | None = None) -> list[PanelResult]:
    """Train every (run, seed) of the synthetic task with the engine, one stack per parameterisation and optimiser
    (runs differ in rates, multipliers, ramps, OV decay, OV initial scale and step caps), then evaluate each on its
    seed's held-out set. ``setup`` holds what all runs share; each run's ``RunSettings`` its rate, ramp and cap.
    ``recorder`` sees every few updates (rows get ``panel`` and ``seed``). ``workers`` processes train the stacks
    (default: ``cpu_workers``; 1 trains them here, as a sweep task does). Results keep the runs' order."""
    data_cfg, seeds = setup.data, list(setup.seeds)
    queries = torch.as_tensor(data_cfg.token_ids()["query"])  # one slot order for fixed sets and fresh batches
    counted = {data_cfg.seq_len: (data_cfg, *(count_set(s.apply(lambda t: t.to(device)), data_cfg.vocab,
                                                          setup.attend_to_query, queries) for s in data))}
    groups: dict[tuple[str, str, int], list[int]] = {}
    for i, (panel, _) in enumerate(runs):
        length = panel.seq_len or data_cfg.seq_len
        if length not in counted:  # a panel with its own sequence length: its own data, from the same seeds
            cfg = replace(data_cfg, seq_len=length)
            splits = synthetic_data(cfg, seeds, setup.n_train, setup.n_test)
            counted[length] = (cfg, *(count_set(s.apply(lambda t: t.to(device)), cfg.vocab, setup.attend_to_query,
                                                queries) for s in splits))
        groups.setdefault((panel.parameterisation, panel.optimizer, length), []).append(i)
    workers = cpu_workers(device) if workers is None else workers
    cost = lambda index: _cost(runs, index, seeds)  # noqa: E731
    order = sorted(_balance(list(groups.values()), cost, workers), key=lambda index: -cost(index))  # largest first
    tasks = []
    for index in order:
        cfg, train_set, test_set = counted[runs[index[0]][0].seq_len or data_cfg.seq_len]
        tasks.append(([runs[i] for i in index], replace(setup, data=cfg), train_set, test_set, device, progress,
                      UpdateRatios(recorder.every) if recorder else None))
    results: dict[int, PanelResult] = {}
    for index, (stacked, rows) in zip(order, run_independent(_train_stack, tasks, workers)):
        results.update(zip(index, stacked))
        if recorder:
            recorder.rows += rows
    return [results[i] for i in range(len(runs))]


def _balance(stacks: list[list[int]], cost, workers: int) -> list[list[int]]:
    """Split the costliest stack in two (its runs dealt alternately, costliest first) while it costs more than an even
    share of the workers' time, so that stacks spread over the CPU's cores; a model trains the same in any stack."""
    while workers > 1:
        big = max(stacks, key=cost)
        if len(big) < 2 or cost(big) <= sum(map(cost, stacks)) / workers:
            break
        stacks.remove(big)
        ordered = sorted(big, key=lambda i: -cost([i]))
        stacks += [ordered[0::2], ordered[1::2]]
    return stacks


def _cost(runs: Sequence[Run], index: Sequence[int], seeds: Sequence[int]) -> float:
    """A stack's relative cost: models x step cap x matmuls per step (factorised OV needs twice as many)."""
    return sum(runs[i][0].cap(runs[i][1]) * (2 if runs[i][0].parameterisation.endswith("FO") else 1)
               for i in index) * len(seeds)


def _train_stack(runs: Sequence[Run], setup: SyntheticSetup, train_set: CountSet, test_set: CountSet,
                 device: torch.device, progress: bool, recorder: UpdateRatios | None
                 ) -> tuple[list[PanelResult], list[dict]]:
    """One stack of runs (one parameterisation and optimiser) trained and evaluated; with the recorder's rows."""
    seeds = list(setup.seeds)
    members = _members(runs, setup)
    sc = _stack_config(runs[0][0], setup)
    rows = torch.as_tensor([m.row for m in members], device=device)
    if setup.fresh_batches:
        source = FreshBatches(setup.data, members, sc.batch_size, sc.eval_every, setup.attend_to_query, device)
        batch = source.take
    else:
        batch = FixedBatches(train_set, members, sc.batch_size).take

    def full_nll(params, ids, step):
        return evaluate_counts(params, sc, train_set, rows[ids])["nll"].mean(1)

    def record(step, active, params, updates):
        recorder(step, [(runs[k // len(seeds)][0].key, members[k].seed) for k in active], params, updates)

    desc = ", ".join(panel.label for panel, _ in runs) if len(runs) < 4 else f"{len(runs)} runs of {sc.qk} QK"
    with flush_denormals(device.type == "cpu"):
        out = train_stack(_initial(runs, setup, device), members, sc, batch,
                          train_set.query_ids, full_nll=full_nll, recorder=record if recorder else None,
                          record_every=recorder.every if recorder else 0, progress=progress, desc=desc)
    final = {k: out.stacked(k) for k in out.params[0]}
    ev = evaluate_counts(final, sc, test_set, rows)
    train_nll = evaluate_counts(final, sc, train_set, rows)["nll"].mean(1)
    results = []
    bins = list(setup.bins)
    for r, (panel, _) in enumerate(runs):
        ks = range(r * len(seeds), (r + 1) * len(seeds))
        maps = np.stack([dtap_histogram(ev["attn_distinct"][k], ev["prob_true"][k], bins, bins) for k in ks])
        summary = pd.DataFrame([
            {"panel": panel.key, "label": panel.label, "seed": seeds[j], "steps": int(out.steps_run[k]),
             "hit_cap": bool(out.hit_cap[k]), "final_train_nll": float(train_nll[k]),
             "test_nll": float(ev["nll"][k].mean()), "query_attention %": 100 * float(ev["attn_query"][k].mean()),
             **attention_summary(ev["attn_distinct"][k], ev["prob_true"][k], ev["correct"][k])}
            for j, k in enumerate(ks)])
        curves = pd.DataFrame([{"label": panel.label, "step": step, "seed": seeds[j], "train_nll": nll}
                               for j, k in enumerate(ks) for step, nll in out.curves[k]])
        results.append(PanelResult(panel, maps, summary, curves))
    return results, recorder.rows if recorder else []


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


def curve_table(results: Sequence[PanelResult]) -> pd.DataFrame:
    """Training NLL (mean mini-batch loss per ``eval_every`` steps) in long form: label, step, seed, train_nll."""
    return pd.concat([r.curves for r in results], ignore_index=True)


def corollary_runs(p: Mapping[str, Any], setup: SyntheticSetup) -> list[Run]:
    """Section 8's untested corollaries on the Figure 2 task, each with the parameters it runs under.

    FAFO baseline; QK x k (the paper's intervention, for reference); OV learning rate x ov_mult at the base QK rate
    (its step cap ``ov_lr_max_steps``, or when None the cap divided by ov_mult: the same ratio on a slower clock);
    decoupled weight decay on W_O, W_V only; OV factors initialised x ov_init_mult; and AdamW at each of
    ``adam_lrs`` with multipliers 1 and k."""
    k, run = p["qk_mult"], setup.run
    cap = p["ov_lr_max_steps"]
    slow = replace(run, max_steps=round(run.max_steps / p["ov_mult"]) if cap is None else cap)
    runs = [(Panel("base", "FAFO"), run), (Panel("QK", "FAFO", qk_mult=k), run),
            (Panel("OV lr", "FAFO", ov_mult=p["ov_mult"]), slow),
            (Panel("OV decay", "FAFO", ov_decay=p["ov_decay"]), run),
            (Panel("OV init", "FAFO", ov_init_mult=p["ov_init_mult"]), run)]
    for lr in p["adam_lrs"]:
        adam = replace(run, lr=lr, max_steps=p["adam_max_steps"])
        runs += [(Panel(f"AdamW {lr:g}", "FAFO", optimizer="adamw"), adam),
                 (Panel(f"AdamW {lr:g} QK", "FAFO", qk_mult=k, optimizer="adamw"), adam)]
    return runs


def effective_ratios(ratios: pd.DataFrame, runs: Sequence[Run]) -> pd.DataFrame:
    """Per run: the nominal QK/OV rate ratio, and over seeds the mean (with 95% CI) of each seed's median
    effective ratio over its recorded steps (``UpdateRatios`` rows with a ``panel`` column), split into the first
    and second half of its training."""
    from .metrics import mean_ci
    rows = []
    for panel, run in runs:
        part = ratios[ratios["panel"] == panel.key]
        if part.empty:
            continue
        half = part.groupby("seed")["step"].transform("max") / 2
        row = {"panel": panel.key, "optimizer": panel.optimizer, "lr": run.lr,
               "nominal ratio": panel.qk_mult / panel.ov_mult}
        for name, sel in (("whole run", part), ("first half", part[part["step"] <= half]),
                          ("second half", part[part["step"] > half])):
            med = sel.groupby("seed")["effective_ratio"].median()
            mean, ci = mean_ci(med.to_numpy()) if len(med) else (np.nan, np.nan)
            row[f"effective, {name}"], row[f"± 95% CI, {name}"] = mean, ci
        rows.append(row)
    return pd.DataFrame(rows)
