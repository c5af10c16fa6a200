"""Every chapter's parameters under each profile: the one source of truth for them.

``paper`` holds the paper's settings; the other profiles list only what they change. ``auto`` means ``paper`` when a
GPU is present and ``default`` otherwise. ``official`` follows the authors' notebooks where they differ from the paper.
"""
from __future__ import annotations

import ast
import copy
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .theory import Figure4Setup, RatioSweep
from .validation import is_positive_int, require_positive_numbers

PROFILES = ("smoke", "default", "paper", "official")
CHOICES = PROFILES + ("auto",)


class ParameterError(ValueError):
    """A parameter or profile that is not allowed; the message names it and what is allowed."""


@dataclass(frozen=True)
class ChapterSpec:
    title: str
    paper: dict[str, Any]
    changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    validate: Callable[[dict[str, Any]], None] = lambda params: None  # raises ParameterError or ValueError
    reads_results: bool = False  # True for a chapter built from other chapters' results (runs last)
    datasets: tuple[str, ...] = ()  # the real datasets it reads (their files are part of its fingerprint)
    has_claims: bool = True  # False for a chapter that writes no claim table (the scorecard skips it)


def validate_figure4(p: dict[str, Any]) -> None:
    """Figure 4: the typed setup (``theory.Figure4Setup``) checks sizes, rates, ratios and losses."""
    Figure4Setup.of(p)


TASK = dict(n_classes=4, n_distinct=10, n_common=10, seq_len=64, gamma=11 / 31, vocab_size=None,
            distinct_weights="uniform", layout="disjoint")  # the synthetic task of Section 4, shared by Figures 2-3


def _check_seeds(seeds: Any) -> None:
    if not (isinstance(seeds, list) and seeds and all(isinstance(s, int) for s in seeds)
            and len(set(seeds)) == len(seeds)):
        raise ParameterError(f"seeds must be a non-empty list of distinct integers (got {seeds!r})")


def validate_figure3(p: dict[str, Any]) -> None:
    """Figure 3: the seeds, then the typed setup (``fixed_attention.FixedAttentionSetup``) checks the rest."""
    from .fixed_attention import FixedAttentionSetup
    _check_seeds(p["seeds"])
    FixedAttentionSetup.of(p)


def validate_figure2(p: dict[str, Any]) -> None:
    """Figure 2: the shared synthetic setup (task, model, training, bins; ``experiments.SyntheticSetup``), panels
    g-h's sequence length, and each panel's model, rates, PyTorch-initialised matrices, step cap and stop rule."""
    from .data.synthetic import SyntheticConfig
    from .experiments import SyntheticSetup, figure2_runs
    _check_seeds(p["seeds"])
    try:
        setup = SyntheticSetup.of(p)
        if p["seq_len_gh"] is not None:
            SyntheticConfig(seq_len=p["seq_len_gh"])
        _check_panel_map("pytorch_init", p["pytorch_init"], lambda v: isinstance(v, list), "{'a': ['W_K', 'W_Q']}")
        _check_panel_map("panel_steps", p["panel_steps"], is_positive_int, "{'e': 100000}")
        _check_panel_map("panel_stop", p["panel_stop"],
                         lambda v: v is None or (is_positive_int(v) and v % setup.eval_every == 0),
                         f"{{'a': 250, 'f': None}} (epochs that are multiples of eval_every = {setup.eval_every})")
        for panel, run in figure2_runs(p, setup):
            cfg = setup.model(panel)
            setup.schedule(panel, run)
            names = {"W_K", "W_Q"} if cfg.qk_factorised else {"W_QK"}
            names |= {"W_O", "W_V"} if cfg.ov_factorised else {"W_OV"}
            if not set(panel.pytorch_init) <= names:
                raise ParameterError(f"pytorch_init[{panel.key!r}] names {panel.pytorch_init}, but panel "
                                     f"{panel.key} ({panel.parameterisation}) has only {sorted(names)}")
    except ValueError as err:
        raise ParameterError(str(err).replace("qk_mult", "QK multiplier (mult_e, ramp_f, mult_g, ramp_h)")) from None


def _check_panel_map(name: str, value: Any, valid: Callable[[Any], bool], example: str) -> None:
    """A map from Figure 2's panel keys (a-h) to per-panel values that ``valid`` accepts."""
    if not (isinstance(value, dict) and all(isinstance(k, str) and len(k) == 1 and k in "abcdefgh" and valid(v)
                                            for k, v in value.items())):
        raise ParameterError(f"{name} must map panel keys a-h to values like {example} (got {value!r})")


ATLAS_GRID = ("inits", "lrs", "scaled_scores", "mult_sets")  # the atlas's grid; the rest is Figure 2's setup


def validate_atlas(p: dict[str, Any]) -> None:
    """The atlas: a non-empty grid ([init kind, scale] pairs, rates, score scalings, multiplier sets of four), each
    setting a valid Figure 2 setup; the scheduler None (the default), 'serial' or an address; workers None (one per
    core) or a count."""
    for name in ATLAS_GRID:
        if not isinstance(p[name], list) or not p[name]:
            raise ParameterError(f"{name} must be a non-empty list (got {p[name]!r})")
    for pair in p["inits"]:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise ParameterError(f"each of inits must be [kind, scale], e.g. ['balanced', 0.1] (got {pair!r})")
    if not all(isinstance(s, bool) for s in p["scaled_scores"]):
        raise ParameterError(f"scaled_scores must hold True/False (got {p['scaled_scores']!r})")
    for mults in p["mult_sets"]:
        if not (isinstance(mults, list) and len(mults) == 4):
            raise ParameterError(f"each of mult_sets must be [mult_e, ramp_f, mult_g, ramp_h] (got {mults!r})")
    if not (p["scheduler"] is None or (isinstance(p["scheduler"], str) and p["scheduler"])):
        raise ParameterError(f"scheduler must be None, 'serial' or a scheduler address (got {p['scheduler']!r})")
    if not (p["workers"] is None or is_positive_int(p["workers"])):
        raise ParameterError(f"workers must be None (one per core) or an integer >= 1 (got {p['workers']!r})")
    base = {k: v for k, v in p.items() if k not in ATLAS_GRID + ("scheduler", "workers")}  # Figure 2's setup
    for (kind, scale), lr, mults in itertools.product(p["inits"], p["lrs"], p["mult_sets"]):
        validate_figure2(base | dict(init=kind, init_scale=scale, lr=lr, score_scale=1.0, seq_len_gh=None,
                                     pytorch_init={}, panel_steps={}, panel_stop={},
                                     **dict(zip(("mult_e", "ramp_f", "mult_g", "ramp_h"), mults))))


def validate_theorem1(p: dict[str, Any]) -> None:
    """Theorem 1 checks: the typed setup (``theory.instance.Theorem1Setup``): sizes small enough to enumerate,
    check points, the flow."""
    from .theory.instance import Theorem1Setup
    Theorem1Setup.of(p)


def validate_lemma3(p: dict[str, Any]) -> None:
    """Lemma 3: Theorem 1's ratio sweep (``theory.RatioSweep``), t_max > 0, levels in (0, 1)."""
    RatioSweep.of(p)
    require_positive_numbers("t_max", [p["t_max"]])
    if not all(0 < v < 1 for v in p["levels"]):
        raise ParameterError(f"levels must lie in (0, 1) (got {p['levels']!r})")


def validate_appendix_d(p: dict[str, Any]) -> None:
    """Appendix D: sizes d >= M >= 2, a positive time span, step sizes in (0, t_end]
    (``theory.factorised.AppendixDSetup``)."""
    from .theory.factorised import AppendixDSetup
    AppendixDSetup.of(p)


def validate_factorised_dynamics(p: dict[str, Any]) -> None:
    """The exact instance, the starting scale and kinds, the ODE sizes and the falsifier's losses and horizon
    (``theory.trajectories.DynamicsSetup``)."""
    from .theory.trajectories import DynamicsSetup
    DynamicsSetup.of(p)


def validate_corollaries(p: dict[str, Any]) -> None:
    """The Figure 2 task and training, the corollary settings, the AdamW runs and the recorder."""
    from .engine import UpdateRatios
    from .experiments import Panel, SyntheticSetup
    from .training import TrainConfig
    _check_seeds(p["seeds"])
    if p["ov_lr_max_steps"] is not None and p["ov_lr_max_steps"] < 1:
        raise ParameterError(f"ov_lr_max_steps must be an integer >= 1, or None for max_steps / ov_mult "
                             f"(got {p['ov_lr_max_steps']})")
    if not 0 < p["ov_mult"] <= 1 or p["qk_mult"] < 1 or p["ov_decay"] < 0 or not p["ov_init_mult"] > 0:
        raise ParameterError(f"need ov_mult in (0, 1], qk_mult >= 1, ov_decay >= 0, ov_init_mult > 0 (got "
                             f"{p['ov_mult']}, {p['qk_mult']}, {p['ov_decay']}, {p['ov_init_mult']})")
    setup = SyntheticSetup.of(p)
    setup.model(Panel("base", "FAFO"))
    require_positive_numbers("adam_lrs", p["adam_lrs"])
    TrainConfig(max_steps=p["adam_max_steps"])
    UpdateRatios(p["record_every"])


def validate_real_data(p: dict[str, Any]) -> None:
    """Real-data chapters (Table 1, Table 5): the typed setup (``real_data.RealSetup``) checks seeds, data sizes,
    the classifier, the optimiser, the metrics' settings and Table 5's depths."""
    from .real_data import RealSetup
    RealSetup.of(p)


def validate_squad(p: dict[str, Any]) -> None:
    """SQuAD: the real-data checks, the window and cut sizes, the held-out share of articles
    (``squad_runs.SquadSetup``)."""
    from .squad_runs import SquadSetup
    SquadSetup.of(p)


REAL = dict(seeds=[0, 1, 2, 3, 4], download=True, max_train=None, max_test=None, data_seed=0, min_freq=1, d_model=64,
            n_heads=4, d_head=64, d_mlp=256, batch_size=32, weight_decay=1e-4, evals_per_epoch=2, eval_batch=256,
            identity_weight=0.0, k_percents=[1.0, 5.0, 10.0, 20.0, 50.0], erase="remove", threshold=0.5,
            confidence=0.5, bins=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0], rationale_rule="union")
REAL_SMOKE = dict(seeds=[0, 1], max_train=200, max_test=100, epochs=1, d_model=16, d_head=8, d_mlp=32)


# Figure 2 as the authors' notebooks train each panel: the matrices they leave at PyTorch's default, the epochs x
# batches of each training loop, and its stop rule per epoch of that many batches. (a)-(d) from the heatmap notebook,
# (e)-(h) from the row-2 notebook.
OFFICIAL_INIT = {"a": ["W_K", "W_Q"], "d": ["W_QK", "W_OV"], "g": ["W_QK", "W_OV"], "h": ["W_QK", "W_OV"]}
# Each loop as (epochs, batches per epoch, whether it checks the stop rule after an epoch).
OFFICIAL_LOOPS = {"a": (2500, 250, True), "b": (2500, 250, True), "c": (5000, 200, True), "d": (2500, 200, True),
                  "e": (1000, 100, True), "f": (2000, 100, False), "g": (2000, 100, False), "h": (2000, 100, False)}
OFFICIAL_STEPS = {k: epochs * batches for k, (epochs, batches, _) in OFFICIAL_LOOPS.items()}
OFFICIAL_STOP = {k: batches if stops else None for k, (_, batches, stops) in OFFICIAL_LOOPS.items()}


def _synthetic_config(p: dict[str, Any]):
    from .data.synthetic import synthetic_config  # torch is imported only when a synthetic chapter is checked
    return synthetic_config(p)


CHAPTERS: dict[str, ChapterSpec] = {
    "fig2_dtap": ChapterSpec(
        title="Figure 2: DTAP heatmaps of the four parameterisations",
        paper=dict(seeds=[0, 1, 2, 3, 4], **TASK, fresh_batches=False, n_train=6400,
                   n_test=6400, init="identity", init_scale=1e-6, score_scale=1.0, attend_to_query=True,
                   lr=1e-2, batch_size=32, target_nll=1e-3, max_steps=700_000, eval_every=200, ramp_steps=200_000,
                   mult_e=10.0, ramp_f=20.0, mult_g=5.0, ramp_h=10.0, seq_len_gh=None, pytorch_init={},
                   panel_steps={}, panel_stop={}, bins=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        changes={"smoke": dict(seeds=[0, 1], n_train=640, n_test=640, lr=1.0, max_steps=300, eval_every=20,
                               ramp_steps=200),
                 "official": dict(layout="official", distinct_weights="linear", vocab_size=50, seq_len=63,
                                  seq_len_gh=127, score_scale=50 ** -0.5, fresh_batches=True, max_steps=1_000_000,
                                  mult_e=20.0, ramp_f=40.0, eval_every=50, pytorch_init=OFFICIAL_INIT,
                                  panel_steps=OFFICIAL_STEPS, panel_stop=OFFICIAL_STOP)},
        validate=validate_figure2,
    ),
    "fig3_incentive": ChapterSpec(
        title="Figure 3: fixed-attention loss and improvement-incentive curves",
        paper=dict(seeds=[0, 1, 2], **TASK, alphas=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
                   others="common", n_train=32_000, n_test=6400, init="balanced", init_scale=0.6, lr=1e-2,
                   batch_size=128, epochs=500, delta=0.005, check_epoch=100, fade_fraction=0.1),
        changes={"smoke": dict(seeds=[0], alphas=[0.2, 0.6, 1.0], n_train=1280, n_test=640, epochs=3,
                               check_epoch=2),
                 "official": dict(layout="official", distinct_weights="linear", vocab_size=50, others="all",
                                  seeds=[0])},
        validate=validate_figure3,
    ),
    "fig4_mu_trajectories": ChapterSpec(
        title="Figure 4: μ(t) trajectories",
        paper=dict(m=5, n=50, b=50, M=5, eta_ov=1.0, ratios=[0.01, 0.1, 1.0, 10.0, 100.0], target_loss=1e-4,
                   table_losses=[1e-1, 1e-2, 1e-3], n_matched=60, time_axis="normalised"),
        changes={"smoke": dict(ratios=[0.01, 1.0, 100.0], target_loss=1e-3, n_matched=20),
                 "official": dict(M=20)},
        validate=validate_figure4,
    ),
    "hatexplain": ChapterSpec(
        title="Table 1 and Figure 7: HateXplain",
        paper=dict(REAL, max_len=128, n_layers=1, mlp=True, residual=True, optimizer="adamw", lr=5e-5, qk_mult=30.0,
                   epochs=30),
        changes={"default": dict(max_len=64, lr=1e-3, epochs=3), "smoke": dict(REAL_SMOKE, max_len=32, lr=1e-3)},
        validate=validate_real_data, datasets=("hatexplain",),
    ),
    "hatexplain_layers": ChapterSpec(
        title="Table 5: HateXplain with two and four layers",
        paper=dict(REAL, max_len=128, layer_counts=[2, 4], mlp=True, residual=True, optimizer="adamw", lr=5e-5,
                   qk_mult=30.0, epochs=30),
        changes={"default": dict(max_len=64, lr=1e-3, epochs=1),
                 "smoke": dict(REAL_SMOKE, max_len=32, lr=1e-3, layer_counts=[2])},
        validate=validate_real_data, datasets=("hatexplain",),
    ),
    "sva": ChapterSpec(
        title="Table 1 and Figure 6: subject-verb agreement",
        paper=dict(REAL, max_len=64, n_layers=1, mlp=False, residual=False, optimizer="adamw", lr=1e-5,
                   qk_mult=100.0, epochs=15, min_freq=2, heldout_fraction=0.1),
        changes={"smoke": dict(REAL_SMOKE, max_len=32, lr=1e-3),  # default = paper: 15 epochs at 1e-5
                 "official": dict(optimizer="sgd", batch_size=256)},
        validate=validate_real_data, datasets=("sva",),
    ),
    "squad": ChapterSpec(
        title="Table 1 and Figure 5: SQuAD",
        paper=dict({k: v for k, v in REAL.items() if k != "rationale_rule"}, test_fraction=0.2, window=48,
                   max_question=16, max_answer=8, min_freq=2, n_layers=6, d_model=64, n_heads=4, d_head=16,
                   d_mlp=256, optimizer="adamw", lr=5e-5, qk_mult=20.0, epochs=30, identity_weight=0.5,
                   threshold=0.1, confidence=0.1, bins=[0.0, 0.05, 0.1, 0.5, 1.0], eval_batch=128,
                   output="vocabulary"),
        changes={"default": dict(lr=1e-3, epochs=3, output="window", window=32, max_question=12, max_test=1200),
                 "smoke": dict(REAL_SMOKE, lr=1e-3, window=12, max_question=6, max_answer=3, n_layers=2,
                               d_head=8, min_freq=1)},
        validate=validate_squad, datasets=("squad",),
    ),
    "theorem1": ChapterSpec(
        title="Theorem 1, checked: symbolic reduction and exact instances",
        paper=dict(sizes=[[3, 2, 2, 2, 1], [4, 3, 2, 1, 2], [2, 3, 3, 2, 1]], seed=0,
                   points=[[0.5, 0.0], [1.0, 0.3], [2.0, -0.4], [3.0, 1.5], [0.2, 2.5]],
                   flow_ratios=[0.1, 10.0], flow_t_end=2000.0),
        changes={"smoke": dict(sizes=[[3, 2, 2, 2, 1]], flow_ratios=[10.0], flow_t_end=200.0)},
        validate=validate_theorem1,
    ),
    "lemma3": ChapterSpec(
        title="Lemma 3, checked: the proof's steps and the four bounds",
        paper=dict(m=5, n=50, b=50, M=5, eta_ov=1.0, ratios=[0.01, 0.1, 1.0, 10.0, 100.0], target_loss=1e-30,
                   t_max=1e40, levels=[0.9, 0.5]),
        changes={"smoke": dict(ratios=[0.01, 100.0], target_loss=1e-6)},
        validate=validate_lemma3,
    ),
    "appendix_d": ChapterSpec(
        title="Appendix D, checked: factorised against collapsed circuits",
        paper=dict(seed=0, d=5, M=3, t_end=5.0, lrs=[0.1, 0.01, 0.001]),
        changes={"smoke": dict(lrs=[0.1, 0.01])},
        validate=validate_appendix_d,
    ),
    "factorised_dynamics": ChapterSpec(
        title="Factorised against collapsed trajectories, and the falsifier",
        paper=dict(M=3, b=2, m=2, n=2, q=1, seed=0, ratios=[0.1, 10.0], t_end=2000.0, starts=["ansatz", "random"],
                   start_scale=0.05, ode_m=5, ode_n=50, ode_b=50, ode_M=5, mu0=0.01,
                   falsifier_ratios=[0.01, 1.0, 100.0], losses=[1e-1, 1e-2, 1e-3], horizon=[1.0, 10.0, 100.0, 1000.0]),
        changes={"smoke": dict(ratios=[10.0], t_end=200.0, falsifier_ratios=[0.01, 100.0])},
        validate=validate_factorised_dynamics,
    ),
    "corollaries": ChapterSpec(
        title="The untested corollaries: other ways of slowing OV, and AdamW",
        paper=dict(seeds=[0, 1, 2, 3, 4], **TASK, fresh_batches=False, n_train=6400, n_test=6400,
                   init="identity", init_scale=1e-6, score_scale=1.0, attend_to_query=True, lr=1e-2, batch_size=32,
                   target_nll=1e-3, max_steps=700_000, eval_every=200, ramp_steps=1, qk_mult=10.0, ov_mult=0.1,
                   ov_lr_max_steps=None, ov_decay=1e-4, ov_init_mult=0.01, adam_lrs=[1e-3, 1e-2],
                   adam_max_steps=20_000, record_every=50, bins=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        changes={"default": dict(ov_lr_max_steps=700_000),
                 "smoke": dict(seeds=[0, 1], n_train=640, n_test=640, lr=1.0, max_steps=300, eval_every=20,
                               adam_max_steps=100, record_every=5)},
        validate=validate_corollaries,
    ),
    "errata": ChapterSpec(title="Errata: formulas wrong or incomplete as printed", paper=dict(seed=0),
                          has_claims=False),
    "atlas": ChapterSpec(
        title="Where Figure 2's claims hold: a sensitivity atlas",
        paper=dict(seeds=[0, 1, 2, 3, 4], **TASK, fresh_batches=False, n_train=6400, n_test=6400,
                   attend_to_query=True, batch_size=32, target_nll=1e-3, max_steps=700_000, eval_every=200,
                   ramp_steps=200_000, bins=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
                   inits=[["identity", 1e-6], ["balanced", 0.01], ["balanced", 0.1], ["balanced", 1.0],
                          ["pytorch", 1.0]],
                   lrs=[0.01, 0.1, 1.0], scaled_scores=[False, True],
                   mult_sets=[[10.0, 20.0, 5.0, 10.0], [20.0, 40.0, 5.0, 10.0]], scheduler=None, workers=None),
        changes={"default": dict(inits=[["identity", 1e-6], ["balanced", 0.1], ["pytorch", 1.0]], lrs=[0.1, 1.0],
                                 mult_sets=[[10.0, 20.0, 5.0, 10.0]], max_steps=60_000, ramp_steps=20_000),
                 "smoke": dict(seeds=[0, 1], n_train=320, n_test=320, inits=[["identity", 1e-6], ["balanced", 0.1]],
                               lrs=[1.0], scaled_scores=[False], mult_sets=[[10.0, 20.0, 5.0, 10.0]],
                               max_steps=200, eval_every=20, ramp_steps=100, scheduler="serial")},
        validate=validate_atlas, has_claims=False,
    ),
    "scorecard": ChapterSpec(title="Scorecard: every claim, side by side", paper={}, reads_results=True),
}


def concrete_profile(profile: str, has_gpu: bool | None = None) -> str:
    """Resolve ``auto`` (paper on the CUDA device that ``pick_device`` chooses, else default); reject unknown
    names."""
    if profile not in CHOICES:
        raise ParameterError(f"unknown profile {profile!r}; allowed: {', '.join(CHOICES)}")
    if profile != "auto":
        return profile
    if has_gpu is None:
        from .device import pick_device
        try:
            has_gpu = pick_device().type == "cuda"  # honours QKOV_DEVICE
        except (ValueError, RuntimeError) as err:
            raise ParameterError(str(err)) from None
    return "paper" if has_gpu else "default"


def chapter_spec(chapter: str) -> ChapterSpec:
    if chapter not in CHAPTERS:
        raise ParameterError(f"unknown chapter {chapter!r}; chapters: {', '.join(CHAPTERS)}")
    return CHAPTERS[chapter]


OPTIONAL_TYPES = {"scheduler": str}  # what a parameter whose paper value is None takes instead (else an int)


def _check_type(chapter: str, name: str, value: Any, reference: Any) -> Any:
    """Overrides keep the paper value's type (an int is accepted where a float is expected; where the paper value
    is None, meaning 'as needed' or 'the default', None or a value of ``OPTIONAL_TYPES`` (an int unless named))."""
    if reference is None:
        kind = OPTIONAL_TYPES.get(name, int)
        if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
            return value
        raise ParameterError(f"parameter {name!r} of {chapter} must be None or a {kind.__name__} (got {value!r})")
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
    try:
        spec.validate(params)
    except ParameterError:
        raise
    except ValueError as err:  # a config object's own check: the same kind of error for every chapter
        raise ParameterError(str(err)) from None
    return profile, params


def parse_value(text: str) -> Any:
    """A command-line value: a Python literal (1, 0.5, [1, 2], 'x') where it parses, else the plain string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
