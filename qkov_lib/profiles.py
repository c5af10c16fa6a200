"""Every chapter's parameters under each profile: the one source of truth for them.

``paper`` holds the paper's settings; the other profiles list only what they change. ``auto`` means ``paper`` when a
GPU is present and ``default`` otherwise. ``official`` follows the authors' notebooks where they differ from the paper.
"""
from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .theory import OrthogonalSetting, check_loss_threshold

PROFILES = ("smoke", "default", "paper", "official")
CHOICES = PROFILES + ("auto",)


class ParameterError(ValueError):
    """A parameter or profile that is not allowed; the message names it and what is allowed."""


@dataclass(frozen=True)
class ChapterSpec:
    title: str
    paper: dict[str, Any]
    changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    validate: Callable[[dict[str, Any]], None] = lambda params: None


def _positive_numbers(name: str, values: Any) -> None:
    if not isinstance(values, list) or not values:
        raise ParameterError(f"{name} must be a non-empty list of numbers > 0 (got {values!r})")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v <= 0:
            raise ParameterError(f"{name} must contain only finite numbers > 0 (got {v!r} in {values!r})")


def validate_figure4(p: dict[str, Any]) -> None:
    """Figure 4: sizes and rates of Theorem 1, ratios r > 0, losses inside (0, log M)."""
    try:
        OrthogonalSetting(m=p["m"], n=p["n"], b=p["b"], M=p["M"], eta_ov=p["eta_ov"])
        check_loss_threshold(p["target_loss"], p["M"], "target_loss")
        _positive_numbers("ratios", p["ratios"])
        _positive_numbers("table_losses", p["table_losses"])
        for thr in p["table_losses"]:
            check_loss_threshold(thr, p["M"], "each of table_losses")
    except ValueError as err:
        raise ParameterError(str(err)) from None
    if min(p["table_losses"]) < p["target_loss"]:
        raise ParameterError(f"table_losses must all be >= target_loss = {p['target_loss']} (the run stops there); "
                             f"got {p['table_losses']}")
    if not (isinstance(p["n_matched"], int) and p["n_matched"] >= 2):
        raise ParameterError(f"n_matched must be an integer >= 2 (got {p['n_matched']!r})")
    if p["time_axis"] not in ("normalised", "raw"):
        raise ParameterError(f"time_axis must be 'normalised' or 'raw' (got {p['time_axis']!r})")


CHAPTERS: dict[str, ChapterSpec] = {
    "fig4_mu_trajectories": ChapterSpec(
        title="Figure 4: mu(t) trajectories",
        paper=dict(m=5, n=50, b=50, M=5, eta_ov=1.0, ratios=[0.01, 0.1, 1.0, 10.0, 100.0], target_loss=1e-4,
                   table_losses=[1e-1, 1e-2, 1e-3], n_matched=60, time_axis="normalised"),
        changes={"smoke": dict(ratios=[0.01, 1.0, 100.0], target_loss=1e-3, n_matched=20),
                 "official": dict(M=20)},
        validate=validate_figure4,
    ),
}


def concrete_profile(profile: str, has_gpu: bool | None = None) -> str:
    """Resolve ``auto`` (paper on a GPU, else default); reject unknown names."""
    if profile not in CHOICES:
        raise ParameterError(f"unknown profile {profile!r}; allowed: {', '.join(CHOICES)}")
    if profile != "auto":
        return profile
    if has_gpu is None:
        import torch
        has_gpu = torch.cuda.is_available()
    return "paper" if has_gpu else "default"


def chapter_spec(chapter: str) -> ChapterSpec:
    if chapter not in CHAPTERS:
        raise ParameterError(f"unknown chapter {chapter!r}; chapters: {', '.join(CHAPTERS)}")
    return CHAPTERS[chapter]


def _check_type(chapter: str, name: str, value: Any, reference: Any) -> Any:
    """Overrides keep the paper value's type (an int is accepted where a float is expected)."""
    if isinstance(reference, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(reference, list) and isinstance(value, (list, tuple)):
        return [float(v) if isinstance(reference[0], float) and isinstance(v, int) else v for v in value]
    if type(value) is not type(reference):
        raise ParameterError(f"parameter {name!r} of {chapter} must be a {type(reference).__name__} "
                             f"like {reference!r} (got {value!r})")
    return value


def resolve(chapter: str, profile: str, overrides: Mapping[str, Any] | None = None,
            has_gpu: bool | None = None) -> tuple[str, dict[str, Any]]:
    """(concrete profile, full parameter dict) for a chapter: paper values, the profile's changes, then overrides."""
    spec = chapter_spec(chapter)
    profile = concrete_profile(profile, has_gpu)
    params = copy.deepcopy(spec.paper)
    params.update(copy.deepcopy(spec.changes.get(profile, {})))
    for name, value in (overrides or {}).items():
        if name not in spec.paper:
            raise ParameterError(f"unknown parameter {name!r} for {chapter}; allowed: {', '.join(spec.paper)}")
        params[name] = _check_type(chapter, name, value, spec.paper[name])
    spec.validate(params)
    return profile, params


def parse_value(text: str) -> Any:
    """A command-line value: a Python literal (1, 0.5, [1, 2], 'x') where it parses, else the plain string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
