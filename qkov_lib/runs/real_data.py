"""Section 7 on real data: load and encode a dataset, train a baseline and a faster-QK classifier (all seeds at
once), and measure accuracy, MRTA, AC, ACMC, sufficiency and comprehensiveness per seed (Table 1), and accuracy by
group (SVA: by number of attractors)."""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.stats import binomtest

from ..core.device import cpu_workers
from ..core.validation import require_seeds
from ..core.workers import run_independent
from ..data import authors
from ..data.text import Encoded, TextSplit, Vocab, encode, unknown_rate
from ..metrics import check_bins, dtap_histogram, mean_ci, paired_effects
from ..metrics.official import AUTHORS_SCALE as AUTHORS_SCALE  # re-exported: the sizes the guard knows
from ..metrics.official import OFFICIAL as OFFICIAL
from ..metrics.official import Guard, OfficialUnit, departures, full_size_command, official_unit
from ..metrics.rationale import ERASE_MODES, faithfulness, mass_metrics, readout_attention, relevant_mass
from ..metrics.verdicts import (
    NOT_EVIDENCE,
    PERCENT,
    Claim,
    Interval,
    above,
    at_least,
    below,
    beside_official,
    claim_table,
    not_evidence,
    rule,
)
from ..models.transformer import ClassifierConfig, classify, init_classifier, trim
from ..present.table1 import DIGITS, TABLE_METRICS, interval_words
from ..train.optim import RateSchedule
from ..train.training import FixedSetBatches, TrainConfig, train

UNANNOTATED = ("skip", "zero")  # what the attention measures do with a test example without relevant tokens


@dataclass
class Prepared:
    """A dataset ready to train on: encoded splits, the vocabulary, class names and a provenance record."""

    train: Encoded
    test: Encoded
    vocab: Vocab
    classes: tuple[str, ...]
    info: dict[str, Any]
    heldout: Encoded | None = None

    @property
    def majority(self) -> Majority:
        """Always predicting the test set's most frequent class, as counts: what a model must beat before its
        attention says anything about the claims (``why_not_learned``)."""
        return Majority.of(self.test.labels.numpy())


@dataclass(frozen=True, kw_only=True)
class RealSetup:
    """A real-data chapter's parameters, typed and checked as they are built (Section 7, Table 1): the seeds; the
    data (download, subsets, vocabulary floor, length); the transformer; training (optimiser, base rate, the faster
    condition's QK multiplier, batch, weight decay on every circuit, epochs, read-outs per epoch); the metrics
    (evaluation batch, rollout identity weight, erasure, AC's attention and confidence thresholds, DTAP bins). A
    chapter's setup gives the fields without a default here (its dataset's values in the paper) and adds its own."""

    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)  # "5 runs" (Figures 5-7): model initialisation and batch order
    download: bool = True  # fetch the canonical release when no offline copy is named
    max_train: int | None = None  # a seeded subset of the training examples (None: all)
    max_test: int | None = None  # a seeded subset of the test examples (None: all)
    data_seed: int = 0  # the subsets, splits and read-out probe
    min_freq: int = 1  # words seen fewer times in training read as <unk>
    max_len: int  # tokens per example, the read-out included
    d_model: int = 64  # the authors' model (the paper states none)
    n_heads: int = 4  # the authors' heads
    d_head: int = 64  # the authors' head size
    n_layers: int  # "1-layer" (Section 7)
    mlp: bool  # whether a block has an MLP
    d_mlp: int = 256  # the authors' MLP width
    residual: bool  # whether a block adds its input back
    optimizer: str = "adamw"  # "AdamW" (Section 7)
    lr: float  # the base learning rate (Section 7, per dataset)
    qk_mult: float  # the faster condition's QK multiplier (Section 7, per dataset)
    batch_size: int = 32  # the authors' batch
    weight_decay: float = 1e-4  # AdamW's decoupled decay on every parameter (the authors')
    momentum: float = 0.0  # SGD's momentum (the paper states none)
    lr_schedule: str = "constant"  # training.LR_SCHEDULES; the paper states no schedule
    warmup: float = 0.0  # share of the optimiser steps warming up (cosine) or rising (onecycle)
    clip_norm: float | None = None  # each seed's gradient clipped to this global norm (the paper states none)
    accumulate: int = 1  # mini-batches per optimiser step (the paper states none)
    label_smoothing: float = 0.0  # of the training loss only (the paper states none)
    qk_params: str = "wq_wk"  # what trains at the QK rate (training.QK_PARAMS): W_Q and W_K (Section 7)
    embed_mult: float = 1.0  # the token embedding's rate x the base rate, outside the QK set (the paper: none)
    embed_decay: float | None = None  # the token embedding's weight decay (None: weight_decay)
    frozen: str = "none"  # parameters neither condition trains (training.FROZEN)
    faster_weight_decay: float | None = None  # the faster condition's (None: weight_decay; Section 7: only QK)
    faster_frozen: str | None = None  # parameters the faster condition leaves untrained (None: frozen)
    activation: str = "relu"  # the MLP's nonlinearity (models.transformer.ACTIVATIONS); the paper states none
    biases: bool = False  # biases on Q, K, V, O and the MLP (the paper states none)
    epochs: int  # passes over the training set (the authors'; the paper states none)
    evals_per_epoch: int = 2  # read-outs of the training loss per epoch
    eval_batch: int = 256  # examples per evaluation batch (changes no number)
    identity_weight: float = 0.0  # attention rollout's residual weight (Abnar & Zuidema; 0 with one layer)
    k_percents: tuple[float, ...] = (1.0, 5.0, 10.0, 20.0, 50.0)  # ERASER's top-k% (AOPC over these; App. D.6)
    erase: str = "remove"  # how ERASER drops words: removed, order kept
    threshold: float = 0.5  # AC: attention on relevant tokens above this (App. D.6)
    confidence: float = 0.5  # ACMC: and true-class probability above this (App. D.6)
    unannotated: str = "skip"  # test examples without relevant tokens: left out of the attention measures (skip), or
    # measured with no attention on relevant tokens (zero: the authors' HateXplain notebooks average over every post)
    bins: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # DTAP bin edges, 5 x 5 as Figure 2

    def __post_init__(self) -> None:
        require_seeds(self.seeds)
        if self.erase not in ERASE_MODES:
            raise ValueError(f"erase must be one of {ERASE_MODES} (got {self.erase!r})")
        if self.unannotated not in UNANNOTATED:
            raise ValueError(f"unannotated must be one of {UNANNOTATED} (got {self.unannotated!r})")
        for name in ("max_train", "max_test"):
            if not (getattr(self, name) is None or getattr(self, name) >= 1):
                raise ValueError(f"{name} must be an integer >= 1, or None for all (got {getattr(self, name)!r})")
        if not (0 <= self.identity_weight < 1 and 0 < self.threshold < 1 and 0 < self.confidence < 1):
            raise ValueError(
                "identity_weight must lie in [0, 1), threshold and confidence in (0, 1) (got "
                f"{self.identity_weight}, {self.threshold}, {self.confidence})"
            )
        if not (self.k_percents and all(0 < k <= 100 for k in self.k_percents)):
            raise ValueError(f"k_percents must be non-empty, each in (0, 100] (got {list(self.k_percents)!r})")
        if not (self.epochs >= 1 and self.evals_per_epoch >= 1):
            raise ValueError(
                f"epochs and evals_per_epoch must be integers >= 1 (got {self.epochs!r}, {self.evals_per_epoch!r})"
            )
        if not 0 <= self.label_smoothing < 1:
            raise ValueError(f"label_smoothing must lie in [0, 1) (got {self.label_smoothing!r})")
        self.model(vocab=10, n_classes=2)
        self.train_config(self.qk_mult, per_epoch=self.accumulate)
        self.for_condition(True).train_config(self.qk_mult, per_epoch=self.accumulate)
        check_bins(list(self.bins))
        if self.max_len < 2:
            raise ValueError(f"max_len must be >= 2 (got {self.max_len})")

    def model(self, vocab: int, n_classes: int) -> ClassifierConfig:
        """The classifier for a vocabulary and class count (checks the sizes)."""
        return ClassifierConfig(
            vocab=vocab,
            n_classes=n_classes,
            max_len=self.max_len,
            d_model=self.d_model,
            n_heads=self.n_heads,
            d_head=self.d_head,
            n_layers=self.n_layers,
            mlp=self.mlp,
            d_mlp=self.d_mlp,
            residual=self.residual,
            activation=self.activation,
            biases=self.biases,
        )

    def train_config(self, qk_mult: float, per_epoch: int) -> TrainConfig:
        """The training loop of one condition: the ``qk_params`` set (default W_Q and W_K only) at ``qk_mult`` x the
        base rate, weight decay on every circuit, ``epochs`` x ``per_epoch`` mini-batch steps, ``evals_per_epoch``
        read-outs of the loss per epoch; the optimiser, schedule, clipping, accumulation and groups as set."""
        return TrainConfig(
            RateSchedule(self.lr, qk_mult=qk_mult),
            batch_size=self.batch_size,
            optimizer=self.optimizer,
            weight_decay=self.weight_decay,
            max_steps=self.epochs * per_epoch,
            eval_every=max(1, per_epoch // self.evals_per_epoch),
            momentum=self.momentum,
            lr_schedule=self.lr_schedule,
            warmup=self.warmup,
            clip_norm=self.clip_norm,
            accumulate=self.accumulate,
            qk_params=self.qk_params,
            frozen=self.frozen,
            embed_mult=self.embed_mult,
            embed_decay=self.embed_decay,
        )

    def for_condition(self, faster: bool) -> RealSetup:
        """This setup for the baseline (itself) or the faster condition: the faster one with its own weight decay
        and frozen parameters where ``faster_weight_decay`` / ``faster_frozen`` are set (the authors' HateXplain
        runs change both; Section 7 changes only the QK rate)."""
        if not faster or (self.faster_weight_decay is None and self.faster_frozen is None):
            return self
        return replace(
            self,
            faster_weight_decay=None,
            faster_frozen=None,
            weight_decay=self.weight_decay if self.faster_weight_decay is None else self.faster_weight_decay,
            frozen=self.frozen if self.faster_frozen is None else self.faster_frozen,
        )

    def conditions(self) -> list[tuple[str, float]]:
        """Table 1's two conditions: (name, QK multiplier)."""
        return [("baseline", 1.0), (f"faster QK (x{self.qk_mult:g})", self.qk_mult)]


SMOKE = dict(seeds=(0, 1), max_train=200, max_test=100, epochs=1, d_model=16, d_head=8, d_mlp=32)  # seconds a run


def majority_share(labels: np.ndarray) -> float:
    """The accuracy, in percent, of always predicting the most frequent class."""
    return 100 * np.bincount(labels).max() / len(labels)


@dataclass(frozen=True)
class Majority:
    """The trivial baseline of a classifier: always predicting the test set's most frequent class gets ``count`` of
    its ``examples`` right. Counts, so that a model's test predictions are compared with it exactly."""

    count: int
    examples: int

    @classmethod
    def of(cls, labels: np.ndarray) -> Majority:
        return cls(int(np.bincount(labels).max()), len(labels))

    @property
    def share(self) -> float:
        """The baseline's accuracy in percent, for reading."""
        return 100 * self.count / self.examples


LEARNED_ALPHA = 0.05  # the level of the one-sided exact binomial test of each seed against the majority share


def why_not_learned(per_seed: pd.DataFrame, majority: Majority, alpha: float = LEARNED_ALPHA) -> str | None:
    """Why one condition's models did not learn the task, in words, or None if they did.

    The rule (a model that did not learn is never evidence): a seed's model counts as learned only if

    1. it predicts more than one class over the test set (``predicted_classes`` > 1): a model that gives one class
       for every input has learned nothing about its input, whatever its accuracy; and
    2. its number of correct test predictions (``correct`` of ``examples``, integers) beats always predicting the
       majority class by a one-sided exact binomial test at level ``alpha``: under the null hypothesis each
       prediction is right with probability ``majority.count / majority.examples``, and the seed passes when
       P(X >= correct) < alpha (``scipy.stats.binomtest``, alternative 'greater').

    A condition counts as learned only if every one of its seeds does: the claims pair the two conditions seed by
    seed, and a pair with an untrained model says nothing. Counts, not accuracies: an accuracy computed in float32
    can land a hair above the majority share for a model that predicts the majority class for every input."""
    if not (per_seed["examples"] == majority.examples).all():
        raise ValueError(
            f"the per-seed results count {sorted(set(per_seed['examples']))} test examples, the "
            f"majority baseline {majority.examples}: they must be the same test set"
        )
    failed = []
    for _, r in per_seed.iterrows():
        seed, correct, n = int(r["seed"]), int(r["correct"]), int(r["examples"])
        if int(r["predicted_classes"]) <= 1:
            failed.append(f"seed {seed} predicts one class for every test example")
            continue
        p = binomtest(correct, n, majority.count / n, alternative="greater").pvalue
        if not p < alpha:
            failed.append(
                f"seed {seed}'s {correct} of {n} correct does not beat the majority class's "
                f"{majority.count} (one-sided exact binomial p = {p:.2g}, not below {alpha:g})"
            )
    return "; ".join(failed) or None


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
        att = readout_attention(attns, ids, s.identity_weight)
        S = att.shape[0]
        parts["mass"].append(relevant_mass(att, rel)[:, has])
        parts["prob"].append(probs.gather(-1, y.expand(S, -1)[..., None]).squeeze(-1)[:, has])
        if has.any():
            suff, comp = faithfulness(
                predict, ids[has].expand(S, -1, -1), att[:, has], s.k_percents, s.erase, full=probs[:, has]
            )
            parts["suff"].append(suff)
            parts["comp"].append(comp)
    cat = {k: torch.cat(v, dim=1).cpu() for k, v in parts.items() if v}
    if "mass" not in cat or cat["mass"].shape[1] == 0:
        raise ValueError("no test example has relevant tokens (after truncation to max_len); nothing to measure")
    masses = mass_metrics(cat["mass"], cat["prob"], s.threshold, s.confidence)
    masses |= {f"above_{round(100 * t)}": 100 * (cat["mass"] >= t).float().mean(-1) for t in SHARES}
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


def reduction(module: types.ModuleType, parameters: Mapping[str, Any] | None) -> str | None:
    """Why an official run of a chapter ``module`` with these ``parameters`` (``Chapter.params``, or a unit's
    metadata) is not the authors' experiment, in words (``official.departures``: any override of the official
    profile, every size it scales down, or parameters not recorded); None when it is theirs."""
    return ", ".join(departures(module, parameters)) or None


@dataclass(frozen=True)
class OfficialRun:
    """A run of a chapter under the ``official`` profile (the authors' setup): its per-seed results, whether
    its models are evidence (no claim of the run reads 'not evidence'), and why it is not the authors' experiment
    (``reduction``; None: it is)."""

    per_seed: pd.DataFrame
    evidence: bool
    reduced: str | None = None

    @property
    def comparable(self) -> bool:
        """Whether its numbers may be set against the authors': its models learned and it is their experiment."""
        return self.guard.comparable

    @property
    def guard(self) -> Guard:
        """Its guard (``official.Guard``): the departures and whether its models learned."""
        return Guard(
            (self.reduced,) if self.reduced else (), "" if self.evidence else "its models did not learn the task"
        )


def official_run(
    module: types.ModuleType,
    profile: str,
    per_seed: pd.DataFrame | None = None,
    claims: pd.DataFrame | None = None,
    root: Path | None = None,
    depth: int | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> OfficialRun | None:
    """A real-data chapter's run under ``official`` (``official.official_unit``, the path the summary reads it by
    too): this run's ``per_seed`` and ``claims`` with its ``parameters`` (``Chapter.params``) when it runs under
    ``official`` itself, else the unit ``<root>/official/<chapter>``; None when there is none. ``depth``: only that
    depth's rows and claims (Table 5's chapter)."""
    here = {"per_seed": per_seed, "claims": claims} if per_seed is not None and claims is not None else None
    unit = official_unit(module, profile, here, parameters, root)
    return None if unit is None else official_from(unit, depth)


def official_from(unit: OfficialUnit, depth: int | None = None) -> OfficialRun | None:
    """An official unit's per-seed rows and guard as an ``OfficialRun`` (``depth``: that depth's rows and claims
    only); None when it has no rows (of that depth)."""
    if "per_seed" not in unit.tables or "claims" not in unit.tables:
        return None
    rows, verdicts = unit.tables["per_seed"], unit.tables["claims"]
    if depth is not None:
        rows = rows[rows["layers"] == depth] if "layers" in rows else rows
        verdicts = verdicts[verdicts["id"].str.startswith(f"{depth}_layers_")]
    if rows.empty:
        return None
    reduced = ", ".join(unit.guard.departures) or None
    return OfficialRun(rows, evidence=not (verdicts["verdict"] == NOT_EVIDENCE).any(), reduced=reduced)


def official_note(module: types.ModuleType, official: OfficialRun | None) -> str:
    """What a page says below its table beside the authors' numbers when no verdict is drawn from its official run
    (why, and the command that runs the authors' experiment); '' otherwise."""
    return "" if official is None else official.guard.note(full_size_command(module))


def compared(per_seed: pd.DataFrame | None, stored: str, official: OfficialRun | None = None) -> pd.DataFrame:
    """The paper, the authors' notebooks as stored, this run and this book under ``official``, side by side
    (``authors.three_way``), for every number the CSV holds for chapter ``stored`` (keys
    '<stored>.<metric>.<baseline|faster>'), with a verdict on whether ``official`` gives the authors' number back
    (``verdicts.beside_official``, the rule ``verdicts.REPRODUCTION_RULE``). A run's number: the mean over seeds and
    its 95% interval of its first (baseline) or second (faster-QK) condition (a percentage's within [0, 100]),
    '12.3 [10.1, 14.5] %' with non-breaking spaces inside the interval, or 'not run' (``per_seed`` or ``official``
    None: a depth or profile not run). Several quantities: indexed by (quantity, condition), each quantity named
    once over its conditions' rows."""
    rows = authors.table()
    keys = list(rows.index[rows["chapter"] == stored])
    if not keys:
        raise ValueError(f"the authors' stored numbers hold no key for {stored!r}")

    def values(run: pd.DataFrame) -> dict[str, list[float]]:
        """Each key's per-seed values, for the keys whose condition and measure the run has."""
        conditions = dict(zip(("baseline", "faster"), run["condition"].unique()))
        found = {}
        for key in keys:
            _, metric, condition = key.rsplit(".", 2)
            if condition in conditions and metric in run:
                found[key] = list(run.loc[run["condition"] == conditions[condition], metric])
        return found

    def intervals(run: pd.DataFrame | None) -> dict[str, Interval] | None:
        """Each key's interval over the run's seeds (``values``)."""
        if run is None:
            return None
        return {k: Interval.of(v, PERCENT if rows.loc[k, "unit"] == "%" else None) for k, v in values(run).items()}

    def text(key: str) -> Callable[[Interval], str]:
        unit = " %" if rows.loc[key, "unit"] == "%" else ""
        digits = DIGITS.get(key.rsplit(".", 2)[1], 1)
        # breaks only before the interval
        return lambda i: (interval_words(i, digits) + unit).replace(", ", ",\u00a0").replace(" %", "\u00a0%")

    texts = {key: text(key) for key in keys}
    ours = intervals(per_seed) or {}
    table = authors.three_way({key: texts[key](ours[key]) if key in ours else "not run" for key in keys})
    table = beside_official(
        table,
        keys,
        intervals(official.per_seed) if official else None,
        texts,
        evidence=official is not None and official.comparable,
        samples=values(official.per_seed) if official else None,
    )
    if "quantity" in table.columns:  # several quantities: each named once, over its conditions' rows
        table = table.set_index("quantity", append=True).swaplevel()
    return table


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
    """Both conditions of every parameter variant, as independent tasks over the CPU's worker processes (each on
    one torch thread, so the numbers do not depend on the machine's core count): one RealRun per variant.
    ``task``: what to train and measure (default: the classifiers of this module)."""
    task = task or CLASSIFY
    tasks = [
        (task, data, s.for_condition(i > 0), name, mult, device, progress)
        for s in variants
        for i, (name, mult) in enumerate(s.conditions())
    ]
    done = iter(run_independent(_condition, tasks, cpu_workers(device)))
    runs = []
    for s in variants:
        pairs = [(name, next(done)) for name, _ in s.conditions()]
        runs.append(
            RealRun(
                per_seed=pd.concat([d[0] for _, d in pairs], ignore_index=True),
                maps={name: d[1] for name, d in pairs},
                curves=pd.concat([d[2] for _, d in pairs], ignore_index=True),
                by_group=pd.concat([d[3] for _, d in pairs], ignore_index=True),
                data=data,
            )
        )
    return runs


CLASSIFY = Task(train_condition, evaluate_condition, accuracy_by_group)


def run_conditions(data: Prepared, s: RealSetup, device: torch.device, progress: bool = True) -> RealRun:
    """Baseline (QK x 1) and faster QK (QK x qk_mult), side by side in two processes on the CPU."""
    return run_all(data, [s], device, progress)[0]


ACC_SLACK = 1.0  # "performance unchanged": the task metric at most this many points lower on average


def claims(
    per_seed: pd.DataFrame,
    performance: str = "accuracy",
    floor: Majority | float | None = None,
    floor_name: str = "always predicting the majority class",
    stored: str | None = None,
) -> pd.DataFrame:
    """Section 7 / Table 1, baseline against faster QK, paired by seed: the task metric (``performance``: accuracy,
    or F1 for SQuAD) comparable (its 95% interval at least ACC_SLACK points below 0 at worst); AC and ACMC up,
    sufficiency down, comprehensiveness up (the interval of the paired difference on the claimed side of 0). When a
    condition's models do not beat ``floor``, every claim is 'not evidence': a model that has not learned the task
    says nothing about where attention goes. ``floor`` is the majority class (``Majority``: a classifier, judged on
    counts by ``why_not_learned``, every seed against it) or a number (a score that is no count of correct
    predictions, such as SQuAD's F1: the 95% interval over seeds of ``performance`` must lie above it). ``stored``
    names the chapter's keys in the authors' stored numbers (``data.authors``: '<stored>.<metric>.baseline|faster').
    """
    base, _faster = per_seed["condition"].unique()[:2]
    e = paired_effects(
        per_seed, base, [performance, "AC", "ACMC", "sufficiency", "comprehensiveness"], by="condition"
    ).set_index("metric")

    def change(metric: str) -> Interval:
        r = e.loc[metric]
        return Interval(r["effect"], r["ci_low"], r["ci_high"], int(r["seeds"]))

    def text(metric: str) -> str:
        r, digits = e.loc[metric], 3 if metric in ("sufficiency", "comprehensiveness") else 1
        return f"{r['baseline']:.{digits}f} → {r['with change']:.{digits}f}, change {change(metric).text(digits, True)}"

    def theirs(metric: str) -> str:
        keys = [k for k in (f"{stored}.{metric}.baseline", f"{stored}.{metric}.faster") if k in authors.table().index]
        return authors.summary(keys) if stored and keys else ""

    perf = change(performance)
    rows = [
        Claim(
            f"{performance}_comparable",
            f"Faster query-key learning leaves {performance} unchanged (or better).",
            text(performance),
            at_least(perf, -ACC_SLACK),
            rule("at least", performance, f"-{ACC_SLACK:g} point", paired=True),
            *perf.numbers,
            authors=theirs(performance),
        )
    ]
    words = {
        "AC": "more test examples put most of their attention on the relevant tokens (AC)",
        "ACMC": "more test examples attend mostly to the relevant tokens and predict correctly (ACMC)",
        "sufficiency": "the relevant tokens alone carry more of the prediction (sufficiency falls)",
        "comprehensiveness": "removing the relevant tokens hurts the prediction more (comprehensiveness rises)",
    }
    for metric, up in (("AC", True), ("ACMC", True), ("sufficiency", False), ("comprehensiveness", True)):
        c = change(metric)
        rows.append(
            Claim(
                f"{metric}_{'rises' if up else 'falls'}",
                f"With faster query-key learning, {words[metric]}.",
                text(metric),
                above(c, 0.0) if up else below(c, 0.0),
                rule("above" if up else "below", metric, "0", paired=True),
                *c.numbers,
                authors=theirs(metric),
            )
        )
    table = claim_table(rows)
    if floor is None:
        return table
    if performance == "accuracy" and not isinstance(floor, Majority):
        raise ValueError(
            "an accuracy floor is the majority class as counts (Majority, e.g. Prepared.majority), "
            f"compared exactly with each seed's correct predictions (got {floor!r})"
        )
    for cond, part in per_seed.groupby("condition", sort=False):
        if isinstance(floor, Majority):
            why = why_not_learned(part, floor)
            if why:
                return not_evidence(
                    table,
                    f"the {cond} models do not beat {floor_name} ({floor.count} of "
                    f"{floor.examples}, {floor.share:.1f}%) on every seed: {why}",
                )
            continue
        score = Interval.of(part[performance])
        if not score.low > floor:
            return not_evidence(
                table, f"the {cond} model's {performance} ({score.text()}) does not beat {floor_name} ({floor:.1f})"
            )
    return table
