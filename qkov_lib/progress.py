"""Progress bars for long runs; QKOV_PROGRESS=0 turns them off (the runner does, so executed chapters stay clean)."""
from __future__ import annotations

import os
from collections.abc import Iterable

from tqdm import tqdm

PROGRESS_ENV = "QKOV_PROGRESS"


def bar(iterable: Iterable, desc: str, enabled: bool = True, **kwargs) -> tqdm:
    """A tqdm bar that refreshes at most once a second, unless disabled here or by QKOV_PROGRESS=0."""
    off = not enabled or os.environ.get(PROGRESS_ENV, "1") == "0"
    return tqdm(iterable, desc=desc, disable=off, mininterval=1.0, **kwargs)
