"""Table 1 and Figure 6 (Section 7): subject-verb agreement (Linzen et al.), a one-layer attention-only model predicting
the verb's number, baseline against faster QK, the subject as the relevant tokens."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.device import pick_device
from ..data import sva
from ..metrics.rationale import authors_k
from ..runs.real_data import RealRun, prepare, run_conditions
from ..runs.real_setup import SMOKE, Prepared, RealSetup

DATASETS = ("sva",)  # its files are part of the chapter's fingerprint
BESIDE = ("official",)  # the authors' setup: its results of this chapter are set beside this run's


@dataclass(frozen=True, kw_only=True)
class Setup(RealSetup):
    """The subject-verb agreement row of Table 1: the real-data setup (``RealSetup``) at its values, and the share of
    the training prefixes held out for accuracy by number of attractors."""

    max_len: int = 64  # prefixes up to the verb, the read-out included
    n_layers: int = 1  # "1-layer attention-only" (Section 7)
    mlp: bool = False  # attention only
    residual: bool = False  # the authors' attention-only layer
    min_freq: int = 2  # rarer words read as <unk>
    lr: float = 1e-5  # base learning rate (Section 7)
    qk_mult: float = 100.0  # QK multiplier (Section 7)
    epochs: int = 15  # the authors' notebooks (the paper states none)
    heldout_fraction: float = 0.1  # of each training file, held out (seeded) for accuracy by attractors
    sentences: str = "prefixes"  # sva.SENTENCES: the prefixes before the verb; "whole": the colorlessgreen sentences
    # with their verb, as the authors train (a named variant of `official`, -p sentences whole)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.heldout_fraction < 1:
            raise ValueError(f"heldout_fraction must lie in (0, 1) (got {self.heldout_fraction!r})")
        if self.sentences not in sva.SENTENCES:
            raise ValueError(f"sentences must be one of {sva.SENTENCES} (got {self.sentences!r})")


PROFILES = {
    "smoke": dict(SMOKE, max_len=32, lr=1e-3),  # default = paper: 15 epochs at 1e-5
    # the authors' SVA notebooks (Baseline_ and Faster_SVA_Train+heatmap+Eval.ipynb, cell 50, In [43]):
    # SGD with momentum 0.99 at 5e-4, batch 32, weight decay 1e-5, 15 epochs (the default), the transformers
    # cosine schedule after a 10% warm-up, seeds 1234-1238; their attention (cell 11, In [11]) has biases on
    # Q, K, V and O; the faster run puts the token and position embeddings and Q, K with their biases at
    # 100x (qk_mult)
    "official": dict(
        seeds=(1234, 1235, 1236, 1237, 1238),
        optimizer="sgd",
        momentum=0.99,
        lr=5e-4,
        batch_size=32,
        weight_decay=1e-5,
        lr_schedule="cosine",
        warmup=0.1,
        biases=True,
        qk_params="wq_wk_bq_bk_embed_pos",
        # their measurement (cells 50 and 56): attention rollout read at the last of 128 padded positions, and
        # comprehensiveness and sufficiency at 5% of that padded length (7 positions, removed), their DTAP bins
        measure="authors",
        max_len=128,
        k_percents=(5.0,),
        bins=(0.0, 0.1, 0.5, 1.0),
    ),
}

# Why this chapter's baseline under `official` stays at the majority class (the page says it below the table).
NOT_LEARNED_UNDER_OFFICIAL = (
    "most likely the number of steps. The offline data are 66,356 prefixes, so the authors' 15 epochs of batch 32 "
    "make about 31,100 steps of plain SGD here, where their 157,721 whole sentences made 73,935. From the authors' "
    "start, which is this book's (normal(0, 0.02) weights, zero biases), the baseline's training loss stays at the "
    "class prior for about that many steps, while the faster condition leaves it within about 6,000. A one-seed "
    "probe (seed 1234, not stored) trained 36 epochs, about 74,600 steps, as many as the authors' run: its baseline's "
    "loss first fell at step 31,080 and its accuracy left the majority class; the whole-sentence variant "
    '(`sentences = "whole"`, 2,310 steps on the offline subset) stays at the majority class in both conditions.'
)

# The authors' stored numbers that this chapter under `official` cannot measure their way on the offline data: no
# reproduction verdict is drawn from them (``real_verdicts.compared``). Their input is the whole sentence, so their
# relevant tokens are the subject and the verb; the offline prefixes end before the verb. Their AC and DTAP shares
# read head 0 alone; this book reads the rollout, the mean over the four heads.
SUBJECT_ALONE = "the subject alone, the offline prefixes ending before the verb; theirs: the subject and the verb"
DIFFERENT_UNDER_OFFICIAL = {
    "MRTA": SUBJECT_ALONE,
    "AC": "the mean over heads on the subject alone; theirs: head 0 on the subject and the verb",
    "above_10": "the mean over heads on the subject alone; theirs: head 0 on the subject and the verb",
}


def erasure(setup: Setup) -> str:
    """How this run keeps or removes tokens for sufficiency and comprehensiveness, in words (for the page): the
    authors' one share of the padded length (``measure``), or the companion's shares of each sentence's words."""
    if setup.measure == "authors":
        k = ", ".join(f"{authors_k(p, setup.max_len)} of the {setup.max_len}" for p in setup.k_percents)
        return f"this run does the same ({k} padded positions the read-out attends to most)"
    shares = ", ".join(f"{p:g}" for p in setup.k_percents)
    return f"this run averages over shares of {shares}% of each sentence's words"


def data(setup: Setup) -> Prepared:
    """The number-prediction prefixes and the colorlessgreen test sentences, encoded, with a held-out split."""
    splits, info = sva.load(
        download=setup.download,
        heldout_fraction=setup.heldout_fraction,
        seed=setup.data_seed,
        sentences=setup.sentences,
    )
    return prepare(splits, info, sva.CLASSES, setup)


def run(setup: Setup, *, device: torch.device | None = None, progress: bool = True) -> RealRun:
    """Both conditions on the chapter's data (``data``), side by side on the CPU's cores; the run carries the data.
    ``device`` None: ``pick_device()``."""
    return run_conditions(data(setup), setup, pick_device() if device is None else device, progress)
