"""The runner's time budget as a chapter's kernel sees it: ``$QKOV_DEADLINE``, when the budget ends (seconds since
the epoch), set by the runner for each chapter it starts under ``--budget-minutes``."""

from __future__ import annotations

import os

DEADLINE_ENV = "QKOV_DEADLINE"


def deadline() -> float | None:
    """When the runner's time budget ends (seconds since the epoch), or None: no budget; ValueError naming the
    setting when it is not a number."""
    text = os.environ.get(DEADLINE_ENV, "")
    try:
        value = float(text) if text else None
    except ValueError:
        value = float("nan")
    if value is not None and value != value:
        raise ValueError(
            f"{DEADLINE_ENV}={text!r} is not a time in seconds since the epoch; unset it (the runner "
            f"sets it from --budget-minutes)"
        )
    return value


class OutOfTime(RuntimeError):
    """The runner's time budget ran out in the middle of a chapter's stored runs or sweep; what finished is kept, and
    the next run continues from it."""
