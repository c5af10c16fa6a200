"""Figure 3 (Section 5): attention held fixed at alpha on the distinct tokens, the OV circuit trained alone; the loss
curves and the improvement incentive L(alpha) - L(alpha + delta)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from ..core.device import pick_device
from ..core.validation import require_seeds
from ..data import authors
from ..data.synthetic import SyntheticConfig
from ..metrics.compound import each
from ..metrics.official import Guard, OfficialUnit
from ..metrics.verdicts import Claim, Interval, above, at_most, beside_official, claim_table, rule, weakest
from ..models import check_init
from ..present.plots import band, clear_axis_titles, hex_to_rgb, legend_below, log_axes
from ..runs.fixed_attention import OTHERS, Fresh, OVModel, bag_features, fade_epochs, run_models
from ..runs.store import setup_values
from ..runs.synthetic_runs import synthetic_data
from ..train.optim import check_rate

BESIDE = ("official",)  # the authors' setup: its results of this chapter are set beside this run's

NEAR_ZERO = 0.05  # "loss near zero" (Figure 3): final training loss at most this
FADED = 0.25  # "the incentive fades": at most this fraction of the incentive at alpha = 0.2
HIGH_INCENTIVE = 0.5  # "incentive stays high": (L(alpha) - L(alpha + delta)) / delta at least this at the last epoch


@dataclass(frozen=True, kw_only=True)
class Setup(SyntheticConfig):
    """Section 5's task (``SyntheticConfig``, Figure 2's) and run: the seeds and data sizes, the alpha grid and the
    finite-difference step delta, which positions share 1 - alpha, how the OV circuit starts, SGD's rate and batch,
    the epochs, and the read-outs of the claims (``check_epoch``, ``fade_fraction``)."""

    seeds: tuple[int, ...] = (0, 1, 2)  # the authors ran one seed (model 1234, data unseeded); three give the bands
    alphas: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # fixed attention on distinct tokens
    others: str = "common"  # where 1 - alpha goes: the common tokens (Section 5); "all": every other position
    n_train: int = 32_000  # an epoch: the authors' 250 batches of 128
    n_test: int = 6400  # the held-out set the incentive is measured on (fresh: the sequences of each read-out)
    fresh_batches: bool = False  # a fixed training set (the paper's Section 4); the authors draw every batch anew
    init: str = "balanced"  # a random balanced OV pair (the paper states none); "pytorch": the authors' default layers
    init_scale: float = 0.6  # entries of PyTorch's default size (1 with init "pytorch": its own default, bias too)
    lr: float = 1e-2  # "gradient descent": the authors' SGD at 0.01
    batch_size: int = 128  # the authors' batches
    epochs: int = 500  # about 500 shown in Figure 3
    delta: float = 0.005  # the increase of alpha in the incentive (Section 5)
    check_epoch: int = 100  # "positive for about 100 epochs": the epoch the claims read
    fade_fraction: float = 0.1  # an incentive below this share of its peak has faded

    PAGE_FIELDS: ClassVar[tuple[str, ...]] = ("check_epoch", "fade_fraction")  # what the page reads, not the runs

    def __post_init__(self) -> None:
        super().__post_init__()
        require_seeds(self.seeds)
        if not (self.alphas and all(0 <= a <= 1 for a in self.alphas) and len(set(self.alphas)) == len(self.alphas)):
            raise ValueError(
                f"alphas must be a non-empty list of distinct numbers in [0, 1] (got {list(self.alphas)!r})"
            )
        if not 0 < self.delta <= 0.1:
            raise ValueError(f"delta must lie in (0, 0.1] (got {self.delta!r})")
        if self.others not in OTHERS:
            raise ValueError(f"others must be one of {', '.join(OTHERS)} (got {self.others!r})")
        if self.epochs < 1 or not 1 <= self.check_epoch <= self.epochs:
            raise ValueError(
                f"epochs must be >= 1 and check_epoch in [1, epochs] (got {self.epochs}, {self.check_epoch})"
            )
        if not 0 < self.fade_fraction < 1:
            raise ValueError(f"fade_fraction must lie in (0, 1) (got {self.fade_fraction!r})")
        if not self.n_classes <= self.batch_size <= self.n_train or self.n_test < 1:
            raise ValueError(
                f"batch_size must lie in [n_classes, n_train] and n_test >= 1 (got batch_size "
                f"{self.batch_size}, n_train {self.n_train}, n_test {self.n_test})"
            )
        check_init(self.init, self.init_scale)
        check_rate("lr", self.lr)

    def models(self) -> list[OVModel]:
        """Factorised W_O W_V and collapsed W_OV as in the paper, and collapsed with an output bias (the authors')."""
        return [
            OVModel(factorised=True, init=self.init, init_scale=self.init_scale),
            OVModel(factorised=False, init=self.init, init_scale=self.init_scale),
            OVModel(factorised=False, bias=True, init=self.init, init_scale=self.init_scale),
        ]


PROFILES = {
    "smoke": dict(seeds=(0,), alphas=(0.2, 0.6, 1.0), n_train=1280, n_test=640, epochs=3, check_epoch=2),
    "official": dict(
        layout="official",
        distinct_weights="linear",
        vocab_size=50,
        others="all",
        seeds=(0,),
        alphas=(0.2, 0.4, 0.6, 0.8, 1.0),
        init="pytorch",
        init_scale=1.0,
        fresh_batches=True,  # new sequences every step, and every read-out on 1000 new batches of 128 (their
        n_test=128_000,  # calculate_loss, whose value at alpha they print as the training loss)
    ),
}


def run(setup: Setup, *, device: torch.device | None = None, progress: bool = True) -> pd.DataFrame:
    """Every model's per-epoch curves (``fixed_attention.run_models``) on per-seed training and held-out sets, or
    on new sequences every step and every read-out (``fresh_batches``, the authors' regime; ``fixed_attention.Fresh``)
    (``device`` None: ``pick_device()``)."""
    seeds, cfg, device = list(setup.seeds), setup.data, device or pick_device()
    fresh: Fresh | None = None
    train_x = train_y = test_x = test_y = None  # the training and held-out bags and labels; none when fresh
    if setup.fresh_batches:
        fresh = Fresh(cfg, setup.others, setup.n_train, setup.n_test, str(device))
    else:
        train_set, test_set = synthetic_data(cfg, seeds, setup.n_train, setup.n_test)
        train_x, test_x = (bag_features(s, cfg.vocab, setup.others).to(device) for s in (train_set, test_set))
        train_y, test_y = train_set.labels.to(device), test_set.labels.to(device)
    return run_models(
        setup.models(),
        list(setup.alphas),
        seeds,
        train_x,
        train_y,
        test_x,
        test_y,
        setup.lr,
        setup.batch_size,
        setup.epochs,
        setup.delta,
        progress,
        fresh,
        values=setup_values(setup, drop=("seeds", "alphas")),
    )


def claims(curves: pd.DataFrame, check_epoch: int) -> pd.DataFrame:
    """Section 5 / Figure 3, from the per-epoch curves of the factorised and collapsed OV models (without bias, as in
    the paper): each claim read through the 95% interval over seeds of a per-seed quantity."""
    per = curves.pivot_table(
        index=["seed", "epoch"], columns=["model", "alpha"], values=["train_loss", "incentive_per_delta"]
    )
    alphas = sorted(curves["alpha"].unique())
    last = int(curves["epoch"].max())

    def near(a: float) -> float:
        return min(alphas, key=lambda x: abs(x - a))

    def at(col: str, model: str, a: float, epoch: int) -> pd.Series:
        """Per seed, ``col`` of ``model`` at fixed attention ``a`` and ``epoch``."""
        return per[(col, model, near(a))].xs(epoch, level="epoch")

    a2 = near(0.2)
    final = Interval.of(at("train_loss", "factorised", a2, last))
    early = per[("incentive_per_delta", "factorised", a2)].unstack("seed").loc[:check_epoch]
    positive = Interval.of(early.min())
    inc_2 = at("incentive_per_delta", "factorised", a2, check_epoch)
    later = [a for a in alphas if 0.4 <= a < 1]
    excess = Interval.of(
        pd.concat([at("incentive_per_delta", "factorised", a, check_epoch) for a in later], axis=1).max(axis=1)
        - FADED * inc_2
    )
    mid = [a for a in alphas if 0.2 <= a <= 0.8]
    slower = {
        a: Interval.of(at("train_loss", "collapsed", a, check_epoch) - at("train_loss", "factorised", a, check_epoch))
        for a in mid
    }

    below_one = [a for a in alphas if a < 1]  # at attention 1 there is no sharper attention: no incentive

    def high(model: str) -> pd.Series:
        """Per seed, how many alphas below 1 keep an incentive per unit alpha of at least HIGH_INCENTIVE at the
        end."""
        return sum((at("incentive_per_delta", model, a, last) >= HIGH_INCENTIVE).astype(int) for a in below_one)

    wider = Interval.of(high("collapsed") - high("factorised"))
    slower_rule = rule("above", "training loss (collapsed against factorised) at each attention", "0", paired=True)
    slower_is, slower_why = each(
        {f"at {a:g}": i for a, i in slower.items()}, lambda i: above(i, 0.0), slower_rule, 3, True
    )
    return claim_table(
        [
            Claim(
                "factorised_loss_near_zero",
                f"With a factorised OV circuit the loss is near zero already at "
                f"attention {a2:g} on the distinct tokens.",
                f"final training loss {final.text(4)} (epoch {last})",
                at_most(final, NEAR_ZERO),
                rule("at most", "the final training loss", f"{NEAR_ZERO:g}"),
                *final.numbers,
                authors=authors.stored(f"fig3.factorised.{a2:g}") if a2 == 0.2 else "",
            ),
            Claim(
                "factorised_incentive_positive",
                f"With a factorised OV circuit the incentive to sharpen attention at "
                f"{a2:g} stays positive for about {check_epoch} epochs.",
                f"smallest incentive per unit attention over epochs 1-{check_epoch}: {positive.text(3)}",
                above(positive, 0.0),
                rule("above", f"each seed's smallest incentive over epochs 1-{check_epoch}", "0"),
                *positive.numbers,
            ),
            Claim(
                "factorised_incentive_fades",
                "With a factorised OV circuit the incentive fades once attention reaches 0.4.",
                f"largest incentive at attention 0.4-0.9 minus {FADED:g} x the incentive at {a2:g}, epoch "
                f"{check_epoch}: {excess.text(3, True)}",
                at_most(excess, 0.0),
                rule("at most", f"the largest incentive at attention >= 0.4 less {FADED:g} times that at {a2:g}", "0"),
                *excess.numbers,
            ),
            Claim(
                "collapsed_loss_slower",
                "With a collapsed OV circuit the loss falls more slowly for attention between 0.2 and 0.8.",
                f"training loss, collapsed minus factorised, epoch {check_epoch}: "
                + ", ".join(f"{a:g}: {i.text(3, True)}" for a, i in slower.items()),
                slower_is,
                slower_rule,
                *weakest(list(slower.values())).numbers,
                authors="final loss, collapsed with bias against factorised: "
                + "; ".join(
                    f"{a:g}: {authors.stored(f'fig3.collapsed_bias.{a:g}').split(' ')[0]} against "
                    f"{authors.stored(f'fig3.factorised.{a:g}').split(' ')[0]}"
                    for a in (0.2, 0.4, 0.6, 0.8)
                ),
                why=slower_why,
            ),
            Claim(
                "collapsed_incentive_high",
                "With a collapsed OV circuit the incentive stays high over a wider range of attention.",
                f"attention values with an incentive of at least {HIGH_INCENTIVE:g} at epoch {last}, "
                f"collapsed minus factorised: {wider.text(1, True)}",
                above(wider, 0.0),
                rule(
                    "above",
                    "how many attention values keep a high incentive (collapsed against factorised)",
                    "0",
                    paired=True,
                ),
                *wider.numbers,
            ),
        ]
    )


def final_losses(curves: pd.DataFrame, models: Sequence[str]) -> pd.DataFrame:
    """Training loss at the last epoch per fixed alpha (rows) and model (columns): 'mean ± std' over seeds."""
    last = curves[curves["epoch"] == curves["epoch"].max()]
    stats = last.groupby(["alpha", "model"])["train_loss"].agg(["mean", "std"]).fillna(0)
    text = (stats["mean"].map("{:.4f}".format) + " ± " + stats["std"].map("{:.4f}".format)).unstack("model")
    return text[list(models)].rename_axis(index="attention α", columns=None)


def fades(curves: pd.DataFrame, fraction: float, models: Sequence[str]) -> pd.DataFrame:
    """Per fixed alpha (rows) and model: the epoch at which the seed-mean incentive first falls below ``fraction`` of
    its peak (empty: it never does within the run)."""
    table = fade_epochs(curves, fraction).pivot(index="alpha", columns="model", values="fade_epoch")[list(models)]
    return table.map(lambda e: "" if pd.isna(e) else f"{int(e)}").rename_axis(index="attention α", columns=None)


def bias_effect(curves: pd.DataFrame) -> pd.DataFrame:
    """The authors' output bias on the collapsed model, per fixed alpha at the last epoch (seed means): training loss
    and incentive per unit alpha without and with it."""
    last = curves[curves["epoch"] == curves["epoch"].max()]
    means = last.groupby(["alpha", "model"])[["train_loss", "incentive_per_delta"]].mean().unstack("model")
    return pd.DataFrame(
        {
            "loss, no bias": means[("train_loss", "collapsed")],
            "loss, bias": means[("train_loss", "collapsed + bias")],
            "incentive/δ, no bias": means[("incentive_per_delta", "collapsed")],
            "incentive/δ, bias": means[("incentive_per_delta", "collapsed + bias")],
        }
    )


def loss_measure(setup: Setup) -> str:
    """In words, which loss a run's final training loss is (what its column beside the authors' numbers shows)."""
    if setup.fresh_batches:
        return f"the loss the authors printed: at α, on {setup.n_test:,} new sequences after the last epoch"
    return f"the training loss on the first {min(setup.n_train, setup.n_test):,} sequences of its fixed training set"


def stored_losses(curves: pd.DataFrame) -> dict[str, Interval]:
    """The final training loss (mean and 95% interval over seeds) of the factorised model and the collapsed model
    with bias at each alpha the authors stored, keyed as their stored numbers."""
    last = curves[curves["epoch"] == curves["epoch"].max()]
    alphas = set(last["alpha"].round(6))
    out = {}
    for model, key in (("factorised", "factorised"), ("collapsed + bias", "collapsed_bias")):
        for a in (0.2, 0.4, 0.6, 0.8, 1.0):
            if round(a, 6) in alphas:
                loss = last[(last["model"] == model) & (last["alpha"].round(6) == round(a, 6))]["train_loss"]
                out[f"fig3.{key}.{a:.1f}"] = Interval.of(loss)
    return out


LOSS_MOVED = 0.9  # a loss that did not move: its last epoch's mean training loss at least this share of its first's


def not_learned(curves: pd.DataFrame) -> str:
    """Figure 3's not-learned guard: the models and fixed alphas whose mean training loss over seeds at the last
    epoch is at least ``LOSS_MOVED`` of the first recorded epoch's (the loss did not move), in words; '' where every
    loss moved."""
    first, last = (curves[curves["epoch"] == e] for e in (curves["epoch"].min(), curves["epoch"].max()))
    start, end = (t.groupby(["model", "alpha"])["train_loss"].mean() for t in (first, last))
    still = [f"{m} at alpha {a:g}" for (m, a), v in end.items() if v >= LOSS_MOVED * start[(m, a)]]
    return (
        f"losses that did not move (last epoch at least {LOSS_MOVED:.0%} of the first): {', '.join(still)}"
        if still
        else ""
    )


def guard(official: OfficialUnit) -> Guard:
    """The official unit's guard with Figure 3's not-learned check (``not_learned``) on its curves."""
    return official.guard.learned(not_learned(official.tables["main"]))


def compared(curves: pd.DataFrame, official: OfficialUnit | None = None) -> pd.DataFrame:
    """The authors' stored final losses (one run, its models seeded with 1234 and its data not; 500 epochs) beside
    this run's and this book's under ``official`` (its unit, ``official_read.official_unit``; None: not run), and
    whether ``official`` gives the authors' number back: one run against one seed, within
    ``verdicts.SINGLE_RUN_TOLERANCE`` (undecided unless its guard, with ``not_learned``, lets a verdict be drawn)."""
    ours = stored_losses(curves)
    table = authors.three_way({key: i.text(6) for key, i in ours.items()})  # the stored ones reach 1e-4
    return beside_official(
        table,
        list(ours),
        None if official is None else stored_losses(official.tables["main"]),
        lambda i: i.text(6),
        single_runs=True,
        evidence=official is not None and guard(official).comparable,
    )


ROWS = {"train_loss": "training loss", "incentive_per_delta": "incentive / δ", "incentive": "incentive"}
PAPER_PANELS = {
    ("train_loss", "factorised"): "(a) ",
    ("train_loss", "collapsed"): "(b) ",
    ("incentive_per_delta", "factorised"): "(c) ",
    ("incentive_per_delta", "collapsed"): "(d) ",
}


def figure(
    curves: pd.DataFrame, models: Sequence[str], rows: Sequence[str] = ("train_loss", "incentive_per_delta")
) -> go.Figure:
    """Figure 3: one column per OV model (two at most, to read on a phone) and one row per quantity (training loss,
    incentive per unit alpha, raw incentive) against epochs, a curve per fixed alpha, mean ± std over seeds."""
    titles = [f"{PAPER_PANELS.get((y, m), '')}{m}:<br>{ROWS[y]}" for y in rows for m in models]
    fig = make_subplots(
        rows=len(rows),
        cols=len(models),
        subplot_titles=titles,
        horizontal_spacing=0.12,
        vertical_spacing=0.3 / len(rows),
        x_title="epoch",
        shared_xaxes=True,
    )
    colors = qualitative.Plotly + qualitative.D3
    for col, model in enumerate(models, start=1):
        sub = curves[curves["model"] == model]
        for i, (a, g) in enumerate(sub.groupby("alpha")):
            stats = g.groupby("epoch")[list(rows)].agg(["mean", "std"]).fillna(0)
            color = hex_to_rgb(colors[i % len(colors)])
            for row, y in enumerate(rows, start=1):
                if g[y].isna().all():  # no incentive at alpha = 1: alpha + delta would leave [0, 1]
                    continue
                band(
                    fig,
                    stats.index,
                    stats[(y, "mean")],
                    stats[(y, "std")],
                    color,
                    f"α = {a:g}",
                    row,
                    col,
                    show=col == 1 and row == 1,
                )
    for row, y in enumerate(rows, start=1):
        log_axes(fig, y=y == "train_loss", row=row)
    clear_axis_titles(fig, "epoch", None)
    fig.update_layout(height=300 * len(rows) + 200, legend_title_text="fixed attention", margin=dict(t=50))
    legend_below(fig)
    return fig
