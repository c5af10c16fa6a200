"""The one check that config dataclasses share: named fields that must be positive integers."""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def require_positive_ints(obj: object, names: Iterable[str]) -> None:
    """Raise ValueError naming the first field of ``names`` on ``obj`` that is not an integer >= 1."""
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, bool) or not (isinstance(value, (int, np.integer)) and value >= 1):
            raise ValueError(f"{name} must be a positive integer (got {value!r})")
