"""The checks that config dataclasses and typed setups share: positive integers and lists of positive numbers."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np


def is_positive_int(value: Any) -> bool:
    """An integer >= 1 (a bool is not one)."""
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= 1


def require_positive_ints(obj: object, names: Iterable[str]) -> None:
    """Raise ValueError naming the first field of ``names`` on ``obj`` that is not an integer >= 1."""
    for name in names:
        value = getattr(obj, name)
        if not is_positive_int(value):
            raise ValueError(f"{name} must be a positive integer (got {value!r})")


def require_seeds(seeds: Any) -> None:
    """Raise ValueError unless ``seeds`` is a non-empty list of distinct integers (each seed names one model)."""
    if not (seeds and all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in seeds)
            and len(set(seeds)) == len(seeds)):
        raise ValueError(f"seeds must be a non-empty list of distinct integers (got {list(seeds or ())!r})")


def require_positive_numbers(name: str, values: Any) -> None:
    """Raise ValueError unless ``values`` is a non-empty list of finite numbers > 0 (``name`` as the message's)."""
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"{name} must be a non-empty list of numbers > 0 (got {values!r})")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must contain only finite numbers > 0 (got {v!r} in {values!r})")
