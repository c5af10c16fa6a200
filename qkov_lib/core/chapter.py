"""What every chapter shares: the profiles, its typed setup resolved from a profile plus overrides, and what it does
first (``begin``: the setup, the environment) and last (``Chapter.save``: tidy tables and metadata).

A chapter module (``qkov_lib/chapters/<name>.py``) holds a frozen dataclass ``Setup`` whose defaults are the paper's
values and a mapping ``PROFILES`` of what each other profile changes; ``paper`` changes nothing, ``auto`` means
``paper`` on a GPU and ``default`` otherwise, ``official`` follows the authors' notebooks where they differ from the
paper. A profile resolves to ``Setup(**changes, **overrides)``: every value is checked against the field's type here
and against its allowed values in the setup's ``__post_init__``, and any error is one ``ParameterError``. A setup
that reads a profile's results (the summary, the scorecard) declares ``profile`` as a field that is no parameter
(``init=False``); resolving fills it in.

Every chapter computes through one call, ``run(setup, *, device=None, progress=True)``, that returns what its page
shows: ``device`` None means ``device.pick_device()``; a chapter that trains nothing takes both keywords and ignores
them, so that every chapter is called alike. A chapter that reads datasets names them in ``DATASETS`` and loads them
inside ``run``; one that runs a sweep names its folders with ``sweep_folders(setup)``.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import json
import os
import time
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .. import __version__
from . import budget, paths, portable, results
from .device import describe, pick_device

PROFILES = ("smoke", "default", "paper", "official")
CHOICES = (*PROFILES, "auto")
INT_LIMIT = 2**63  # integer parameters reach numpy and torch as 64-bit integers


class ParameterError(ValueError):
    """A parameter or profile that is not allowed; the message names it and what is allowed."""


def concrete_profile(profile: str, has_gpu: bool | None = None) -> str:
    """Resolve ``auto`` (paper on the CUDA device that ``pick_device`` chooses, else default); reject unknown
    names."""
    if profile not in CHOICES:
        raise ParameterError(f"unknown profile {profile!r}; allowed: {', '.join(CHOICES)}")
    if profile != "auto":
        return profile
    if has_gpu is None:
        try:
            has_gpu = pick_device().type == "cuda"  # honours QKOV_DEVICE
        except (ValueError, RuntimeError) as err:
            raise ParameterError(str(err)) from None
    return "paper" if has_gpu else "default"


def name_of(module: types.ModuleType) -> str:
    """A chapter's name: its module's (``qkov_lib.chapters.fig2_dtap`` -> ``fig2_dtap``)."""
    return module.__name__.rsplit(".", 1)[-1]


def parameters(setup_type: type) -> dict[str, Any]:
    """The parameters a setup takes (its fields set at construction), with their paper values."""
    return {f.name: _paper_value(setup_type, f) for f in dataclasses.fields(setup_type) if f.init}


def _paper_value(setup_type: type, f: dataclasses.Field) -> Any:
    """A setup field's default (its paper value); a field without one is a bug in the setup."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise TypeError(f"{setup_type.__name__}.{f.name} has no default; every setup field needs its paper value")


def as_dict(setup: Any) -> dict[str, Any]:
    """A setup's parameters as plain values (tuples as lists), for metadata and fingerprints."""

    def plain(value: Any) -> Any:
        if isinstance(value, (tuple, list)):
            return [plain(v) for v in value]
        if isinstance(value, Mapping):
            return {k: plain(v) for k, v in value.items()}
        return value

    return {name: plain(getattr(setup, name)) for name in parameters(type(setup))}


def _describe(hint: Any) -> str:
    """A type hint in words: 'a float', 'a list of integers', 'None or a str'."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("None" if a is type(None) else _describe(a) for a in args)
    if origin is tuple:
        return f"a list of {_plural(_describe(args[0]))}" if args[-1] is Ellipsis else f"a list of {len(args)} values"
    if origin is dict:
        return f"a mapping to {_plural(_describe(args[1]))}"
    return {bool: "a bool", int: "an int", float: "a float", str: "a str", Any: "a value"}.get(hint, str(hint))


def _plural(description: str) -> str:
    """'an int' -> 'ints', 'a list of 2 values' -> 'lists of 2 values'; any other description -> 'values, each …'."""
    for article in ("a ", "an "):
        if description.startswith(article) and " or " not in description:
            first, _, rest = description.removeprefix(article).partition(" ")
            return f"{first}s {rest}".rstrip()
    return f"values, each {description}"


def typed(setup_type: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as ``setup_type``'s fields take them (``_coerce``), for settings a setup holds for a part of
    itself (Table 5's ``depth_settings``); ValueError naming a value of the wrong type."""
    hints = typing.get_type_hints(setup_type)
    out = {}
    for name, value in values.items():
        try:
            out[name] = _coerce(value, hints[name])
        except (TypeError, OverflowError):
            raise ValueError(f"{name} must be {_describe(hints[name])} (got {value!r})") from None
    return out


def _coerce(value: Any, hint: Any) -> Any:
    """``value`` as the type ``hint`` asks for (a list becomes a tuple, an int a float where a float is asked);
    TypeError when it is not one, OverflowError for an integer beyond 64 bits. ``Any``: the value as it is (the
    setup checks it)."""
    if hint is Any:
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, option)
            except TypeError:
                pass
        raise TypeError
    if origin is tuple and isinstance(value, (list, tuple)):
        if args[-1] is Ellipsis:
            return tuple(_coerce(v, args[0]) for v in value)
        if len(value) == len(args):
            return tuple(_coerce(v, a) for v, a in zip(value, args))
    elif origin is dict and isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: _coerce(v, args[1]) for k, v in value.items()}
    elif hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    elif hint is int and isinstance(value, int) and not isinstance(value, bool):
        if abs(value) >= INT_LIMIT:
            raise OverflowError
        return value
    elif hint in (bool, str) and isinstance(value, hint):
        return value
    raise TypeError


def resolve(
    module: types.ModuleType, profile: str, overrides: Mapping[str, Any] | None = None, has_gpu: bool | None = None
) -> tuple[str, Any]:
    """(concrete profile, typed setup) of a chapter module: the paper's values, the profile's changes, then the
    overrides; every value checked, any error one ParameterError naming the parameter and what is allowed."""
    chapter, setup_type = name_of(module), module.Setup
    profile = concrete_profile(profile, has_gpu)
    allowed = parameters(setup_type)
    hints = typing.get_type_hints(setup_type)
    values = dict(module.PROFILES.get(profile, {}))
    for name, value in (overrides or {}).items():
        if name not in allowed:
            raise ParameterError(f"unknown parameter {name!r} for {chapter}; allowed: {', '.join(allowed)}")
        values[name] = value
    for name, value in values.items():
        try:
            values[name] = _coerce(value, hints[name])
        except TypeError:
            raise ParameterError(
                f"parameter {name!r} of {chapter} must be {_describe(hints[name])} like "
                f"{allowed[name]!r} (got {value!r})"
            ) from None
        except OverflowError:
            raise ParameterError(
                f"parameter {name!r} of {chapter} is too large (got {value!r}): an integer must be "
                f"below 2**63 and a float finite; give a value like {allowed[name]!r}"
            ) from None
    try:
        return profile, _told_profile(setup_type(**values), profile)
    except ValueError as err:  # the setup's own check: the same kind of error for every chapter
        raise ParameterError(str(err)) from None


def _told_profile(setup: Any, profile: str) -> Any:
    """``setup``, told the profile it runs under where it has a field ``profile`` that is no parameter (not set at
    construction): the pages that gather the others' results read that profile's."""
    if any(f.name == "profile" and not f.init for f in dataclasses.fields(setup)):
        object.__setattr__(setup, "profile", profile)  # a frozen setup: set once, as it is made
    return setup


def parse_value(text: str) -> Any:
    """A command-line value: a Python literal (1, 0.5, [1, 2], 'x') where it parses, else the plain string (both
    without the spaces around it)."""
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


@dataclass
class Chapter:
    """A chapter being run: its name, concrete profile, typed setup and environment (device, versions, CPU)."""

    name: str
    profile: str
    setup: Any
    environment: dict[str, str]
    started: float = field(default_factory=time.perf_counter)

    @property
    def params(self) -> dict[str, Any]:
        return as_dict(self.setup)

    def save(self, tables: Mapping[str, pd.DataFrame], seeds: Sequence[int] = ()) -> None:
        """Write the chapter's tidy tables and metadata (parameters, seeds, environment, versions, wall time).

        Returns nothing, so the call never echoes file paths onto the page."""
        meta = {
            "chapter": self.name,
            "profile": self.profile,
            "parameters": self.params,
            "seeds": list(seeds),
            **self.environment,
            "arithmetic": portable.effective(),
            "qkov_lib": __version__,
            "git_commit": results.git_commit(),
            "date": time.strftime("%Y-%m-%d"),
            "wall_time_s": round(time.perf_counter() - self.started, 3),
        }
        if (scope := current_scope()) is not None and scope.chapter == self.name and scope.used:
            meta["stored_runs"] = stored_runs(scope.used)
        paths = results.save(results.results_dir(self.profile), self.name, dict(tables), meta)
        folder = results.results_dir(self.profile)
        where = "" if os.environ.get(results.RESULTS_ENV) else f" into {shown_path(folder)}, apart from the runner's"
        print(f"saved {len(paths)} result files for {self.name} ({self.profile}){where}")


def stored_runs(used: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a chapter's metadata records of the stored runs it used: how many, how many came from the store, the
    commits they were computed at, their compute time in all, and each run's key (its name -> the key's digest: what
    a results bundle carries of the page, ``runner.bundle_store``); and the datasets that were not here, where runs
    were read as stored without them (``store.lookup``)."""
    unseen = sorted({str(d) for u in used for d in u.get("data_unseen", ())})
    return {
        **({"data_unseen": unseen} if unseen else {}),
        "runs": len(used),
        "from_store": sum(bool(u["from_store"]) for u in used),
        "commits": sorted({str(u["commit"]) for u in used if u.get("commit")}),
        "compute_s": round(sum(float(u.get("compute_s") or 0) for u in used), 1),
        "keys": {str(u["name"]): str(u["key"]) for u in used if u.get("key")},
    }


def notebook_overrides(value: Any) -> Mapping[str, Any] | None:
    """A notebook's ``overrides`` parameter: a mapping, or the text of one as papermill's ``-p overrides '{"M": 20}'``
    passes it (a Python or JSON literal); ParameterError for anything else."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = parse_value(value)
    if value is not None and not (isinstance(value, Mapping) and all(isinstance(k, str) for k in value)):
        raise ParameterError(
            f"overrides must map parameter names to values, like {{'M': 20}} (got {value!r}); with "
            f"papermill, pass -p overrides '{{\"M\": 20}}' or -y 'overrides: {{M: 20}}'"
        )
    return value


def shown_path(path: Path) -> str:
    """A path as a reader finds it: relative to the repository where it lies inside it."""
    try:
        return path.resolve().relative_to(paths.REPO_ROOT).as_posix()
    except ValueError:
        return str(path)


@dataclass
class Scope:
    """The chapter whose stored runs are being read or computed (``runs.store``): its name, concrete profile, the
    datasets it reads, whether its setup is the profile's own (no overrides), and the stored runs it used (each a
    dict: name, commit, compute time, whether it came from the store), which its metadata records."""

    chapter: str
    profile: str
    datasets: tuple[str, ...] = ()
    as_profile: bool = True
    used: list[dict[str, Any]] = field(default_factory=list)


_SCOPE: list[Scope] = []  # the chapter this process runs (``start`` sets it), innermost last
PART = "--"  # a chapter's computation stored apart from its own runs lies in the store folder <chapter>--<part>


def apart(scope: Scope, part: str) -> Scope:
    """``scope`` for a computation of its chapter stored apart (``PART``), under the run names of its own; the runs
    it uses are recorded in the chapter's list."""
    return dataclasses.replace(scope, chapter=f"{scope.chapter}{PART}{part}")


def folder_chapter(folder: str) -> str:
    """The chapter whose runs a store folder holds: its name, less any part stored apart (``apart``)."""
    return folder.split(PART, 1)[0]


def current_scope() -> Scope | None:
    """The chapter this process is running, None outside one (a library function called directly)."""
    return _SCOPE[-1] if _SCOPE else None


@contextlib.contextmanager
def scoped(scope: Scope) -> Iterator[Scope]:
    """``scope`` as the current chapter inside the block (``results status`` plans each chapter this way)."""
    _SCOPE.append(scope)
    try:
        yield scope
    finally:
        _SCOPE.remove(scope)


def start(module: types.ModuleType, profile: str = "default", overrides: Mapping[str, Any] | None = None) -> Chapter:
    """Resolve the chapter's setup for a profile plus overrides, and check the run's environment (the portable
    level, the time budget); a chapter page calls ``present.settings.begin``, which also shows how it runs."""
    concrete, setup = resolve(module, profile, notebook_overrides(overrides))
    try:
        portable.level()
        budget.deadline()  # a chapter run by plain papermill with a bad setting fails here, not in its sweep
    except ValueError as err:
        raise ParameterError(str(err)) from None
    pd.set_option("display.max_colwidth", None)  # claim tables carry sentences; never cut them
    _SCOPE[:] = [Scope(name_of(module), concrete, getattr(module, "DATASETS", ()), not overrides)]
    return Chapter(name_of(module), concrete, setup, describe(pick_device()))
