"""Runs on the synthetic task (Section 4): a panel (a parameterisation and how it trains), the setup every run of a
chapter shares and builds its panels from, training many panels and seeds with the engine, and the summaries the
chapters tabulate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace

import numpy as np
import pandas as pd
import torch

from ..core.device import cpu_workers
from ..core.validation import require_positive_ints, require_seeds
from ..data.synthetic import SyntheticConfig, SyntheticSplit, make_splits, stack_splits
from ..metrics import attention_summary, check_bins, dtap_histogram
from ..models import AttentionConfig, check_init, init_params
from ..train.backends import train_stack
from ..train.counts import CountSet, FixedBatches, FreshBatches, count_set
from ..train.optim import RateSchedule, check_rate, circuit_groups
from ..train.stack import Member, RunSpec, StackConfig
from ..train.stack_optim import UpdateRatios, flush_denormals
from ..train.stacked import evaluate_counts
from .store import Batch, Piece, setup_values, slug


@dataclass(frozen=True)
class Panel(RunSpec):
    """One run of the synthetic task and all of how it trains: a parameterisation; the engine's ``RunSpec`` (its
    rates: the base rate, the QK multiplier, constant or a 1 -> k ramp as in Figure 2, and the OV multiplier; its step
    cap, OV weight decay and stop rule); and the rest of Section 8's ways of slowing OV (OV factors initialised
    ``ov_init_mult`` times larger), the optimiser (``sgd`` or ``adamw``), its own sequence length and the matrices
    it starts at PyTorch's default init. ``SyntheticSetup.panel`` builds one from a chapter's setup."""

    key: str
    parameterisation: str
    ov_init_mult: float = 1.0
    optimizer: str = "sgd"
    seq_len: int | None = None  # None: the chapter's sequence length
    pytorch_init: tuple[str, ...] = ()  # matrices drawn as PyTorch's nn.Linear default, not the chapter's init
    own_cap: bool = False  # the step cap is the panel's own (Figure 2's panel_steps), which its label names

    @property
    def label(self) -> str:
        rates = self.rates
        parts = [f"({self.key}) {self.parameterisation}"]
        if rates.qk_schedule == "ramp":
            parts.append(f"QK 1→{rates.qk_mult:g}x")
        elif rates.qk_mult != 1:
            parts.append(f"QK x{rates.qk_mult:g}")
        parts += [
            text
            for cond, text in (
                (rates.ov_mult != 1, f"OV lr x{rates.ov_mult:g}"),
                (self.ov_decay > 0, f"OV decay {self.ov_decay:g}"),
                (self.ov_init_mult != 1, f"OV init x{self.ov_init_mult:g}"),
                (self.optimizer != "sgd", self.optimizer),
                (self.seq_len is not None, f"length {self.seq_len}"),
                (bool(self.pytorch_init), f"PyTorch init {' '.join(self.pytorch_init)}"),
            )
            if cond
        ]
        if self.own_cap:
            parts.append(f"cap {self.max_steps:,}")
        if not self.early_stop:
            parts.append("no early stop")
        elif self.stop_epoch is not None:
            parts.append(f"authors' stop per {self.stop_epoch}-step epoch")
        return ", ".join(parts)


@dataclass
class PanelResult:
    panel: Panel
    heatmaps: np.ndarray  # [seeds, y bins, x bins], percent; row 0 = lowest probability
    summary: pd.DataFrame  # one row per seed
    curves: pd.DataFrame  # label, step, seed, train_nll (mean mini-batch loss over each eval_every steps)


def synthetic_data(
    cfg: SyntheticConfig, seeds: Sequence[int], n_train: int, n_test: int
) -> tuple[SyntheticSplit, SyntheticSplit]:
    """Per-seed training and held-out test sets, stacked on a leading seed dimension."""
    splits = [make_splits(cfg, n_train, n_test, seed) for seed in seeds]
    return stack_splits([a for a, _ in splits]), stack_splits([b for _, b in splits])


@dataclass(frozen=True, kw_only=True)
class SyntheticTask(SyntheticConfig):
    """Section 4's task (``SyntheticConfig``: its sizes and sampling) with what every synthetic chapter trains it
    with, typed and checked: the seeds, the data sizes, where batches come from, the read-out, the training loop and
    its stop, and the DTAP bins."""

    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)  # "5 seeds" (Section 4); each fixes data and initialisation
    fresh_batches: bool = False  # the paper trains on a fixed subset; the authors' notebooks draw every batch anew
    n_train: int = 6400  # "200 batches of size 32" (Section 4)
    n_test: int = 6400  # a disjoint held-out set ("evaluate on the rest"; the authors' 200 x 32 test sequences)
    attend_to_query: bool = True  # eq. (1): the softmax runs over every position, the query's own included
    batch_size: int = 32  # Section 4
    target_nll: float = 1e-3  # "train until NLL <= 0.001" (Section 4)
    max_steps: int = 700_000  # a step cap the paper does not state; capped seeds are reported
    eval_every: int = 200  # steps between read-outs of the loss (one pass over 6400 sequences)
    ramp_steps: int = 200_000  # the QK ramps' length ("1x -> kx over training"; the authors' 2000 x 100 steps)
    bins: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # DTAP bin edges of both axes (Figure 2)

    def __post_init__(self) -> None:
        super().__post_init__()
        require_seeds(self.seeds)
        require_positive_ints(self, ("n_train", "n_test", "batch_size", "max_steps", "eval_every", "ramp_steps"))
        for name in ("n_train", "n_test"):
            if getattr(self, name) < self.n_classes:
                raise ValueError(f"{name} must be >= n_classes = {self.n_classes} (got {getattr(self, name)})")
        if self.batch_size > self.n_train:
            raise ValueError(f"batch_size = {self.batch_size} exceeds n_train = {self.n_train}")
        if not self.target_nll >= 0:
            raise ValueError(f"target_nll must be >= 0, 0 meaning no early stop (got {self.target_nll!r})")
        check_bins(list(self.bins))


@dataclass(frozen=True, kw_only=True)
class SyntheticSetup(SyntheticTask):
    """The task and its training (``SyntheticTask``), with how models start and score and the base learning rate:
    what every run of a chapter shares; ``panel`` builds each run from it."""

    init: str = "identity"  # every factor 1e-6 * I, the authors' notebooks (the paper states none)
    init_scale: float = 1e-6  # the authors' identity scale
    score_scale: float = 1.0  # eq. (1) has no score scaling (the authors': 1/sqrt(50))
    collapsed_init: str = "product"  # collapsed = its factors' product (one start for all four); "factor": the authors'
    lr: float = 1e-2  # SGD's rate: the authors' 0.01 (the paper states none)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_init(self.init, self.init_scale, self.collapsed_init)
        check_rate("lr", self.lr)

    def panel(
        self,
        key: str,
        parameterisation: str,
        qk_mult: float = 1.0,
        qk_schedule: str = "constant",
        *,
        ov_mult: float = 1.0,
        lr: float | None = None,
        max_steps: int | None = None,
        **options,
    ) -> Panel:
        """A run of this setup: its rates (the setup's rate unless ``lr``, the QK multiplier constant or ramped over
        the setup's ``ramp_steps``, the OV multiplier), its step cap (the setup's unless ``max_steps``) and the
        ``Panel``'s other ``options``; the rates and cap are checked here."""
        rates = RateSchedule(
            lr=self.lr if lr is None else lr,
            qk_mult=qk_mult,
            qk_schedule=qk_schedule,
            ramp_steps=self.ramp_steps,
            ov_mult=ov_mult,
        )
        return Panel(
            key, parameterisation, rates=rates, max_steps=self.max_steps if max_steps is None else max_steps, **options
        )

    def model(self, panel: Panel) -> AttentionConfig:
        """The panel's model config (checks init, scale and score scaling)."""
        return AttentionConfig(
            panel.parameterisation,
            vocab=self.vocab,
            init=self.init,
            init_scale=self.init_scale,
            score_scale=self.score_scale,
            collapsed_init=self.collapsed_init,
        )


def _members(runs: Sequence[Panel], seeds: Sequence[int]) -> list[Member]:
    """One member per (run, seed); model (run i, seed j) reads data row j."""
    return [Member(seed, j, panel) for panel in runs for j, seed in enumerate(seeds)]


def _initial(
    runs: Sequence[Panel], models: Sequence[AttentionConfig], seeds: Sequence[int], device: torch.device
) -> dict[str, torch.Tensor]:
    """Each run's seeds initialised as its model alone would be (``models``: one per run): the chapter's init,
    except the panel's ``pytorch_init`` matrices, which get PyTorch's default (``init="pytorch"``, scale 1); OV
    factors then scaled by ``ov_init_mult``."""
    stacks = []
    for panel, cfg in zip(runs, models, strict=True):
        params = {k: v.detach() for k, v in init_params(cfg, seeds, device).items()}
        if panel.pytorch_init:
            default = init_params(replace(cfg, init="pytorch", init_scale=1.0), seeds, device)
            params |= {name: default[name].detach() for name in panel.pytorch_init}
        for name in circuit_groups(params)["ov"]:
            params[name] = params[name] * panel.ov_init_mult
        stacks.append(params)
    return {k: torch.cat([s[k] for s in stacks]) for k in stacks[0]}


def _stack_config(panel: Panel, setup: SyntheticSetup) -> StackConfig:
    return StackConfig.of(
        panel.parameterisation,
        score_scale=setup.score_scale,
        optimizer=panel.optimizer,
        batch_size=setup.batch_size,
        target_nll=setup.target_nll,
        eval_every=setup.eval_every,
    )


@dataclass(frozen=True)
class StackJob:
    """One stack's training, as a worker process is sent it: its runs (each with its rates, cap and stop: the
    ``RunSpec`` a ``Member`` carries to the step kernel), each run's model, what the stack shares, and the task at
    the stack's sequence length. The rates travel only in the runs: nothing here holds a second copy."""

    runs: list[Panel]
    models: list[AttentionConfig]  # each run's model (``SyntheticSetup.model``)
    stack: StackConfig  # the circuits, optimiser, batch and stop rule (``_stack_config``)
    task: SyntheticConfig  # the task at this stack's sequence length; fresh batches are drawn from it
    seeds: tuple[int, ...]
    fresh_batches: bool
    attend_to_query: bool
    bins: tuple[float, ...]
    train_set: CountSet
    test_set: CountSet


def train_runs(
    runs: Sequence[Panel],
    setup: SyntheticSetup,
    data: tuple[SyntheticSplit, SyntheticSplit],
    device: torch.device,
    progress: bool = True,
    recorder: UpdateRatios | None = None,
    workers: int | None = None,
) -> list[PanelResult]:
    """Train every (run, seed) of the synthetic task with the engine, one stored run per (run, seed)
    (``store.Batch``): those the store holds are read, the rest trained in stacks, one per parameterisation and
    optimiser and set of seeds to compute (runs differ in rates, multipliers, ramps, OV decay, OV initial scale and
    step caps), then evaluated on their seed's held-out set. ``setup`` holds what all runs share; each ``Panel`` its
    rates, cap and the rest. ``recorder`` sees every few updates (rows get ``panel`` and ``seed``). ``workers``
    processes train the stacks (default: ``cpu_workers``; 1 trains them here, as a sweep task does). Results keep
    the runs' order."""
    seeds = list(setup.seeds)
    shared = setup_values(setup, drop=[f.name for f in fields(setup) if f.name not in SHARED or f.name == "seeds"])
    pieces = [
        Piece(slug(f"{panel.key}-seed{seed}"), {**shared, "seed": seed, "panel": asdict(panel)})
        for panel in runs
        for seed in seeds
    ]
    batch = Batch(pieces, [__name__], device)
    missing = set(batch.missing)
    by_seeds: dict[tuple[int, ...], list[int]] = {}  # the runs with the same seeds to compute train together
    for i in range(len(runs)):
        todo = tuple(j for j in range(len(seeds)) if i * len(seeds) + j in missing)
        if todo:
            by_seeds.setdefault(todo, []).append(i)
    jobs: list[tuple[list[int], list[int]]] = []  # (runs, seed positions) of each stack
    tasks: list[tuple] = []
    workers = cpu_workers(device) if workers is None else workers
    for rows, index in by_seeds.items():
        part = (data[0].apply(lambda t, r=list(rows): t[r]), data[1].apply(lambda t, r=list(rows): t[r]))
        for stack, task in _stack_jobs(
            [runs[i] for i in index], setup, [seeds[j] for j in rows], part, device, progress, recorder, workers
        ):
            jobs.append(([index[k] for k in stack], list(rows)))
            tasks.append(task)

    def split(t: int, out: tuple[list[PanelResult], list[dict]]) -> dict[int, dict[str, pd.DataFrame]]:
        index, rows = jobs[t]
        return {
            i * len(seeds) + j: _run_tables(result, k, out[1])
            for i, result in zip(index, out[0])
            for k, j in enumerate(rows)
        }

    batch.compute(_train_stack, tasks, workers, split)
    stored = batch.tables()
    results = []
    for i, panel in enumerate(runs):
        mine = stored[i * len(seeds) : (i + 1) * len(seeds)]
        results.append(
            PanelResult(
                panel,
                np.stack([t["heatmap"].to_numpy() for t in mine]),
                pd.concat([t["main"] for t in mine], ignore_index=True),
                pd.concat([t["curve"] for t in mine], ignore_index=True),
            )
        )
        if recorder:
            recorder.rows += [r for t in mine for r in t["ratios"].to_dict("records")]
    return results


CURVE = pd.DataFrame(columns=["label", "step", "seed", "train_nll"])  # a run that never read its loss out
SHARED = {f.name for f in fields(SyntheticSetup)}  # what every run shares; the rest reaches a run by its Panel


def _run_tables(result: PanelResult, k: int, ratios: list[dict]) -> dict[str, pd.DataFrame]:
    """The stored tables of seed ``k`` of one run's result: its DTAP map, summary row, curve and, where recorded,
    its update ratios."""
    seed = int(result.summary["seed"].iloc[k])
    tables = {
        "main": result.summary.iloc[[k]],
        "heatmap": pd.DataFrame(result.heatmaps[k]),
        "curve": result.curves[result.curves["seed"] == seed] if len(result.curves) else CURVE,
    }
    mine = [r for r in ratios if r["panel"] == result.panel.key and r["seed"] == seed]
    if ratios:
        tables["ratios"] = pd.DataFrame(mine, columns=list(ratios[0]))
    return tables


def _stack_jobs(
    runs: Sequence[Panel],
    setup: SyntheticSetup,
    seeds: list[int],
    data: tuple[SyntheticSplit, SyntheticSplit],
    device: torch.device,
    progress: bool,
    recorder: UpdateRatios | None,
    workers: int,
) -> list[tuple[list[int], tuple]]:
    """The stacks that train ``runs`` for ``seeds`` (whose data ``data`` holds, stacked), largest first: each the
    indices of its runs and its ``_train_stack`` task."""
    data_cfg = setup.data
    queries = torch.as_tensor(data_cfg.token_ids()["query"])  # one slot order for fixed sets and fresh batches

    def as_counts(
        cfg: SyntheticConfig, splits: tuple[SyntheticSplit, SyntheticSplit]
    ) -> tuple[SyntheticConfig, CountSet, CountSet]:
        """A data config with its training and test splits as counts on ``device``."""
        train, test = (
            count_set(s.apply(lambda t: t.to(device)), cfg.vocab, setup.attend_to_query, queries) for s in splits
        )
        return cfg, train, test

    counted = {data_cfg.seq_len: as_counts(data_cfg, data)}
    groups: dict[tuple[str, str, int], list[int]] = {}
    for i, panel in enumerate(runs):
        length = panel.seq_len or data_cfg.seq_len
        if length not in counted:  # a panel with its own sequence length: its own data, from the same seeds
            cfg = replace(data_cfg, seq_len=length)
            counted[length] = as_counts(cfg, synthetic_data(cfg, seeds, setup.n_train, setup.n_test))
        groups.setdefault((panel.parameterisation, panel.optimizer, length), []).append(i)
    cost = lambda index: _cost(runs, index, seeds)  # noqa: E731
    order = sorted(_balance(list(groups.values()), cost, workers), key=lambda index: -cost(index))  # largest first
    out = []
    for index in order:
        cfg, train_set, test_set = counted[runs[index[0]].seq_len or data_cfg.seq_len]
        stacked_runs = [runs[i] for i in index]
        job = StackJob(
            stacked_runs,
            [setup.model(panel) for panel in stacked_runs],
            _stack_config(stacked_runs[0], setup),
            cfg,
            tuple(seeds),
            setup.fresh_batches,
            setup.attend_to_query,
            setup.bins,
            train_set,
            test_set,
        )
        out.append((index, (job, device, progress, UpdateRatios(recorder.every) if recorder else None)))
    return out


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


def _cost(runs: Sequence[Panel], index: Sequence[int], seeds: Sequence[int]) -> float:
    """A stack's relative cost: models x step cap x matmuls per step (factorised OV needs twice as many)."""
    return sum(runs[i].max_steps * (2 if runs[i].parameterisation.endswith("FO") else 1) for i in index) * len(seeds)


def _train_stack(
    job: StackJob, device: torch.device, progress: bool, recorder: UpdateRatios | None
) -> tuple[list[PanelResult], list[dict]]:
    """One stack of runs (one parameterisation and optimiser) trained and evaluated; with the recorder's rows."""
    runs, seeds, sc, train_set, test_set = job.runs, list(job.seeds), job.stack, job.train_set, job.test_set
    members = _members(runs, seeds)
    rows = torch.as_tensor([m.row for m in members], device=device)
    if job.fresh_batches:
        source = FreshBatches(job.task, members, sc.batch_size, sc.eval_every, job.attend_to_query, device)
        batch = source.take
    else:
        batch = FixedBatches(train_set, members, sc.batch_size).take

    def full_nll(params, ids, step):
        return evaluate_counts(params, sc, train_set, rows[ids])["nll"].mean(1)

    def record(step, active, params, updates):
        recorder(step, [(runs[k // len(seeds)].key, members[k].seed) for k in active], params, updates)

    desc = ", ".join(panel.label for panel in runs) if len(runs) < 4 else f"{len(runs)} runs of {sc.qk} QK"
    with flush_denormals(device.type == "cpu"):
        out = train_stack(
            _initial(runs, job.models, seeds, device),
            members,
            sc,
            batch,
            train_set.query_ids,
            full_nll=full_nll,
            recorder=record if recorder else None,
            record_every=recorder.every if recorder else 0,
            progress=progress,
            desc=desc,
        )
    final = {k: out.stacked(k) for k in out.params[0]}
    ev = evaluate_counts(final, sc, test_set, rows)
    train_nll = evaluate_counts(final, sc, train_set, rows)["nll"].mean(1)
    results = []
    bins = list(job.bins)
    for r, panel in enumerate(runs):
        ks = range(r * len(seeds), (r + 1) * len(seeds))
        maps = np.stack([dtap_histogram(ev["attn_distinct"][k], ev["prob_true"][k], bins, bins) for k in ks])
        summary = pd.DataFrame(
            [
                {
                    "panel": panel.key,
                    "label": panel.label,
                    "seed": seeds[j],
                    "steps": int(out.steps_run[k]),
                    "hit_cap": bool(out.hit_cap[k]),
                    "final_train_nll": float(train_nll[k]),
                    "test_nll": float(ev["nll"][k].mean()),
                    "query_attention %": 100 * float(ev["attn_query"][k].mean()),
                    **attention_summary(ev["attn_distinct"][k], ev["prob_true"][k], ev["correct"][k]),
                }
                for j, k in enumerate(ks)
            ]
        )
        curves = pd.DataFrame(
            [
                {"label": panel.label, "step": step, "seed": seeds[j], "train_nll": nll}
                for j, k in enumerate(ks)
                for step, nll in out.curves[k]
            ]
        )
        results.append(PanelResult(panel, maps, summary, curves))
    return results, recorder.rows if recorder else []
