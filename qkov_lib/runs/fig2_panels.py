"""Figure 2's eight panels (Section 4): the chapter's setup, the faster-QK multipliers, and each panel's options as
the paper's text and the authors' code give them. What a Figure 2 training computes, kept apart from the chapter's
page (``chapters.fig2_dtap``: claims, figures) so that the stored runs that train these panels (the atlas's) are keyed
by this code alone."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.validation import is_positive_int
from ..data.synthetic import check_seq_len
from ..models.attention import matrices
from .synthetic_runs import Panel, SyntheticSetup

PANEL_KEYS = "abcdefgh"
PARAMETERISATIONS = dict(zip(PANEL_KEYS, ("FAFO", "FACO", "CAFO", "CACO", "FAFO", "FAFO", "CACO", "CACO")))
MULTIPLIERS = ("mult_e", "ramp_f", "mult_g", "ramp_h")

# Figure 2 as the authors' notebooks train each panel: the matrices they leave at PyTorch's default, the epochs x
# batches of each training loop, and its stop rule per epoch of that many batches. (a)-(d) from the heatmap notebook,
# (e)-(h) from the row-2 notebook.
OFFICIAL_INIT = {"a": ("W_K", "W_Q"), "d": ("W_QK", "W_OV"), "g": ("W_QK", "W_OV"), "h": ("W_QK", "W_OV")}
# Each loop as (epochs, batches per epoch, whether it checks the stop rule after an epoch).
OFFICIAL_LOOPS = {
    "a": (2500, 250, True),
    "b": (2500, 250, True),
    "c": (5000, 200, True),
    "d": (2500, 200, True),
    "e": (1000, 100, True),
    "f": (2000, 100, False),
    "g": (2000, 100, False),
    "h": (2000, 100, False),
}
OFFICIAL_STEPS = {k: epochs * batches for k, (epochs, batches, _) in OFFICIAL_LOOPS.items()}
OFFICIAL_STOP = {k: batches if stops else None for k, (_, batches, stops) in OFFICIAL_LOOPS.items()}


@dataclass(frozen=True, kw_only=True)
class Setup(SyntheticSetup):
    """The shared synthetic setup (task, model, training, bins; ``SyntheticSetup``) and Figure 2's eight panels: the
    faster-QK multipliers, panels g-h's sequence length, and each panel's PyTorch-initialised matrices, step cap and
    stop rule (the last three empty: every panel as the chapter; the ``official`` profile sets the authors')."""

    mult_e: float = 10.0  # (e) FAFO with the QK rate x10 (Figure 2)
    ramp_f: float = 20.0  # (f) FAFO with the QK rate rising 1x -> 20x
    mult_g: float = 5.0  # (g) CACO with the QK rate x5
    ramp_h: float = 10.0  # (h) CACO with the QK rate rising 1x -> 10x
    seq_len_gh: int | None = None  # panels (g), (h)'s own sequence length (None: the chapter's)
    pytorch_init: dict[str, tuple[str, ...]] = field(default_factory=dict)  # panel -> matrices at PyTorch's init
    panel_steps: dict[str, int] = field(default_factory=dict)  # panel -> its own step cap
    panel_stop: dict[str, int | None] = field(default_factory=dict)  # panel -> the authors' stop epoch, None: none

    def __post_init__(self) -> None:
        super().__post_init__()
        check_multipliers({name: getattr(self, name) for name in MULTIPLIERS})
        if self.seq_len_gh is not None:
            check_seq_len("seq_len_gh", self.seq_len_gh)
        _check_panel_map("panel_steps", self.panel_steps, is_positive_int, "{'e': 100000}")
        _check_panel_map(
            "panel_stop",
            self.panel_stop,
            lambda v: v is None or (is_positive_int(v) and v % self.eval_every == 0),
            f"{{'a': 250, 'f': None}} (epochs that are multiples of eval_every = {self.eval_every})",
        )
        _check_panel_map("pytorch_init", self.pytorch_init, lambda v: True, "{'a': ['W_K', 'W_Q']}")
        for key, names in self.pytorch_init.items():
            if not set(names) <= set(own := matrices(PARAMETERISATIONS[key])):
                raise ValueError(
                    f"pytorch_init[{key!r}] names {list(names)}, but panel {key} ({PARAMETERISATIONS[key]}) has only "
                    f"{sorted(own)}"
                )


def check_multipliers(values: Mapping[str, float]) -> None:
    """Figure 2's QK multipliers (``MULTIPLIERS`` -> value): each a finite number > 0."""
    for name, value in values.items():
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"the QK multiplier {name} must be a finite number > 0 (got {value!r})")


def _check_panel_map(name: str, value: Mapping[str, Any], valid: Callable[[Any], bool], example: str) -> None:
    """A map from Figure 2's panel keys (a-h) to per-panel values that ``valid`` accepts."""
    if not all(len(k) == 1 and k in PANEL_KEYS and valid(v) for k, v in value.items()):
        raise ValueError(f"{name} must map panel keys a-h to values like {example} (got {dict(value)!r})")


OFFICIAL = dict(  # the authors' code, as the `official` profile sets it (``fig2_dtap.PROFILES``)
    layout="official",
    distinct_weights="linear",
    vocab_size=50,
    seq_len=63,
    seq_len_gh=127,
    score_scale=50**-0.5,
    fresh_batches=True,
    class_draw="random",
    collapsed_init="factor",
    max_steps=1_000_000,
    mult_e=20.0,
    ramp_f=40.0,
    eval_every=50,
    pytorch_init=OFFICIAL_INIT,
    panel_steps=OFFICIAL_STEPS,
    panel_stop=OFFICIAL_STOP,
)


def panels(
    setup: SyntheticSetup,
    mult_e: float,
    ramp_f: float,
    mult_g: float,
    ramp_h: float,
    seq_len_gh: int | None = None,
    pytorch_init: Mapping[str, Sequence[str]] | None = None,
    panel_steps: Mapping[str, int] | None = None,
    panel_stop: Mapping[str, int | None] | None = None,
) -> list[Panel]:
    """(a-d) the four parameterisations at equal rates; (e) FAFO QK x k; (f) FAFO ramp; (g) CACO x k; (h) ramp; each
    under ``setup``'s rate, ramp and step cap. ``seq_len_gh`` (None: the chapter's) gives panels g and h their own
    sequence length (the authors' notebook); the maps from a panel key give a panel the authors' own choices:
    ``pytorch_init`` the matrices that start from PyTorch's default init, ``panel_steps`` its step cap (never beyond
    the setup's), ``panel_stop`` the authors' stop rule with epochs of that many steps (None: no early stop)."""
    init, steps, stops = pytorch_init or {}, panel_steps or {}, panel_stop or {}
    length: dict[str, dict[str, Any]] = {key: {"seq_len": seq_len_gh} for key in "gh"}

    def panel(
        key: str, parameterisation: str, qk_mult: float = 1.0, qk_schedule: str = "constant", **options: Any
    ) -> Panel:
        own: dict[str, Any] = {"max_steps": min(steps[key], setup.max_steps), "own_cap": True} if key in steps else {}
        return setup.panel(
            key,
            parameterisation,
            qk_mult,
            qk_schedule,
            pytorch_init=tuple(init.get(key, ())),
            stop_epoch=stops.get(key),
            early_stop=not (key in stops and stops[key] is None),
            **own,
            **options,
        )

    speeds: dict[str, tuple[float, str]] = {
        "e": (mult_e, "constant"),
        "f": (ramp_f, "ramp"),
        "g": (mult_g, "constant"),
        "h": (ramp_h, "ramp"),
    }
    return [
        panel(key, PARAMETERISATIONS[key], *speeds.get(key, (1.0, "constant")), **length.get(key, {}))
        for key in PANEL_KEYS
    ]


def runs(setup: Setup) -> list[Panel]:
    """Figure 2's eight panels under the chapter's setup."""
    return panels(
        setup,
        setup.mult_e,
        setup.ramp_f,
        setup.mult_g,
        setup.ramp_h,
        setup.seq_len_gh,
        setup.pytorch_init,
        setup.panel_steps,
        setup.panel_stop,
    )
