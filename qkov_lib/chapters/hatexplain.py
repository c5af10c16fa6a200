"""Table 1 and Figure 7 (Section 7): HateXplain, a one-layer transformer classifying posts, baseline against faster QK,
the annotators' rationales as the relevant tokens."""

from __future__ import annotations

import types
from dataclasses import dataclass, replace
from typing import Any

import torch

from ..core.device import pick_device
from ..data import hatexplain, wordpiece
from ..metrics.rationale import authors_k
from ..runs.real_data import RealRun, prepare, run_all
from ..runs.real_setup import SMOKE, Prepared, RealSetup
from ..runs.store_data import kept, loaded

DATASETS = ("hatexplain",)  # its files are part of the chapter's fingerprint
BESIDE = ("official",)  # the authors' setup: its results of this chapter are set beside this run's


@dataclass(frozen=True, kw_only=True)
class Setup(RealSetup):
    """HateXplain's row of Table 1: the real-data setup (``RealSetup``) at HateXplain's values, and which annotators'
    rationales count as relevant."""

    rationale_rule: str = "union"  # relevant tokens: any annotator's rationale (the ERASER files); "mean": the authors'
    tokens: str = "words"  # a post's tokens: its words (the paper states none); "wordpiece": the authors' BERT pieces
    max_len: int = 128  # the authors' BERT length (the paper states none)
    n_layers: int = 1  # "1-layer" (Section 7)
    mlp: bool = True  # the authors' block: attention and MLP
    residual: bool = True  # the authors' block adds its input back
    lr: float = 5e-5  # base learning rate (Section 7)
    qk_mult: float = 30.0  # QK multiplier (Section 7)
    epochs: int = 30  # the authors' notebooks (the paper states none)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rationale_rule not in hatexplain.RATIONALE_RULES:
            raise ValueError(
                f"rationale_rule must be one of {hatexplain.RATIONALE_RULES} (got {self.rationale_rule!r})"
            )
        if self.tokens not in wordpiece.TOKENS:
            raise ValueError(f"tokens must be one of {wordpiece.TOKENS} (got {self.tokens!r})")


PROFILES: dict[str, dict[str, Any]] = {
    "default": dict(max_len=64, lr=1e-3, epochs=3),
    "smoke": dict(SMOKE, max_len=32, lr=1e-3),
    # the authors' 1-layer notebooks, cell 61 (HateXplain_Same_LR_Final_Config.ipynb, In [46], and
    # HateXplain_Faster_QK_LR_Final_Config.ipynb, In [46]): AdamW 5e-5 (the default) with the transformers
    # cosine schedule after a 10% warm-up, gradient clipping at 1.0, 30 epochs of batch 32 (the defaults),
    # seeds 1234-1238; their model (cells 15-18, In [12]-[14]): biases on Q, K, V, O and the MLP, GELU
    # (gelu_new) in the MLP. The faster run: W_Q, W_K and the token embedding at 30x (b_Q, b_K and the
    # positions at 1x), weight decay 1e-3 (the baseline's 1e-4), the MLP left out of the optimiser. Their
    # rationale metric (cells 27, In [20], and 55, In [44]): relevance the mean of the three annotators'
    # masks (a mask of zeros for an annotator who marked nothing), measured on every test post (cells 69,
    # In [50], and 67, In [55]: a post without rationales at mass 0)
    "official": dict(
        seeds=(1234, 1235, 1236, 1237, 1238),
        lr_schedule="cosine",
        warmup=0.1,
        clip_norm=1.0,
        activation="gelu_tanh",
        biases=True,
        qk_params="wq_wk_embed",
        faster_weight_decay=1e-3,
        faster_frozen="mlp",
        rationale_rule="mean",
        unannotated="zero",
        # their tokeniser: bert-base-uncased WordPieces of length 128, [CLS] first and [SEP] last
        tokens="wordpiece",
        causal=True,  # their model's causal mask (no effect with one layer: the read-out sees every word either way)
        # their measurement (cells 22, 55 and 69): attention read at the last padded position, padding unmasked
        # (their padding is their read-out); 5% of the padded length (7 of 128 positions) erased
        measure="authors",
        k_percents=(5.0,),
    ),
}


def relevance_words(setup: Setup) -> str:
    """What counts as a post's relevant words under this setup, in words (for the page)."""
    return hatexplain.RULE_WORDS[setup.rationale_rule]


def token_words(setup: Setup) -> str:
    """What a post's tokens are under this setup, in words (for the page)."""
    return hatexplain.TOKEN_WORDS[setup.tokens]


def measured_posts(setup: Setup) -> str:
    """The test posts the attention measures average over, in words (for the page)."""
    if setup.unannotated == "zero":
        return "every test post (one without rationales, as the posts labelled normal, has no attention on them)"
    return "the test posts with rationales (posts labelled normal have none)"


def reading(setup: Setup) -> str:
    """Where this run reads attention and how it erases words for sufficiency and comprehensiveness, in words (for
    the page): the companion's measurement, or the authors' (``measure``)."""
    if setup.measure == "authors":
        k = ", ".join(f"{authors_k(p, setup.max_len)} of the {setup.max_len}" for p in setup.k_percents)
        return (
            f"the authors' way: every post is padded to {setup.max_len} positions with the read-out token "
            "(their padding is their read-out), attention is read at the last position with "
            "nothing masked, and sufficiency and comprehensiveness keep alone, or remove, the "
            f"{k} padded positions the read-out attends to most, padding included (the model itself trains with "
            "padding masked)"
        )
    shares = ", ".join(f"{p:g}" for p in setup.k_percents)
    return (
        "the companion's way: attention is read at the read-out token after the last word, padding masked, "
        "and sufficiency and comprehensiveness keep alone, or remove (the others in their order), the most-attended "
        f"words, averaged over {shares}% of the post's words"
    )


def readings(setup: Setup, chapter: types.ModuleType) -> str:
    """How the column "this run" (``setup``) and the column "this book under official" (``chapter``'s ``official``
    profile: this chapter or ``hatexplain_layers``) read attention, in sentences for the page: one sentence when both
    read it alike (a run under ``official`` itself)."""
    mine, official = reading(setup), reading(chapter.Setup(**chapter.PROFILES["official"]))
    if mine == official:
        return f'Both columns, "this run" and "this book under official", measure attention {mine}.'
    return (
        f'The column "this run" measures attention {mine}. '
        f'The column "this book under official" measures it {official}.'
    )


def data(setup: Setup) -> Prepared:
    """HateXplain's official splits, encoded (offline copies, the cache, or a download)."""
    splits, info = hatexplain.load(setup.rationale_rule, download=setup.download, tokens=setup.tokens)
    return prepare(splits, info, hatexplain.CLASSES, setup)


def run(setup: Setup, *, device: torch.device | None = None, progress: bool = True) -> RealRun:
    """Both conditions on the chapter's data (``data``), side by side on the CPU's cores; the run carries what the
    page reads of the data (``real_facts.DataFacts``), so the store alone makes the page where the data is not here.
    ``device`` None: ``pick_device()``."""
    prepared = loaded(lambda: data(setup))
    facts = kept(prepared, setup, {"main": setup})
    return replace(run_all(prepared, [setup], pick_device() if device is None else device, progress)[0], data=facts)
