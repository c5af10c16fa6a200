"""The theory chapters' long numerical solves as stored runs (``store``): Theorem 1's full-matrix gradient flows and
Lemmas 1 and 4's conservation along gradient flow and descent (its symbolic reduction: ``symbolic_runs``). Each is
one run, keyed by the values that reach it and the code of the theory module that computes it, so that the pages,
and ``results status``, which runs a chapter through its stored runs, take seconds; the exact instances stay live
(they take about a second)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from ..theory import factorised, instance
from ..theory.instance import InstanceConfig
from .store import Batch, Piece


def one_run(
    name: str, values: Mapping[str, Any], fn: Callable[..., Any], args: tuple, as_table: Callable
) -> pd.DataFrame:
    """The run ``name`` of ``fn(*args)`` (a theory module's function, or a partial of one: that module's code in the
    key), read where stored, else computed and kept (``as_table``: its result as the table stored)."""
    batch = Batch([Piece(name, values)], [getattr(fn, "func", fn).__module__])
    batch.compute(fn, [args] if batch.missing else [], 1, lambda t, out: {0: {"main": as_table(out)}})
    return batch.tables()[0]["main"]


def flows(config: InstanceConfig, ratios: Sequence[float], t_end: float) -> pd.DataFrame:
    """``instance.flow_comparison``: the full-matrix flows beside Theorem 1's ODE, for each ratio (Section 6.1)."""
    values = {"instance": dataclasses.asdict(config), "ratios": list(ratios), "t_end": t_end}
    return one_run("flows", values, instance.flow_comparison, (config, list(ratios), t_end), lambda t: t)


def conservation(seed: int, **options: Any) -> dict[str, float]:
    """``factorised.conservation_checks`` (Lemmas 1 and 4; ``options``: its size, horizon and step sizes): the
    imbalance after gradient flow and after gradient descent, relative to the start's size."""
    values = {"seed": seed, **{k: list(v) if isinstance(v, tuple) else v for k, v in options.items()}}
    fn = functools.partial(factorised.conservation_checks, **options)
    table = one_run("conservation", values, fn, (seed,), lambda row: pd.DataFrame([row]))
    return {str(k): float(v) for k, v in table.iloc[0].items()}
