"""Everything a run checks before any chapter starts: the arguments, the environment's settings, the folders it
writes; each bad one is one ParameterError naming the problem and the fix."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core import portable
from ..core.budget import DEADLINE_ENV
from ..core.chapter import ParameterError, concrete_profile
from ..core.device import cpu_workers, engine_backend, pick_device
from ..data import CACHE_ENV, DATA_ENV, cache_dir, data_dir
from ..runs.sweep import SCHEDULER_ENV
from .catalog import resolve, select, split_overrides


def writable_folder(path: Path, flag: str) -> None:
    """``path`` is, or can become, a writable folder; else one ParameterError naming the flag."""
    if path.exists() and not path.is_dir():
        raise ParameterError(f"{flag} {path} is a file; name a folder (it is created when missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ParameterError(f"{flag} {path} cannot be created ({err.strerror}); name a writable folder") from None
    if not os.access(path, os.W_OK):
        raise ParameterError(f"{flag} {path} is not writable; name a writable folder")


def folder_path(value: str | Path, flag: str) -> Path:
    """A folder the caller named (a flag's value, or a setting's), made absolute against the caller's folder before
    any kernel starts (a kernel runs in notebooks/); ParameterError naming ``flag`` for an empty name or one that
    is not UTF-8."""
    text = os.fspath(value)
    if not text.strip():
        raise ParameterError(
            f"{flag} names no folder (the name is empty); name a folder, or leave {flag} out for the default"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ParameterError(f"{flag} {text!r} is not a valid UTF-8 name; name a folder whose name is UTF-8") from None
    return Path(os.path.abspath(os.path.expanduser(text)))


def check_environment() -> None:
    """The environment settings every chapter reads (device, engine, workers, data and cache folders, the portable
    mode), checked once up front; the data and cache folders made absolute, so that a kernel, which runs in
    notebooks/, finds them where the caller meant. $QKOV_DEADLINE is the runner's own (from --budget-minutes)."""
    for var in (DATA_ENV, CACHE_ENV):
        if os.environ.get(var):
            os.environ[var] = str(folder_path(os.environ[var], var))
    if os.environ.get(DEADLINE_ENV) is not None:
        raise ParameterError(
            f"{DEADLINE_ENV}={os.environ[DEADLINE_ENV]!r} is set, but the runner sets it for each "
            f"chapter from --budget-minutes: unset it, and pass --budget-minutes M for a time budget"
        )
    try:
        device = pick_device()
        engine_backend(device)
        cpu_workers(device)
        data_dir()
        cache_dir()
        portable.level()
    except (ValueError, RuntimeError) as err:
        raise ParameterError(str(err)) from None


def prepare(
    profile: str, pairs: Sequence[tuple[str, Any]], only: Sequence[str] | None, budget_minutes: float | None
) -> tuple[list[str], str, dict[str, dict[str, Any]]]:
    """Check every argument and setting up front: the chapters, the concrete profile, each chapter's overrides."""
    if budget_minutes is not None and not budget_minutes > 0:
        raise ParameterError(
            f"--budget-minutes {budget_minutes} is not a positive number of minutes; give one, or "
            f"leave it out to run every stale chapter"
        )
    chapters = select(only)
    check_environment()
    profile = concrete_profile(profile)
    per_chapter = split_overrides(chapters, pairs)
    for c in chapters:
        warn_serial(c, profile, resolve(c, profile, per_chapter[c])[1])
    return chapters, profile, per_chapter


def warn_serial(chapter: str, profile: str, setup: Any) -> None:
    """One line when $QKOV_DASK_SCHEDULER is set but the chapter's sweep runs serially (its profile says so)."""
    address = os.environ.get(SCHEDULER_ENV)
    if address and getattr(setup, "scheduler", None) == "serial":
        print(
            f"note: {SCHEDULER_ENV}={address} is not used by {chapter}: profile {profile} runs its sweep serially "
            f"(scheduler='serial'); add -p scheduler {address} to run it there",
            file=sys.stderr,
        )


def results_folders(results_root: Path, profile: str, create: bool) -> Path:
    """The profile's folder of published units under ``results_root``, checked up front: neither it nor the root may
    be a file (and, with ``create``, both are made writable folders); ParameterError naming the fix."""
    final = results_root / profile
    for path, what in ((results_root, "--results"), (final, f"profile {profile}'s results folder")):
        if path.exists() and not path.is_dir():
            raise ParameterError(
                f"{what} {path} is a file, not a folder; move the file away, or name another folder with --results"
            )
    if create:
        writable_folder(results_root, "--results")
        writable_folder(final, "--results")
    return final
