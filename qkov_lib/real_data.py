"""Section 7 on real data: load and encode a dataset, train a baseline and a faster-QK classifier (all seeds at
once), and measure accuracy, MRTA, AC, ACMC, sufficiency and comprehensiveness per seed (Table 1), and accuracy by
group (SVA: by number of attractors)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from .data import hatexplain, sva
from .data.text import Encoded, TextSplit, Vocab, encode, unknown_rate
from .device import cpu_workers
from .engine import run_independent
from .metrics import mean_ci
from .metrics.rationale import faithfulness, mass_metrics, readout_attention
from .models.transformer import ClassifierConfig, classify, init_classifier, trim
from .optim import RateSchedule
from .training import FixedSetBatches, TrainConfig, train

TABLE_METRICS = ("accuracy", "MRTA", "AC", "ACMC", "sufficiency", "comprehensiveness")


@dataclass
class Prepared:
    """A dataset ready to train on: encoded splits, the vocabulary, class names and a provenance record."""

    train: Encoded
    test: Encoded
    vocab: Vocab
    classes: tuple[str, ...]
    info: dict[str, Any]
    heldout: Encoded | None = None


Loader = Callable[[dict[str, Any]], tuple[dict[str, TextSplit], dict]]
# each dataset: its loader (the chapter's parameters -> splits and provenance) and its class names
DATASETS: dict[str, tuple[Loader, tuple[str, ...]]] = {
    "hatexplain": (lambda p: hatexplain.load(p["rationale_rule"], download=p["download"]), hatexplain.CLASSES),
    "sva": (lambda p: sva.load(download=p["download"], heldout_fraction=p["heldout_fraction"], seed=p["data_seed"]),
            sva.CLASSES),
}


def majority_share(labels: np.ndarray) -> float:
    """The accuracy, in percent, of always predicting the most frequent class."""
    return 100 * np.bincount(labels).max() / len(labels)


def prepare(dataset: str, p: dict[str, Any]) -> Prepared:
    """Load (offline copies or the cache), subsample as the profile says, build the vocabulary on train, encode."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; allowed: {', '.join(DATASETS)}")
    load, classes = DATASETS[dataset]
    splits, info = load(p)
    tr: TextSplit = splits["train"].subset(p["max_train"], p["data_seed"])
    te: TextSplit = splits["test"].subset(p["max_test"], p["data_seed"])
    held: TextSplit | None = splits.get("heldout")
    if held is not None:
        held = held.subset(p["max_test"], p["data_seed"])
    vocab = Vocab(tr.tokens, p["min_freq"])
    annotated = int(sum(r is not None and r.any() for r in te.relevant))
    info = dict(info, **{"train examples": len(tr), "test examples": len(te), "vocabulary": len(vocab),
                         "test tokens outside the vocabulary": f"{100 * unknown_rate(te, vocab):.1f}%",
                         "test accuracy of always predicting the majority class": f"{majority_share(te.labels):.1f}%",
                         "test examples with relevant tokens": annotated})
    if held is not None:
        info |= {"held-out examples": len(held),
                 "held-out accuracy of always predicting the majority class": f"{majority_share(held.labels):.1f}%"}
    return Prepared(encode(tr, vocab, p["max_len"]), encode(te, vocab, p["max_len"]), vocab, classes, info,
                    None if held is None else encode(held, vocab, p["max_len"]))


def model_config(data: Prepared, p: dict[str, Any]) -> ClassifierConfig:
    return ClassifierConfig(vocab=len(data.vocab), n_classes=len(data.classes), max_len=p["max_len"],
                            d_model=p["d_model"], n_heads=p["n_heads"], d_head=p["d_head"], n_layers=p["n_layers"],
                            mlp=p["mlp"], d_mlp=p["d_mlp"], residual=p["residual"])


def fit(params: dict[str, torch.Tensor], loss_fn: Callable, inputs: torch.Tensor, labels: torch.Tensor,
        p: dict[str, Any], qk_mult: float, progress: bool, desc: str, probe: int = 1024, chunk: int = 256
        ) -> pd.DataFrame:
    """Train stacked models in place for ``epochs`` epochs over (inputs, labels) [N, ...], every seed reading its
    own batch order, with only W_Q and W_K at ``qk_mult`` x the base rate; returns the training loss curve, read on
    a fixed subset of ``probe`` training examples (columns step, epoch, seed, train_nll)."""
    seeds, n = list(p["seeds"]), inputs.shape[0]
    per_epoch = n // p["batch_size"]
    tc = TrainConfig(RateSchedule(p["lr"], qk_mult=qk_mult), batch_size=p["batch_size"], optimizer=p["optimizer"],
                     weight_decay=tuple((g, p["weight_decay"]) for g in ("qk", "ov", "other")), target_nll=0.0,
                     max_steps=p["epochs"] * per_epoch, eval_every=max(1, per_epoch // p["evals_per_epoch"]))
    batches = FixedSetBatches(inputs[None], labels[None], seeds, p["batch_size"], rows=[0] * len(seeds))
    rows = torch.randperm(n, generator=torch.Generator().manual_seed(p["data_seed"]))[:probe]

    @torch.no_grad()
    def monitor(prm):
        out = [loss_fn(prm, *(t[part].expand(len(seeds), *t[part].shape) for t in (inputs, labels)))
               for part in rows.split(chunk)]
        return torch.stack(out).mean(0).cpu().numpy()

    hist = train(params, loss_fn, tc, batches, monitor, seeds, progress, desc)
    return pd.DataFrame([{"step": s, "epoch": s / per_epoch, "seed": seed, "train_nll": float(v[i])}
                         for s, v in zip(hist.steps, hist.train_nll) for i, seed in enumerate(seeds)])


def train_condition(data: Prepared, p: dict[str, Any], qk_mult: float, device: torch.device,
                    progress: bool = True, desc: str = "training") -> tuple[dict[str, torch.Tensor], pd.DataFrame]:
    """One classifier per seed, trained by ``fit``; returns the parameters and the training NLL curve."""
    cfg = model_config(data, p)
    params = init_classifier(cfg, list(p["seeds"]), device)

    def loss_fn(prm, x, y):
        logits, _ = classify(prm, cfg, trim(x)[0])
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), y, reduction="none").mean(1)

    curve = fit(params, loss_fn, data.train.ids.to(device), data.train.labels.to(device), p, qk_mult, progress, desc)
    return params, curve


@torch.no_grad()
def evaluate_condition(params: dict[str, torch.Tensor], data: Prepared, p: dict[str, Any]
                       ) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Per seed: accuracy on the whole test set; MRTA, AC, ACMC, sufficiency and comprehensiveness on the test
    examples with relevant tokens. Also, for the DTAP maps, each such example's relevant mass and true-class
    probability [S, N]."""
    cfg = model_config(data, p)
    dev = params["embed"].device

    def predict(ids: torch.Tensor) -> torch.Tensor:
        return torch.softmax(classify(params, cfg, ids)[0], -1)

    parts: dict[str, list[torch.Tensor]] = {k: [] for k in ("correct", "mass", "prob", "suff", "comp")}
    test = data.test
    for start in range(0, test.ids.shape[0], p["eval_batch"]):
        ids, rel = trim(test.ids[start:start + p["eval_batch"]].to(dev),
                        test.relevant[start:start + p["eval_batch"]].to(dev))
        y = test.labels[start:start + p["eval_batch"]].to(dev)
        has = test.has_relevance[start:start + p["eval_batch"]].to(dev)
        logits, attns = classify(params, cfg, ids)
        probs = torch.softmax(logits, -1)
        parts["correct"].append((probs.argmax(-1) == y).float())
        att = readout_attention(attns, ids, p["identity_weight"])
        S = att.shape[0]
        parts["mass"].append((att * rel).sum(-1)[:, has])
        parts["prob"].append(probs.gather(-1, y.expand(S, -1)[..., None]).squeeze(-1)[:, has])
        if has.any():
            suff, comp = faithfulness(predict, ids[has].expand(S, -1, -1), att[:, has], p["k_percents"],
                                      p["erase"], full=probs[:, has])
            parts["suff"].append(suff)
            parts["comp"].append(comp)
    cat = {k: torch.cat(v, dim=1).cpu() for k, v in parts.items() if v}
    if "mass" not in cat or cat["mass"].shape[1] == 0:
        raise ValueError("no test example has relevant tokens (after truncation to max_len); nothing to measure")
    masses = mass_metrics(cat["mass"], cat["prob"], p["threshold"], p["confidence"])
    rows = [{"seed": seed, "accuracy": 100 * float(cat["correct"][i].mean()),
             **{k: float(v[i]) for k, v in masses.items()},
             "sufficiency": float(cat["suff"][i].mean()), "comprehensiveness": float(cat["comp"][i].mean())}
            for i, seed in enumerate(p["seeds"])]
    return pd.DataFrame(rows), {"mass": cat["mass"].numpy(), "prob_true": cat["prob"].numpy()}


@torch.no_grad()
def predictions(params: dict[str, torch.Tensor], cfg: ClassifierConfig, split: Encoded, batch: int) -> torch.Tensor:
    """Each seed's predicted class for every example of ``split``: [S, N] on the CPU."""
    dev = params["embed"].device
    return torch.cat([classify(params, cfg, trim(split.ids[i:i + batch].to(dev))[0])[0].argmax(-1).cpu()
                      for i in range(0, split.ids.shape[0], batch)], dim=1)


def accuracy_by_group(params: dict[str, torch.Tensor], data: Prepared, p: dict[str, Any]) -> pd.DataFrame:
    """Per split with groups (held-out, test), group and seed: accuracy and the group's majority-class share, in
    percent, and its size (columns split, group, seed, accuracy, majority, examples; group as text, "all" for the
    whole split, so the table reads back from CSV unchanged). Empty without groups."""
    cfg, rows = model_config(data, p), []
    for name, split in (("held-out", data.heldout), ("test", data.test)):
        if split is None or split.groups is None:
            continue
        correct = (predictions(params, cfg, split, p["eval_batch"]) == split.labels).numpy()
        groups, labels = split.groups.numpy(), split.labels.numpy()
        for group in np.unique(groups):
            inside = groups == group
            rows += [{"split": name, "group": str(group), "seed": seed, "accuracy": 100 * correct[i, inside].mean(),
                      "majority": majority_share(labels[inside]), "examples": int(inside.sum())}
                     for i, seed in enumerate(p["seeds"])]
        rows += [{"split": name, "group": "all", "seed": seed, "accuracy": 100 * correct[i].mean(),
                  "majority": majority_share(labels), "examples": len(labels)} for i, seed in enumerate(p["seeds"])]
    return pd.DataFrame(rows, columns=["split", "group", "seed", "accuracy", "majority", "examples"])


def group_table(by_group: pd.DataFrame, name: Callable[[Any], str] = str) -> pd.DataFrame:
    """Accuracy by group for reading: per split and group, the majority share, the size, and each condition's mean
    accuracy ± 95% CI half-width over seeds (percent, 0.1); ``name`` labels a group."""
    rows = []
    for (split, group), part in by_group.groupby(["split", "group"], sort=False):
        row = {"split": split, "group": name(group), "examples": int(part["examples"].iloc[0]),
               "majority class": f"{part['majority'].iloc[0]:.1f}"}
        for cond, runs in part.groupby("condition", sort=False):
            mean, half = mean_ci(runs["accuracy"].to_numpy())
            row[cond] = f"{mean:.1f} ± {half:.1f}"
        rows.append(row)
    return pd.DataFrame(rows).set_index(["split", "group"])


def table1(per_seed: pd.DataFrame, by: str = "condition", metrics: Sequence[str] = TABLE_METRICS) -> pd.DataFrame:
    """Table 1 rows: per condition and metric, the mean over seeds and its 95% CI half-width."""
    rows = []
    for cond, part in per_seed.groupby(by, sort=False):
        row = {by: cond}
        for metric in metrics:
            mean, half = mean_ci(part[metric].to_numpy())
            row[metric], row[f"{metric} ±"] = mean, half
        rows.append(row)
    return pd.DataFrame(rows)


def table1_display(table: pd.DataFrame, by: str | list[str] = "condition", metrics: Sequence[str] = TABLE_METRICS
                   ) -> pd.DataFrame:
    """``table1`` for reading: one "mean ± half-width" column per metric (percentages to 0.1, probability
    differences to 0.001), so a row fits the page."""
    shown = table.set_index(by)
    digits = {"sufficiency": 3, "comprehensiveness": 3}
    return pd.DataFrame({m: [f"{v:.{digits.get(m, 1)}f} ± {h:.{digits.get(m, 1)}f}"
                             for v, h in zip(shown[m], shown[f"{m} ±"])] for m in metrics}, index=shown.index)


@dataclass
class RealRun:
    """Both conditions' results: per-seed metrics, DTAP maps [seeds, y, x] per condition, training curves (columns
    label, step, epoch, seed, train_nll) and accuracy by group (``accuracy_by_group`` plus a condition column)."""

    per_seed: pd.DataFrame
    maps: dict[str, np.ndarray]
    curves: pd.DataFrame
    by_group: pd.DataFrame


@dataclass(frozen=True)
class Task:
    """What a real-data run trains and measures: ``train(data, p, qk_mult, device, progress, desc)`` -> (params,
    curve); ``evaluate(params, data, p)`` -> (per-seed rows, {"mass", "prob_true"} [S, N]); ``by_group(params,
    data, p)`` -> accuracy by group, or None."""

    train: Callable
    evaluate: Callable
    by_group: Callable | None = None


def _condition(task: Task, data: Any, p: dict[str, Any], name: str, qk_mult: float, device: torch.device,
               progress: bool) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame, pd.DataFrame]:
    """Train and evaluate one condition: per-seed metrics, DTAP maps [seeds, y, x], the training curve and the
    accuracy by group (empty without groups)."""
    from .metrics import dtap_histogram
    params, curve = task.train(data, p, qk_mult, device, progress, desc=name)
    rows, raw = task.evaluate(params, data, p)
    maps = np.stack([dtap_histogram(raw["mass"][i], raw["prob_true"][i], p["bins"], p["bins"])
                     for i in range(len(p["seeds"]))])
    by_group = task.by_group(params, data, p) if task.by_group else pd.DataFrame(columns=["split", "group", "seed"])
    return rows.assign(condition=name), maps, curve.assign(label=name), by_group.assign(condition=name)


def _conditions(p: dict[str, Any]) -> list[tuple[str, float]]:
    return [("baseline", 1.0), (f"faster QK (x{p['qk_mult']:g})", p["qk_mult"])]


def run_all(data: Any, variants: list[dict[str, Any]], device: torch.device, progress: bool,
            task: Task | None = None) -> list[RealRun]:
    """Both conditions of every parameter variant, as independent tasks over the CPU's worker processes (each on
    one torch thread, so the numbers do not depend on the machine's core count): one RealRun per variant.
    ``task``: what to train and measure (default: the classifiers of this module)."""
    task = task or CLASSIFY
    tasks = [(task, data, p, name, mult, device, progress) for p in variants for name, mult in _conditions(p)]
    done = iter(run_independent(_condition, tasks, cpu_workers(device)))
    runs = []
    for p in variants:
        pairs = [(name, next(done)) for name, _ in _conditions(p)]
        runs.append(RealRun(per_seed=pd.concat([d[0] for _, d in pairs], ignore_index=True),
                            maps={name: d[1] for name, d in pairs},
                            curves=pd.concat([d[2] for _, d in pairs], ignore_index=True),
                            by_group=pd.concat([d[3] for _, d in pairs], ignore_index=True)))
    return runs


CLASSIFY = Task(train_condition, evaluate_condition, accuracy_by_group)


def run_conditions(data: Prepared, p: dict[str, Any], device: torch.device, progress: bool = True) -> RealRun:
    """Baseline (QK x 1) and faster QK (QK x qk_mult), side by side in two processes on the CPU."""
    return run_all(data, [p], device, progress)[0]


def run_layers(data: Prepared, p: dict[str, Any], device: torch.device, progress: bool = True) -> dict[int, RealRun]:
    """``run_conditions`` for each depth in ``p["layer_counts"]`` (Appendix D.5, Table 5), all four or more
    trainings spread over the worker processes at once."""
    counts = list(p["layer_counts"])
    return dict(zip(counts, run_all(data, [dict(p, n_layers=n) for n in counts], device, progress)))


def by_depth(runs: dict[int, RealRun], field: str) -> pd.DataFrame:
    """One of the runs' tables (``per_seed``, ``curves``) at every depth, with a ``layers`` column."""
    return pd.concat([getattr(run, field).assign(layers=n) for n, run in runs.items()], ignore_index=True)


def layers_table(runs: dict[int, RealRun]) -> pd.DataFrame:
    """Table 5: ``table1`` per depth, with a ``layers`` column first."""
    table = pd.concat([table1(run.per_seed).assign(layers=n) for n, run in runs.items()], ignore_index=True)
    return table[["layers", *table.columns.drop("layers")]]
