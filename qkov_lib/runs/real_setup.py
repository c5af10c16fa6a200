"""Section 7's real-data setup, typed and checked: what a run of Table 1 (HateXplain, SVA) or of SQuAD trains and
measures (``RealSetup``), a dataset ready to train on (``Prepared``), and the smoke profile's sizes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from ..core.validation import require_seeds
from ..data.text import Encoded, Vocab
from ..metrics import check_bins
from ..metrics.rationale import ERASE_MODES
from ..metrics.stats import Majority
from ..models.transformer import ClassifierConfig, check_shape
from ..train.optim import RateSchedule, check_rate
from ..train.training import FROZEN, TrainConfig, check_loop, check_optimiser_and_stop

UNANNOTATED = ("skip", "zero")  # what the attention measures do with a test example without relevant tokens
# where attention is read and how words are erased: at the read-out token, padding masked, k% of the words
# (companion); or as the authors' HateXplain notebooks do (authors: ``evaluate_condition``)
MEASURES = ("companion", "authors")


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
    PAGE_FIELDS: ClassVar[tuple[str, ...]] = ("download",)  # where the data comes from, not what it is (its key)
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
    causal: bool = False  # each position attends to those before it only (the paper states none; the authors' do)
    epochs: int  # passes over the training set (the authors'; the paper states none)
    evals_per_epoch: int = 2  # read-outs of the training loss per epoch
    eval_batch: int = 256  # examples per evaluation batch (changes no number)
    identity_weight: float = 0.0  # attention rollout's residual weight (Abnar & Zuidema; 0 with one layer)
    k_percents: tuple[float, ...] = (1.0, 5.0, 10.0, 20.0, 50.0)  # ERASER's top-k% (AOPC over these; App. D.6)
    erase: str = "remove"  # how ERASER drops words: removed, order kept
    measure: str = "companion"  # MEASURES: the companion's reading of attention and erasure, or the authors'
    threshold: float = 0.5  # AC: attention on relevant tokens above this (App. D.6)
    confidence: float = 0.5  # ACMC: and true-class probability above this (App. D.6)
    unannotated: str = "skip"  # test examples without relevant tokens: left out of the attention measures (skip), or
    # measured with no attention on relevant tokens (zero: the authors' HateXplain notebooks average over every post)
    bins: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # DTAP bin edges, 5 x 5 as Figure 2

    def __post_init__(self) -> None:
        require_seeds(self.seeds)
        if self.erase not in ERASE_MODES:
            raise ValueError(f"erase must be one of {ERASE_MODES} (got {self.erase!r})")
        if self.measure not in MEASURES:
            raise ValueError(f"measure must be one of {MEASURES} (got {self.measure!r})")
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
        check_shape(self)
        check_optimiser_and_stop(self, ("batch_size", "accumulate"))
        check_rate("lr", self.lr)
        check_rate("qk_mult", self.qk_mult)
        check_loop(self)
        if not (self.faster_weight_decay is None or self.faster_weight_decay >= 0):
            raise ValueError(
                f"faster_weight_decay must be >= 0, or None for weight_decay (got {self.faster_weight_decay!r})"
            )
        if not (self.faster_frozen is None or self.faster_frozen in FROZEN):
            raise ValueError(
                f"faster_frozen must be one of {', '.join(FROZEN)}, or None for frozen (got {self.faster_frozen!r})"
            )
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
            causal=self.causal,
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
