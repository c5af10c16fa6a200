"""Where datasets come from: QKOV_DATA_DIR (offline copies) or the download cache (QKOV_CACHE_DIR)."""
from __future__ import annotations

import os
from pathlib import Path

from ..results import REPO_ROOT

DATA_ENV = "QKOV_DATA_DIR"
CACHE_ENV = "QKOV_CACHE_DIR"


class DataError(RuntimeError):
    """A dataset that is missing, corrupt or malformed; the message names the file and the fix."""


def data_dir() -> Path | None:
    """The folder of offline dataset copies named by $QKOV_DATA_DIR, or None when unset; it must exist."""
    value = os.environ.get(DATA_ENV)
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_dir():
        raise DataError(f"{DATA_ENV}={value!r} is not a folder; point it at the offline dataset copies "
                                f"(layout in data/README.md) or unset it to download into the cache")
    return path


def cache_dir() -> Path:
    """Where downloads go: $QKOV_CACHE_DIR, else data/cache in the repository."""
    return Path(os.environ.get(CACHE_ENV) or REPO_ROOT / "data" / "cache").expanduser()
