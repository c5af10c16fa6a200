"""Where datasets come from: QKOV_DATA_DIR (offline copies) or the download cache (QKOV_CACHE_DIR)."""

from __future__ import annotations

import os
from pathlib import Path

from ..core.paths import CACHE_DIR

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
        raise DataError(
            f"{DATA_ENV}={value!r} is not a folder; point it at the offline dataset copies "
            f"(layout in data/README.md) or unset it to download into the cache"
        )
    return path


def cache_dir() -> Path:
    """Where downloads and derived files go: $QKOV_CACHE_DIR, else data/cache in the repository. It need not exist
    yet, but nothing on its path may be a file."""
    value = os.environ.get(CACHE_ENV)
    path = Path(value or CACHE_DIR).expanduser()
    blocking = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        where = f"{CACHE_ENV}={value!r}" if value else f"the default cache {path}"
        raise DataError(
            f"{where} cannot be a folder: {blocking} is a file; point {CACHE_ENV} at a folder (it is "
            f"created when missing) or move the file away"
        )
    return path
