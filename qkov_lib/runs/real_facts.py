"""What a real-data page reads of its dataset (Section 7), kept in the results store beside the runs: the data's
provenance and sizes, the majority class's counts, the training examples (an epoch's steps), SQuAD's fixed-span
baseline, and the MRTA of attention that learned nothing (``metrics.uniform``). So a page is made from the store on
a machine without the dataset; only computing these facts, or a run, needs it (``store_data``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from ..metrics.stats import Majority
from ..metrics.uniform import uniform_mrta
from .real_setup import Prepared, RealSetup


@dataclass(frozen=True)
class DataFacts:
    """A dataset as a page reads it: ``info`` (the loader's provenance and the sizes, ``real_data.prepare``), the
    test set's majority class (None for SQuAD's spans), the training examples, SQuAD's fixed-span baseline (else
    None), and the uniform-attention MRTA (%) of each setup it was asked for, by label."""

    info: dict[str, Any]
    majority: Majority | None
    train_examples: int
    baseline: dict[str, float] | None
    uniform: dict[str, float]


def uniform_mrta_of(data: Prepared, s: RealSetup) -> float:
    """The MRTA (%) this run's reading of attention gives a model that learned no attention (``metrics.uniform``):
    every head uniform over the positions it may see (padding masked, and later positions where ``s.causal``),
    rolled out over ``s.n_layers`` layers and read as ``s.measure`` reads it, on the same test posts and tokens."""
    test = data.test
    measured = torch.ones_like(test.has_relevance) if s.unannotated == "zero" else test.has_relevance
    return uniform_mrta(
        test.ids,
        test.relevant,
        measured,
        s.n_layers,
        measure=s.measure,
        causal=s.causal,
        identity_weight=s.identity_weight,
    )


def facts_of(data: Any, uniform: Mapping[str, RealSetup]) -> DataFacts:
    """The facts of loaded data (``Prepared``, or ``squad_runs.PreparedQA``, which has a baseline and no classes)."""
    baseline = getattr(data, "baseline", None)
    return DataFacts(
        info=dict(data.info),
        majority=None if baseline is not None else data.majority,
        train_examples=len(data.train.ids),
        baseline=None if baseline is None else {k: float(v) for k, v in baseline.items()},
        uniform={label: uniform_mrta_of(data, s) for label, s in uniform.items()},
    )


def as_table(facts: DataFacts) -> pd.DataFrame:
    """The facts as a stored table: a row per fact, its value as a JSON object (``{"value": ...}``, so that CSV
    reads every cell back as text)."""
    m = facts.majority
    values = {
        "info": facts.info,
        "majority": None if m is None else [m.count, m.examples],
        "train_examples": facts.train_examples,
        "baseline": facts.baseline,
        "uniform": facts.uniform,
    }
    return pd.DataFrame({"fact": list(values), "value": [json.dumps({"value": v}) for v in values.values()]})


def from_table(table: pd.DataFrame) -> DataFacts:
    """``as_table`` read back."""
    v = {fact: json.loads(text)["value"] for fact, text in zip(table["fact"], table["value"])}
    return DataFacts(
        info=v["info"],
        majority=None if v["majority"] is None else Majority(*v["majority"]),
        train_examples=int(v["train_examples"]),
        baseline=v["baseline"],
        uniform={k: float(x) for k, x in v["uniform"].items()},
    )


def facts_table(data: Any, uniform: Mapping[str, RealSetup]) -> pd.DataFrame:
    """The stored run's one table (``store_data.kept``): ``as_table`` of ``facts_of``."""
    return as_table(facts_of(data, uniform))
