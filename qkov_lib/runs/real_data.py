"""Section 7 on real data: load and encode a dataset, train a baseline and a faster-QK classifier (all seeds at
once), and measure accuracy, MRTA, AC, ACMC, sufficiency and comprehensiveness per seed (Table 1), and accuracy by
group (SVA: by number of attractors)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from ..core.device import cpu_workers
from ..data.text import READOUT, Encoded, TextSplit, Vocab, encode, unknown_rate
from ..metrics import dtap_histogram
from ..metrics.rationale import (
    authors_faithfulness,
    faithfulness,
    mass_metrics,
    padded_as_readout,
    readout_attention,
    relevant_mass,
)
from ..metrics.stats import majority_share
from ..models.transformer import ClassifierConfig, classify, init_classifier, trim
from ..train.training import FixedSetBatches, train
from .real_setup import Prepared, RealSetup
from .store import Batch, Piece, interleave, setup_values


def prepare(splits: Mapping[str, TextSplit], info: dict[str, Any], classes: tuple[str, ...], s: RealSetup) -> Prepared:
    """A dataset's splits (train, test, optionally heldout) subsampled as the setup says, the vocabulary built on
    train, every split encoded; ``info`` (the loader's provenance) gains the sizes and the majority baselines."""
    tr: TextSplit = splits["train"].subset(s.max_train, s.data_seed)
    te: TextSplit = splits["test"].subset(s.max_test, s.data_seed)
    held: TextSplit | None = splits.get("heldout")
    if held is not None:
        held = held.subset(s.max_test, s.data_seed)
    vocab = Vocab(tr.tokens, s.min_freq)
    annotated = int(sum(r is not None and r.any() for r in te.relevant))
    info = dict(
        info,
        **{
            "train examples": len(tr),
            "test examples": len(te),
            "vocabulary": len(vocab),
            "test tokens outside the vocabulary": f"{100 * unknown_rate(te, vocab):.1f}%",
            "test accuracy of always predicting the majority class": f"{majority_share(te.labels):.1f}%",
            "test examples with relevant tokens": annotated,
        },
    )
    if held is not None:
        info |= {
            "held-out examples": len(held),
            "held-out accuracy of always predicting the majority class": f"{majority_share(held.labels):.1f}%",
        }
    return Prepared(
        encode(tr, vocab, s.max_len),
        weighted(encode(te, vocab, s.max_len), te),
        vocab,
        classes,
        info,
        None if held is None else encode(held, vocab, s.max_len),
    )


def weighted(encoded: Encoded, split: TextSplit) -> Encoded:
    """``encoded`` with the split's relevance weights in [0, 1] (floats: HateXplain's rule ``mean``) in place of the
    0/1 masks ``text.encode`` makes of them, cut to the words it kept (its ids: the words, the read-out token, then
    padding); unchanged where the split's relevance is 0/1 (booleans). The weights are nonzero exactly where the
    masks are true, checked."""
    if not any(r is not None and np.asarray(r).dtype.kind == "f" for r in split.relevant):
        return encoded
    weights = torch.zeros(encoded.relevant.shape, dtype=torch.float32)
    for i, (r, n) in enumerate(zip(split.relevant, (encoded.lengths - 1).tolist())):
        if r is not None:
            weights[i, :n] = torch.from_numpy(np.asarray(r[:n], dtype=np.float32))
    if weights.min() < 0 or weights.max() > 1 or not torch.equal(weights > 0, encoded.relevant):
        raise ValueError(
            f"the {split.name} split's relevance weights must lie in [0, 1] and be nonzero where the "
            "encoded masks are set"
        )
    return replace(encoded, relevant=weights)


def model_config(data: Prepared, s: RealSetup) -> ClassifierConfig:
    return s.model(len(data.vocab), len(data.classes))


def fit(
    params: dict[str, torch.Tensor],
    loss_fn: Callable,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    s: RealSetup,
    qk_mult: float,
    progress: bool,
    desc: str,
    probe: int = 1024,
    chunk: int = 256,
    train_loss: Callable | None = None,
) -> pd.DataFrame:
    """Train stacked models in place for ``epochs`` epochs over (inputs, labels) [N, ...], every seed reading its
    own batch order, with the ``qk_params`` set (default W_Q and W_K only) at ``qk_mult`` x the base rate, on
    ``train_loss`` (default ``loss_fn``; e.g. with label smoothing); returns the training loss curve (``loss_fn``),
    read on a fixed subset of ``probe`` training examples (columns step, epoch, seed, train_nll)."""
    seeds, n = list(s.seeds), inputs.shape[0]
    per_epoch = n // s.batch_size
    tc = s.train_config(qk_mult, per_epoch)
    batches = FixedSetBatches(inputs[None], labels[None], seeds, s.batch_size, rows=[0] * len(seeds))
    rows = torch.randperm(n, generator=torch.Generator().manual_seed(s.data_seed))[:probe]

    @torch.no_grad()
    def monitor(prm):
        out = [
            loss_fn(prm, *(t[part].expand(len(seeds), *t[part].shape) for t in (inputs, labels)))
            for part in rows.split(chunk)
        ]
        return torch.stack(out).mean(0).cpu().numpy()

    hist = train(params, train_loss or loss_fn, tc, batches, monitor, seeds, progress, desc)
    return pd.DataFrame(
        [
            {"step": step, "epoch": step / per_epoch, "seed": seed, "train_nll": float(v[i])}
            for step, v in zip(hist.steps, hist.train_nll)
            for i, seed in enumerate(seeds)
        ]
    )


def train_condition(
    data: Prepared, s: RealSetup, qk_mult: float, device: torch.device, progress: bool = True, desc: str = "training"
) -> tuple[dict[str, torch.Tensor], pd.DataFrame]:
    """One classifier per seed, trained by ``fit``; returns the parameters and the training NLL curve."""
    cfg = model_config(data, s)
    params = init_classifier(cfg, list(s.seeds), device)

    def loss_fn(prm, x, y, smoothing=0.0):
        logits, _ = classify(prm, cfg, trim(x)[0])
        return torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), y, reduction="none", label_smoothing=smoothing
        ).mean(1)

    smoothed = (lambda prm, x, y: loss_fn(prm, x, y, s.label_smoothing)) if s.label_smoothing else None
    curve = fit(
        params,
        loss_fn,
        data.train.ids.to(device),
        data.train.labels.to(device),
        s,
        qk_mult,
        progress,
        desc,
        train_loss=smoothed,
    )
    return params, curve


SHARES = (
    0.1,
    0.33,
    0.5,
    0.66,
)  # the authors' DTAP bin edges (SVA: .1/.5, HateXplain: .33/.66): % of examples at or above


@torch.no_grad()
def evaluate_condition(
    params: dict[str, torch.Tensor], data: Prepared, s: RealSetup
) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Per seed: accuracy on the whole test set; MRTA, AC, ACMC, sufficiency and comprehensiveness on the test
    examples with relevant tokens (every test example with ``unannotated = "zero"``, one without at no relevant
    mass), the mass weighted by the relevance (``rationale.relevant_mass``); and, for ``why_not_learned``, the test
    set's size, the number of correct predictions and the number of distinct classes predicted; the share of
    measured examples at or above each of the authors' DTAP edges (``SHARES``: above_10 ... above_66, %). Also, for
    the DTAP maps, each measured example's relevant mass and true-class probability [S, N]."""
    cfg = model_config(data, s)
    dev = params["embed"].device

    def predict(ids: torch.Tensor) -> torch.Tensor:
        return torch.softmax(classify(params, cfg, ids)[0], -1)

    readout = data.vocab.stoi[READOUT]
    parts: dict[str, list[torch.Tensor]] = {k: [] for k in ("predicted", "correct", "mass", "prob", "suff", "comp")}
    test = data.test
    for start in range(0, test.ids.shape[0], s.eval_batch):
        ids, rel = trim(
            test.ids[start : start + s.eval_batch].to(dev), test.relevant[start : start + s.eval_batch].to(dev)
        )
        y = test.labels[start : start + s.eval_batch].to(dev)
        has = test.has_relevance[start : start + s.eval_batch].to(dev)
        if s.unannotated == "zero":
            has = torch.ones_like(has)
        logits, attns = classify(params, cfg, ids)
        probs = torch.softmax(logits, -1)
        parts["predicted"].append(probs.argmax(-1))
        parts["correct"].append((probs.argmax(-1) == y).float())
        S = probs.shape[0]
        mass, suff, comp = read_attention(params, cfg, s, predict, ids, rel, attns, probs, has, readout)
        parts["mass"].append(mass)
        parts["prob"].append(probs.gather(-1, y.expand(S, -1)[..., None]).squeeze(-1)[:, has])
        if has.any():
            parts["suff"].append(suff)
            parts["comp"].append(comp)
    cat = {k: torch.cat(v, dim=1).cpu() for k, v in parts.items() if v}
    if "mass" not in cat or cat["mass"].shape[1] == 0:
        raise ValueError("no test example has relevant tokens (after truncation to max_len); nothing to measure")
    masses = mass_metrics(cat["mass"], cat["prob"], s.threshold, s.confidence)
    above = (lambda t: cat["mass"] > t) if s.measure == "authors" else (lambda t: cat["mass"] >= t)  # their bins
    masses |= {f"above_{round(100 * t)}": 100 * above(t).float().mean(-1) for t in SHARES}
    rows = [
        {
            "seed": seed,
            "accuracy": 100 * float(cat["correct"][i].mean()),
            **{k: float(v[i]) for k, v in masses.items()},
            "sufficiency": float(cat["suff"][i].mean()),
            "comprehensiveness": float(cat["comp"][i].mean()),
            "examples": int(cat["correct"].shape[1]),
            "correct": int(cat["correct"][i].sum()),
            "predicted_classes": len(cat["predicted"][i].unique()),
        }
        for i, seed in enumerate(s.seeds)
    ]
    return pd.DataFrame(rows), {"mass": cat["mass"].numpy(), "prob_true": cat["prob"].numpy()}


def read_attention(
    params: dict[str, torch.Tensor],
    cfg: ClassifierConfig,
    s: RealSetup,
    predict: Callable[[torch.Tensor], torch.Tensor],
    ids: torch.Tensor,
    rel: torch.Tensor,
    attns: list[torch.Tensor],
    probs: torch.Tensor,
    has: torch.Tensor,
    readout: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One test batch's relevant mass [S, N] and sufficiency and comprehensiveness [S, N'] on the examples ``has``
    marks. ``measure = "companion"``: the rollout row of the read-out token, padding masked, k% of the real words
    erased (``faithfulness``). ``"authors"``: as their HateXplain notebooks (cells 55 and 69): the rollout row of the
    last of ``max_len`` positions, padding included and unmasked (``padded_as_readout``), and k% of the padded
    length erased (``authors_faithfulness``); ``readout`` the read-out token's id."""
    S = probs.shape[0]
    if s.measure == "companion":
        att = readout_attention(attns, ids, s.identity_weight)
        suff, comp = faithfulness(
            predict, ids[has].expand(S, -1, -1), att[:, has], s.k_percents, s.erase, full=probs[:, has]
        )
        return relevant_mass(att, rel)[:, has], suff, comp
    padded = padded_as_readout(ids, s.max_len, readout)
    att = readout_attention(classify(params, cfg, padded)[1], padded, s.identity_weight)
    rel = torch.nn.functional.pad(rel, (0, s.max_len - rel.shape[-1]))
    suff, comp = authors_faithfulness(
        lambda x: predict(trim(x)[0]), padded[has], att[:, has], s.k_percents, readout, probs[:, has]
    )
    return relevant_mass(att, rel)[:, has], suff, comp


@torch.no_grad()
def predictions(params: dict[str, torch.Tensor], cfg: ClassifierConfig, split: Encoded, batch: int) -> torch.Tensor:
    """Each seed's predicted class for every example of ``split``: [S, N] on the CPU."""
    dev = params["embed"].device
    return torch.cat(
        [
            classify(params, cfg, trim(split.ids[i : i + batch].to(dev))[0])[0].argmax(-1).cpu()
            for i in range(0, split.ids.shape[0], batch)
        ],
        dim=1,
    )


def accuracy_by_group(params: dict[str, torch.Tensor], data: Prepared, s: RealSetup) -> pd.DataFrame:
    """Per split with groups (held-out, test), group and seed: accuracy and the group's majority-class share, in
    percent, and its size (columns split, group, seed, accuracy, majority, examples; group as text, "all" for the
    whole split, so the table reads back from CSV unchanged). Empty without groups."""
    cfg, rows = model_config(data, s), []
    for name, split in (("held-out", data.heldout), ("test", data.test)):
        if split is None or split.groups is None:
            continue
        correct = (predictions(params, cfg, split, s.eval_batch) == split.labels).numpy()
        groups, labels = split.groups.numpy(), split.labels.numpy()
        for group in np.unique(groups):
            inside = groups == group
            rows += [
                {
                    "split": name,
                    "group": str(group),
                    "seed": seed,
                    "accuracy": 100 * correct[i, inside].mean(),
                    "majority": majority_share(labels[inside]),
                    "examples": int(inside.sum()),
                }
                for i, seed in enumerate(s.seeds)
            ]
        rows += [
            {
                "split": name,
                "group": "all",
                "seed": seed,
                "accuracy": 100 * correct[i].mean(),
                "majority": majority_share(labels),
                "examples": len(labels),
            }
            for i, seed in enumerate(s.seeds)
        ]
    return pd.DataFrame(rows, columns=["split", "group", "seed", "accuracy", "majority", "examples"])


@dataclass
class RealRun:
    """Both conditions' results: per-seed metrics, DTAP maps [seeds, y, x] per condition, training curves (columns
    label, step, epoch, seed, train_nll), accuracy by group (``accuracy_by_group`` plus a condition column), and the
    data both trained and were measured on (``Prepared``, or ``squad_runs.PreparedQA``)."""

    per_seed: pd.DataFrame
    maps: dict[str, np.ndarray]
    curves: pd.DataFrame
    by_group: pd.DataFrame
    data: Any


@dataclass(frozen=True)
class Task:
    """What a real-data run trains and measures: ``train(data, setup, qk_mult, device, progress, desc)`` ->
    (params, curve); ``evaluate(params, data, setup)`` -> (per-seed rows, {"mass", "prob_true"} [S, N]);
    ``by_group(params, data, setup)`` -> accuracy by group, or None."""

    train: Callable
    evaluate: Callable
    by_group: Callable | None = None


def _condition(
    task: Task, data: Any, s: RealSetup, name: str, qk_mult: float, device: torch.device, progress: bool
) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame, pd.DataFrame]:
    """Train and evaluate one condition: per-seed metrics, DTAP maps [seeds, y, x], the training curve and the
    accuracy by group (empty without groups)."""
    params, curve = task.train(data, s, qk_mult, device, progress, desc=name)
    rows, raw = task.evaluate(params, data, s)
    maps = np.stack([dtap_histogram(raw["mass"][i], raw["prob_true"][i], s.bins, s.bins) for i in range(len(s.seeds))])
    by_group = task.by_group(params, data, s) if task.by_group else pd.DataFrame(columns=["split", "group", "seed"])
    return rows.assign(condition=name), maps, curve.assign(label=name), by_group.assign(condition=name)


def run_all(
    data: Any, variants: Sequence[RealSetup], device: torch.device, progress: bool, task: Task | None = None
) -> list[RealRun]:
    """Both conditions of every parameter variant, one stored run per variant, condition and seed
    (``store.Batch``): those the store holds are read, the rest computed as independent tasks over the CPU's worker
    processes (each on one torch thread, so the numbers do not depend on the machine's core count). One RealRun per
    variant. ``task``: what to train and measure (default: the classifiers of this module)."""
    task = task or CLASSIFY
    runs = [
        (j, name, mult, replace(s.for_condition(i > 0), seeds=(seed,)))
        for j, s in enumerate(variants)
        for i, (name, mult) in enumerate(s.conditions())
        for seed in s.seeds
    ]
    pieces = [
        Piece(
            f"{f'variant{j}-' if len(variants) > 1 else ''}{'faster' if mult != 1.0 else 'baseline'}-seed{s.seeds[0]}",
            {**setup_values(s), "condition": name, "qk_mult": mult},
        )
        for j, name, mult, s in runs
    ]
    modules = sorted({__name__, *(f.__module__ for f in (task.train, task.evaluate, task.by_group) if f)})
    batch = Batch(pieces, modules, device)
    todo = batch.missing
    tasks = [(task, data, runs[i][3], runs[i][1], runs[i][2], device, progress) for i in todo]
    batch.compute(_condition, tasks, cpu_workers(device), lambda t, out: {todo[t]: _as_tables(out)})
    stored = batch.tables()
    out = []
    for j, s in enumerate(variants):
        mine = [(runs[i][1], stored[i]) for i in range(len(runs)) if runs[i][0] == j]
        names = [name for name, _ in s.conditions()]
        per = {name: [t for n, t in mine if n == name] for name in names}
        out.append(
            RealRun(
                per_seed=pd.concat([interleave([t["main"] for t in per[n]]) for n in names], ignore_index=True),
                maps={n: np.stack([t["map"].to_numpy() for t in per[n]]) for n in names},
                curves=pd.concat([interleave([t["curve"] for t in per[n]]) for n in names], ignore_index=True),
                by_group=pd.concat([interleave([t["by_group"] for t in per[n]]) for n in names], ignore_index=True),
                data=data,
            )
        )
    return out


def _as_tables(out: tuple[pd.DataFrame, np.ndarray, pd.DataFrame, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """One condition and seed's results (``_condition``) as the stored run's tables."""
    rows, maps, curve, by_group = out
    return {"main": rows, "map": pd.DataFrame(maps[0]), "curve": curve, "by_group": by_group}


CLASSIFY = Task(train_condition, evaluate_condition, accuracy_by_group)


def run_conditions(data: Prepared, s: RealSetup, device: torch.device, progress: bool = True) -> RealRun:
    """Baseline (QK x 1) and faster QK (QK x qk_mult), side by side in two processes on the CPU."""
    return run_all(data, [s], device, progress)[0]
