"""Table 5 (Appendix D.5): the HateXplain comparison of Table 1 with two and four layers."""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import pandas as pd
import torch

from ..real_data import RealRun, Prepared, claims as table1_claims, run_all, table1
from ..validation import is_positive_int
from . import hatexplain

DATASETS = hatexplain.DATASETS


@dataclass(frozen=True, kw_only=True)
class Setup(hatexplain.Setup):
    """The HateXplain chapter's setup, trained at each depth of ``layer_counts`` (Table 5: settings otherwise not
    stated, so the 1-layer chapter's)."""

    layer_counts: tuple[int, ...] = (2, 4)  # Table 5's depths
    n_layers: int = field(init=False, default=0)  # the deepest of ``layer_counts`` (its checks use it)

    def __post_init__(self) -> None:
        counts = self.layer_counts
        if not (counts and all(map(is_positive_int, counts)) and len(set(counts)) == len(counts)):
            raise ValueError(f"layer_counts must be a non-empty list of distinct integers >= 1 (got {list(counts)!r})")
        object.__setattr__(self, "n_layers", max(counts))
        super().__post_init__()

    def at_depth(self, n: int) -> hatexplain.Setup:
        """The 1-layer chapter's setup with ``n`` layers."""
        shared = {f.name: getattr(self, f.name) for f in fields(hatexplain.Setup) if f.init}
        return hatexplain.Setup(**shared | {"n_layers": n})


PROFILES = {"default": dict(max_len=64, lr=1e-3, epochs=1),
            "smoke": dict(hatexplain.PROFILES["smoke"], layer_counts=(2,))}


def run(setup: Setup, prepared: Prepared, device: torch.device, progress: bool = True) -> dict[int, RealRun]:
    """Both conditions at every depth, all the trainings spread over the worker processes at once."""
    counts = list(setup.layer_counts)
    return dict(zip(counts, run_all(prepared, [setup.at_depth(n) for n in counts], device, progress)))


def by_depth(runs: dict[int, RealRun], name: str) -> pd.DataFrame:
    """One of the runs' tables (``per_seed``, ``curves``) at every depth, with a ``layers`` column."""
    return pd.concat([getattr(run, name).assign(layers=n) for n, run in runs.items()], ignore_index=True)


def table(runs: dict[int, RealRun]) -> pd.DataFrame:
    """Table 5: Table 1's rows per depth, with a ``layers`` column first."""
    rows = pd.concat([table1(run.per_seed).assign(layers=n) for n, run in runs.items()], ignore_index=True)
    return rows[["layers", *rows.columns.drop("layers")]]


def claims(per_seed_by_depth: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """Appendix D.5 / Table 5: Table 1's claims checked at each depth, the claim named with it."""
    return pd.concat([table1_claims(per_seed).assign(id=lambda t, n=n: f"{n}_layers_" + t["id"],
                                                     claim=lambda t, n=n: f"{n} layers: " + t["claim"])
                      for n, per_seed in per_seed_by_depth.items()], ignore_index=True)
