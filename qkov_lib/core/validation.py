"""The checks that config dataclasses and typed setups share: positive integers and lists of positive numbers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np


def is_positive_int(value: Any) -> bool:
    """An integer >= 1 (a bool is not one)."""
    return bool(not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= 1)


def require_positive_ints(obj: object, names: Iterable[str]) -> None:
    """Raise ValueError naming the first field of ``names`` on ``obj`` that is not an integer >= 1."""
    for name in names:
        value = getattr(obj, name)
        if not is_positive_int(value):
            raise ValueError(f"{name} must be a positive integer (got {value!r})")


MAX_SEEDS = 1000  # each seed trains its own models: 1000 seeds of Figure 2 are 8000 models held at once
SEED_LIMIT = 2**32  # numpy's and torch's seeds are 32-bit where they meet (np.random.seed)


def require_seeds(seeds: Any) -> None:
    """Raise ValueError unless ``seeds`` is a non-empty list of at most ``MAX_SEEDS`` distinct integers in
    [0, 2**32) (each seed names one model)."""
    if not (
        seeds
        and all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in seeds)
        and len(set(seeds)) == len(seeds)
    ):
        raise ValueError(f"seeds must be a non-empty list of distinct integers (got {list(seeds or ())!r})")
    if bad := [s for s in seeds if not 0 <= s < SEED_LIMIT]:
        raise ValueError(
            f"seeds must be integers from 0 to {SEED_LIMIT - 1} (got {bad[0]!r}); give non-negative "
            f"seeds like [0, 1, 2]"
        )
    if len(seeds) > MAX_SEEDS:
        raise ValueError(
            f"seeds holds {len(seeds)} seeds, more than the {MAX_SEEDS} a run takes (each seed trains "
            f"models of its own, all held in memory together); split the study into runs of at most "
            f"{MAX_SEEDS} seeds"
        )


def require_positive_numbers(name: str, values: Any) -> None:
    """Raise ValueError unless ``values`` is a non-empty list of finite numbers > 0 (``name`` as the message's)."""
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"{name} must be a non-empty list of numbers > 0 (got {values!r})")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must contain only finite numbers > 0 (got {v!r} in {values!r})")
