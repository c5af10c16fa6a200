"""Figure 2 (Section 4): DTAP heatmaps of the four parameterisations and of the faster-QK panels on the synthetic
next-token task."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
import torch

from ..core.device import pick_device
from ..data import authors
from ..metrics import mean_std
from ..metrics.compound import each
from ..metrics.official import Guard, OfficialUnit
from ..metrics.verdicts import (
    PERCENT,
    Claim,
    Interval,
    above,
    at_least,
    beside_official,
    claim_table,
    rule,
    weakest,
)
from ..present.plots import dtap_grid
from ..runs.fig2_panels import (  # noqa: F401 - the chapter's setup and panels, as its readers name them
    MULTIPLIERS,
    OFFICIAL,
    OFFICIAL_INIT,
    OFFICIAL_LOOPS,
    OFFICIAL_STEPS,
    OFFICIAL_STOP,
    PANEL_KEYS,
    PARAMETERISATIONS,
    Setup,
    check_multipliers,
    panels,
    runs,
)
from ..runs.synthetic_runs import Panel, PanelResult, synthetic_data, train_runs
from ..runs.synthetic_tables import mean_pm_std

BESIDE = ("official",)  # the authors' setup: its results of this chapter are set beside this run's

PROFILES = {
    "smoke": dict(seeds=(0, 1), n_train=640, n_test=640, lr=1.0, max_steps=300, eval_every=20, ramp_steps=200),
    "official": OFFICIAL,
}


def run(setup: Setup, *, device: torch.device | None = None, progress: bool = True) -> list[PanelResult]:
    """Every panel and seed trained on its seed's training set and evaluated on its held-out set (``device`` None:
    ``pick_device()``)."""
    data = synthetic_data(setup.data, setup.seeds, setup.n_train, setup.n_test)
    return train_runs(runs(setup), setup, data, device or pick_device(), progress)


SUBSTANTIAL = 25.0  # "substantial mass top-left" is read as at least this percent of test examples
TOP_RIGHT = 50.0  # "mass near the top-right" is read as ACMC of at least this percent
ACC_SLACK = 1.0  # "without hurting prediction": test accuracy at most this many points lower
FASTER = (("e", "a"), ("f", "a"), ("g", "d"), ("h", "d"))  # each faster-QK panel and the panel it speeds up


def claims(summary: pd.DataFrame) -> pd.DataFrame:
    """Section 4 / Figure 2, from the per-seed summary (columns panel a-h, seed, ACMC, top_left, accuracy, in %):
    each claim read through the 95% interval over seeds, the faster-QK ones on differences paired by seed."""
    wide = summary.pivot_table(index="seed", columns="panel", values=["ACMC", "top_left", "accuracy"])

    def of(metric: str, panel: str) -> Interval:
        return Interval.of(wide[(metric, panel)].dropna(), PERCENT)

    def gain(metric: str, faster: str, base: str) -> Interval:
        return Interval.of((wide[(metric, faster)] - wide[(metric, base)]).dropna())

    def listed(parts: dict[str, Interval], signed: bool = False) -> str:
        return ", ".join(f"{k} {i.text(1, signed)}" for k, i in parts.items())

    collapsed = {f"({k})": of("ACMC", k) for k in "bd"}
    fafo = of("top_left", "a")
    moved = {f"({f}) vs ({b})": gain("ACMC", f, b) for f, b in FASTER}
    kept = {f"({f}) vs ({b})": gain("accuracy", f, b) for f, b in FASTER}
    top_right = rule("at least", "ACMC of (b) and of (d)", f"{TOP_RIGHT:g}%")
    moved_rule = rule("above", "ACMC of each faster panel and its base panel", "0", paired=True)
    kept_rule = rule("at least", "test accuracy of each faster panel and its base panel", f"-{ACC_SLACK:g} point", True)
    collapsed_is, collapsed_why = each(collapsed, lambda i: at_least(i, TOP_RIGHT), top_right)
    moved_is, moved_why = each(moved, lambda i: above(i, 0.0), moved_rule, signed=True)
    kept_is, kept_why = each(kept, lambda i: at_least(i, -ACC_SLACK), kept_rule, signed=True)
    return claim_table(
        [
            Claim(
                "collapsed_ov_top_right",
                "Collapsed-OV models (FACO, CACO) put their test sequences near the top-right "
                "corner: high attention on the class's distinct tokens and a confident correct prediction.",
                f"ACMC: {listed(collapsed)} %",
                collapsed_is,
                top_right,
                *weakest(list(collapsed.values())).numbers,
                authors="top-right cell: " + authors.summary(f"fig2.{k}.top_right_cell" for k in "bd"),
                why=collapsed_why,
            ),
            Claim(
                "fafo_top_left",
                "FAFO puts substantial mass top-left: correct predictions with weak attention on the "
                "informative tokens.",
                f"top-left cell: (a) {fafo.text()} % of test sequences",
                at_least(fafo, SUBSTANTIAL),
                rule("at least", "the top-left share of (a)", f"{SUBSTANTIAL:g}%"),
                *fafo.numbers,
                authors=authors.summary(["fig2.a.top_row_weak_attention"]),
            ),
            Claim(
                "faster_qk_top_right",
                "A faster query-key learning rate moves mass to the top-right for every parameterisation.",
                f"ACMC gain: {listed(moved, True)} points",
                moved_is,
                moved_rule,
                *weakest(list(moved.values())).numbers,
                authors="top-right cell: " + authors.summary(f"fig2.{k}.top_right_cell" for k in "aefdgh"),
                why=moved_why,
            ),
            Claim(
                "prediction_kept",
                "Faster query-key learning does not hurt prediction.",
                f"accuracy change: {listed(kept, True)} points",
                kept_is,
                kept_rule,
                *weakest(list(kept.values())).numbers,
                authors="accuracy: " + authors.summary(f"fig2.{k}.accuracy" for k in "abgh"),
                why=kept_why,
            ),
        ]
    )


def heatmaps(results: Sequence[PanelResult], bins: Sequence[float]) -> tuple[go.Figure, go.Figure]:
    """The eight panels' DTAP heatmaps: the mean over seeds (the paper's Figure 2) and the standard deviation over
    seeds (its Appendix D.5)."""
    labels = [_short(r.panel) for r in results]
    means, stds = zip(*(mean_std(r.heatmaps) for r in results))
    return dtap_grid(means, labels, bins), dtap_grid(stds, labels, bins, unit=" points")


def _short(panel: Panel) -> str:
    """A panel's name as the paper gives it, on two short lines: '(e) FAFO<br>QK x10'."""
    rates = panel.rates
    speed = {"ramp": f"QK 1→{rates.qk_mult:g}x", "constant": f"QK x{rates.qk_mult:g}"}[rates.qk_schedule]
    return f"({panel.key}) {panel.parameterisation}" + (f"<br>{speed}" if rates.qk_mult != 1 else "")


PER_PANEL = ["ACMC", "AC", "MRTA", "query_attention %", "top_right_cell", "top_left", "accuracy", "steps"]


def per_panel(summary: pd.DataFrame, n_seeds: int) -> pd.DataFrame:
    """Per panel, each measure's mean ± standard deviation over seeds, and how many seeds stopped at the step cap."""
    table = mean_pm_std(summary, PER_PANEL)
    table["capped"] = summary.groupby("label", sort=False)["hit_cap"].sum().astype(int).astype(str) + f" of {n_seeds}"
    return table


CHANCE_MARGIN = 5.0  # a panel at chance: its mean test accuracy at most this many points above 1 / n_classes


def not_learned(table: pd.DataFrame) -> str:
    """Figure 2's not-learned guard: the panels of a per-panel table whose mean test accuracy over seeds is at most
    ``CHANCE_MARGIN`` points above chance (one class in ``n_classes``, 25%; no profile changes it), in words
    ('(a) 25.0%'); '' where every panel learned."""
    chance = 100 / Setup().n_classes
    means = table.groupby("panel", sort=False)["accuracy"].mean()
    low = [f"({panel}) {acc:.1f}%" for panel, acc in means.items() if acc <= chance + CHANCE_MARGIN]
    return f"panels at chance accuracy ({chance:g}%): {', '.join(low)}" if low else ""


TOP_ROW = "0.8-1"  # the heatmaps' top row: a true-class probability of at least 0.8


def top_row(cells: pd.DataFrame | None, keys: Sequence[str]) -> dict[str, Interval]:
    """The authors' top-row cells ('fig2.<panel>.top_row.<attention bin>') from a run's heatmap cells
    (``heatmap_cells``; None: none saved): each cell's share of test sequences, its mean and 95% interval over seeds;
    a cell the run's bins do not have is left out."""
    if cells is None:
        return {}
    out = {}
    for key in keys:
        _, panel, _, attention = key.split(".", 3)
        at = cells[(cells["panel"] == panel) & (cells["prob_bin"] == TOP_ROW) & (cells["attention_bin"] == attention)]
        if len(at):
            out[key] = Interval.of(at["percent"], PERCENT)
    return out


def compared(
    summary: pd.DataFrame, official: OfficialUnit | None = None, cells: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Superseded by ``chapters.summary.fig2_beside.compared`` (the top-row sums, the other-condition test), which the
    page and the summary call. Kept unchanged because the atlas's stored runs hold this module's code in their key:
    removing it would make the 38 default atlas runs stale; it goes with the atlas's next recomputation."""
    stored = [k for k in authors.table().index if k.startswith("fig2.") and ".top_row." in k]

    def intervals(table: pd.DataFrame, heat: pd.DataFrame | None) -> dict[str, Interval]:
        keys = [(f"fig2.{k}.top_right_cell", "top_right_cell", k) for k in PANEL_KEYS]
        keys += [(f"fig2.{k}.accuracy", "accuracy", k) for k in "abgh"]
        found = {key: Interval.of(table.loc[table["panel"] == k, metric], PERCENT) for key, metric, k in keys}
        return found | top_row(heat, stored)

    ours = intervals(summary, cells)
    keys = [k for k in authors.table().index if k.startswith("fig2.") and (k in ours or ".top_row." in k)]
    table = authors.three_way({key: ours[key].text() + " %" if key in ours else "not run" for key in keys})
    theirs = None if official is None else intervals(official.tables["main"], official.tables.get("heatmaps"))
    return beside_official(
        table, keys, theirs, lambda i: i.text() + " %", evidence=official is not None and guard(official).comparable
    )


def guard(official: OfficialUnit) -> Guard:
    """The official unit's guard with Figure 2's not-learned check (``not_learned``) on its per-panel table."""
    return official.guard.learned(not_learned(official.tables["main"]))
