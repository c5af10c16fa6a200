"""The reviewers' tests: factorised against collapsed circuits on an exact instance of Theorem 1's setting, and the
falsifier (attention at matched losses, and after the loss is flat) on the population ODEs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, NamedTuple

import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..core.device import cpu_workers
from ..core.validation import require_positive_numbers
from ..metrics.verdicts import ODE_MATCH, REVIEW, Claim, check, claim_table
from ..present.plots import PALETTE, clear_axis_titles, log_axes, style_legend
from ..present.tables import readable
from ..present.text import scientific
from ..runs.store import Batch, Piece, slug
from ..theory import OrthogonalSetting, check_loss_threshold
from ..theory.instance import InstanceConfig, OrthogonalInstance
from ..theory.trajectories import STARTS, flow_or_falsifier, ode_errors
from .fig4_mu_trajectories import NEAR_ONE, NEAR_UNIFORM

ALPHA_MATCH = 0.05  # "follows the ODE" for attention: |alpha - alpha_ODE| at most this along the run


@dataclass(frozen=True, kw_only=True)
class Setup:
    """The exact instance [M, b, m, n, q] and seed, the ratios, horizon, starts and starting scale of its gradient
    flows; Theorem 1's ODE setting of the falsifier (Figure 4's sizes, mu_0) with its ratios, matched losses and
    horizon multiples (the reviews ask for these tests; the paper does not run them)."""

    M: int = 3  # classes of the exact instance (small enough to enumerate)
    b: int = 2  # tokens per class
    m: int = 2  # class positions
    n: int = 2  # background positions
    q: int = 1  # background vectors +-u_1..u_q
    seed: int = 0  # the token frame and the random starts
    ratios: tuple[float, ...] = (0.1, 10.0)  # eta_QK / eta_OV of the flows
    t_end: float = 2000.0  # the flows' horizon
    starts: tuple[str, ...] = ("ansatz", "random")  # products on Theorem 1's directions, or random
    start_scale: float = 0.05  # the size of the starting products (factors at 0 never move)
    ode_m: int = 5  # the falsifier's sizes: Figure 4's m
    ode_n: int = 50  # Figure 4's n
    ode_b: int = 50  # Figure 4's b
    ode_M: int = 5  # Figure 4's M
    mu0: float = 0.01  # both models' starting mu_OV = mu_QK
    falsifier_ratios: tuple[float, ...] = (0.01, 1.0, 100.0)  # the reviewers' r = 100 against r = 0.01
    losses: tuple[float, ...] = (1e-1, 1e-2, 1e-3)  # the matched stopping losses
    horizon: tuple[float, ...] = (1.0, 10.0, 100.0, 1000.0)  # multiples of the time the smallest loss is reached

    def __post_init__(self) -> None:
        _ = (self.instance, self.ode)  # builds both, checking their sizes
        for name in ("ratios", "falsifier_ratios", "horizon"):
            require_positive_numbers(name, getattr(self, name))
        require_positive_numbers("t_end and start_scale", [self.t_end, self.start_scale, self.mu0])
        for thr in self.losses:
            check_loss_threshold(thr, self.ode_M, "each of losses")
        if not set(self.starts) <= set(STARTS) or not self.starts:
            raise ValueError(f"starts must be a non-empty subset of {list(STARTS)} (got {list(self.starts)!r})")

    @property
    def instance(self) -> InstanceConfig:
        return InstanceConfig(M=self.M, b=self.b, m=self.m, n=self.n, q=self.q, seed=self.seed)

    @property
    def ode(self) -> OrthogonalSetting:
        return OrthogonalSetting(
            m=self.ode_m, n=self.ode_n, b=self.ode_b, M=self.ode_M, mu0_ov=self.mu0, mu0_qk=self.mu0
        )


PROFILES = {"smoke": dict(ratios=(10.0,), t_end=200.0, falsifier_ratios=(0.01, 100.0))}


class Dynamics(NamedTuple):
    """Both models' gradient flows on the exact instance (``curves``: every start and ratio) and their errors
    against each ODE; the falsifier's read-outs at matched losses and after the loss is flat."""

    curves: pd.DataFrame
    errors: pd.DataFrame
    matched: pd.DataFrame
    after: pd.DataFrame


def run(setup: Setup, *, device: torch.device | None = None, progress: bool = True) -> Dynamics:
    """The skeptic's test (both models from every start at every ratio, against both ODEs) and the falsifier on
    Theorem 1's ODE setting. Solved to tolerance on the CPU: ``device`` and ``progress`` are unused here."""
    inst = OrthogonalInstance(setup.instance)
    flows = [(start, r) for start in setup.starts for r in setup.ratios]
    shared = {"instance": asdict(setup.instance), "t_end": setup.t_end, "start_scale": setup.start_scale}
    tests = [list(setup.falsifier_ratios), list(setup.losses), list(setup.horizon)]
    batch = Batch(
        [
            *(Piece(slug(f"flow-{start}-{r:g}"), {**shared, "start": start, "ratio": r}) for start, r in flows),
            Piece("falsifier", {"ode": asdict(setup.ode), "tests": tests}),
        ],
        [flow_or_falsifier.__module__],
    )
    tasks = [("flow", (inst, r, setup.t_end, start, setup.start_scale, setup.instance.seed)) for start, r in flows] + [
        ("falsifier", (setup.ode, *tests))
    ]
    todo = batch.missing
    cpu = torch.device("cpu")
    batch.compute(flow_or_falsifier, [tasks[i] for i in todo], cpu_workers(cpu), lambda t, out: {todo[t]: out})
    stored = batch.tables()
    curves = pd.concat([t["main"] for t in stored[:-1]], ignore_index=True)
    return Dynamics(curves, ode_errors(curves), stored[-1]["matched"], stored[-1]["after"])


CLAIM_COLUMNS = (
    ("claim", "claim"),
    ("this run", "this run (solved to tolerance: no seeds)"),
    ("rule", "how the verdict is read"),
)


def claims(errors: pd.DataFrame, matched: pd.DataFrame, after: pd.DataFrame, alpha0: float) -> pd.DataFrame:
    """The reviewers' tests: which ODE describes each model, and the falsifier at matched losses (solved to
    tolerance: each check holds or fails)."""
    e = errors.set_index(["start", "model", "ODE"])

    def worst(start: str, model: str, ode: str, cols: tuple[str, ...] = ("mu_OV error", "mu_QK error")) -> float:
        return float(e.loc[(start, model, ode)][list(cols)].to_numpy().max())

    rows = []
    if "ansatz" in e.index.get_level_values(0):
        fr, fc = worst("ansatz", "factorised", "rescaled ODE"), worst("ansatz", "factorised", "collapsed ODE")
        cc = worst("ansatz", "collapsed", "collapsed ODE")
        rows += [
            Claim(
                "ansatz_collapsed_ode",
                "From a start on the ansatz, collapsed circuits follow Theorem 1's ODE.",
                f"relative error {scientific(cc)}",
                check(cc < ODE_MATCH),
                f"holds if the relative error stays below {scientific(ODE_MATCH, 0)}",
                cc,
            ),
            Claim(
                "ansatz_factorised_rescaled_ode",
                "From the same start, balanced factorised circuits follow the "
                "ODE rescaled by Lemma 2, not Theorem 1's.",
                f"relative error to the rescaled ODE {scientific(fr)}; to Theorem 1's {fc:.2f}",
                check(fr < ODE_MATCH < fc),
                f"holds if the error to the rescaled ODE is below {scientific(ODE_MATCH, 0)} and to Theorem "
                "1's above it",
                fr,
            ),
        ]
    if "random" in e.index.get_level_values(0):
        fa = worst("random", "factorised", "rescaled ODE", ("alpha error",))
        ca = worst("random", "collapsed", "collapsed ODE", ("alpha error",))
        rows.append(
            Claim(
                "random_alpha_follows_ode",
                "From small random balanced starts, each model's attention follows its ODE.",
                f"largest attention gap: collapsed {ca:.3f}, factorised {fa:.3f}",
                check(ca <= ALPHA_MATCH and fa <= ALPHA_MATCH),
                f"holds if both gaps are at most {ALPHA_MATCH:g}",
                max(ca, fa),
            )
        )
    smallest = matched["stopping_loss"].min()
    at = matched[matched["stopping_loss"] == smallest].set_index(["model", "ratio"])["alpha"]
    for model in at.index.get_level_values(0).unique():
        a = at.loc[model]
        lo, hi = a.index.min(), a.index.max()
        rows.append(
            Claim(
                f"falsifier_{model}",
                f"The falsifier, {model}: at the same loss "
                f"{scientific(smallest, 0)}, attention is near 1 with the query-key circuit {hi:g} times "
                f"faster and near uniform at {lo:g} times.",
                f"attention α = {a[hi]:.4f} against {a[lo]:.4f} ({a[lo] / alpha0:.2f} times uniform)",
                check(bool(a[hi] >= NEAR_ONE and a[lo] <= NEAR_UNIFORM * alpha0)),
                f"holds if the first is at least {NEAR_ONE:g} and the second at most {NEAR_UNIFORM:g} times "
                "uniform (Figure 4's reading)",
            )
        )
    r_hi = after["ratio"].max()
    for model, part in after[after["ratio"] == r_hi].groupby("model", sort=False):
        first, last = part.iloc[0], part.iloc[-1]
        rows.append(
            Claim(
                f"alpha_grows_after_flat_{model}",
                f"{model}, query-key circuit {r_hi:g} times faster: attention keeps growing after the loss is flat.",
                f"attention α {first['alpha']:.4f} → {last['alpha']:.4f} while the loss goes "
                f"{scientific(first['loss'])} → {scientific(last['loss'])} ({last['time / t_L']:g} times "
                "longer)",
                check(bool(last["alpha"] > first["alpha"])),
                "holds if attention is higher at the end",
                last["alpha"] - first["alpha"],
            )
        )
    return claim_table(replace(row, kind=REVIEW) for row in rows)


MODELS = {"collapsed": "collapsed model", "factorised": "factorised model"}
ODES = {"collapsed ODE": ("dash", "Theorem 1's ODE"), "rescaled ODE": ("dot", "the ODE rescaled by Lemma 2")}
QUANTITIES = (("mu_ov", "μ<sub>OV</sub>"), ("mu_qk", "μ<sub>QK</sub>"), ("alpha", "attention α"))


def models_figure(curves: pd.DataFrame, start: str) -> go.Figure:
    """From one start: mu_OV, mu_QK and alpha against time for each ratio r (at most two), two panels to a row: each
    model's gradient flow in its colour, Theorem 1's ODE dashed and the rescaled ODE dotted, in black."""
    part = curves[(curves["start"] == start) & (curves["t"] > 0)]
    ratios = sorted(part["ratio"].unique())[:2]
    panels = [(column, label, r) for column, label in QUANTITIES for r in ratios]
    rows = -(-len(panels) // 2)
    fig = make_subplots(
        rows=rows,
        cols=2,
        subplot_titles=[f"{label}, r = {r:g}" for _, label, r in panels],
        horizontal_spacing=0.14,
        vertical_spacing=0.35 / rows,
        x_title="time t",
    )
    for j, (column, _, r) in enumerate(panels):
        where: dict[str, Any] = dict(row=j // 2 + 1, col=j % 2 + 1)
        cur = part[part["ratio"] == r]
        for i, (model, name) in enumerate(MODELS.items()):
            one = cur[cur["model"] == model]
            fig.add_trace(
                go.Scatter(
                    x=one["t"],
                    y=one[column],
                    name=name,
                    legendgroup=name,
                    showlegend=j == 0,
                    line=dict(color=PALETTE[i], width=2.5),
                ),
                **where,
            )
        ode = cur[cur["model"] == "collapsed"]  # both ODEs start where both models do: the same for each
        for name, (dash, words) in ODES.items():
            fig.add_trace(
                go.Scatter(
                    x=ode["t"],
                    y=ode[f"{name} {column}"],
                    name=words,
                    legendgroup=name,
                    showlegend=False,
                    line=dict(color="#24292f", dash=dash, width=1.5),
                ),
                **where,
            )
        log_axes(fig, x=True, **where)
    for name, (dash, words) in ODES.items():
        style_legend(fig, name, dash, words)
    clear_axis_titles(fig, "time t", None)
    fig.update_layout(
        height=280 * rows + 170,
        legend=dict(orientation="h", yanchor="top", y=-0.12, x=0),
        margin=dict(l=50, r=15, t=40, b=90),
    )
    return fig


ERROR_COLUMNS = {
    "mu_OV error": r"$\mu_{OV}$ relative error",
    "mu_QK error": r"$\mu_{QK}$ relative error",
    "alpha error": r"$\alpha$ largest gap",
    "max off-ansatz": "largest part off the ansatz",
}


def errors_shown(errors: pd.DataFrame, start: str) -> pd.DataFrame:
    """For reading (``math_table``): from one start, each model's errors against each ODE, in scientific notation."""
    table = errors[errors["start"] == start].drop(columns="start")
    table = table.assign(
        ratio=table["ratio"].map(lambda r: f"{r:g}"),
        ODE=table["ODE"].map({"collapsed ODE": "Theorem 1's", "rescaled ODE": "rescaled (Lemma 2)"}),
    )
    table = table.set_index(["ratio", "model", "ODE"])[list(ERROR_COLUMNS)].map(scientific)
    table.index.names = ["$r$", "model", "against the ODE"]
    return table.rename(columns=ERROR_COLUMNS)


def matched_shown(matched: pd.DataFrame, value: str) -> pd.DataFrame:
    """For reading (``math_table``): one value (``alpha`` to three decimals, or ``effective ratio`` in scientific
    notation) at each matched stopping loss (columns, largest first), one row per model and ratio."""
    table = matched.pivot_table(index=["model", "ratio"], columns="stopping_loss", values=value, sort=False)
    table = table[sorted(table.columns, reverse=True)]
    table.columns = [f"at the loss {scientific(c, 0)}" for c in table.columns]
    table.index = table.index.set_levels([f"{r:g}" for r in table.index.levels[1]], level=1)
    table.index.names = ["model", "$r$"]
    return table.map((lambda v: f"{v:.3f}") if value == "alpha" else scientific)


def after_shown(after: pd.DataFrame) -> pd.DataFrame:
    """For reading (``math_table``): attention, the loss and mu_QK at multiples of t_L, per model and ratio."""
    table = after.assign(ratio=after["ratio"].map(lambda r: f"{r:g}"), k=after["time / t_L"].map(lambda k: f"{k:g}"))
    table = table.set_index(["model", "ratio", "k"])[["alpha", "loss", "mu_qk"]]
    table["loss"] = table["loss"].map(scientific)
    return readable(
        table,
        {"alpha": 4, "mu_qk": 3},
        labels={
            "k": "time, in units of $t_L$",
            "ratio": "$r$",
            "alpha": r"attention $\alpha$",
            "loss": "loss",
            "mu_qk": r"$\mu_{QK}$",
        },
    )
