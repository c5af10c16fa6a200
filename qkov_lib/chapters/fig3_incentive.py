"""Figure 3 (Section 5): attention held fixed at alpha on the distinct tokens, the OV circuit trained alone; the loss
curves and the improvement incentive L(alpha) - L(alpha + delta)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from ..data.synthetic import SyntheticConfig
from ..fixed_attention import OTHERS, OVModel, bag_features, run_models
from ..models import AttentionConfig
from ..optim import RateSchedule
from ..plots import band, hex_to_rgb
from ..synthetic_runs import synthetic_data
from ..verdicts import claim_table

NEAR_ZERO = 0.05  # "loss near zero" (Figure 3): final training loss at most this
FADED = 0.25  # "the incentive fades": at most this fraction of the incentive at alpha = 0.2
HIGH_INCENTIVE = 0.5  # "incentive stays high": (L(alpha) - L(alpha + delta)) / delta at least this at the last epoch


@dataclass(frozen=True, kw_only=True)
class Setup(SyntheticConfig):
    """Section 5's task (``SyntheticConfig``, Figure 2's) and run: the seeds and data sizes, the alpha grid and the
    finite-difference step delta, which positions share 1 - alpha, how the OV circuit starts, SGD's rate and batch,
    the epochs, and the read-outs of the claims (``check_epoch``, ``fade_fraction``)."""

    seeds: tuple[int, ...] = (0, 1, 2)  # the authors ran one unseeded run; three seeds give the bands
    alphas: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # fixed attention on distinct tokens
    others: str = "common"  # where 1 - alpha goes: the common tokens (Section 5); "all": every other position
    n_train: int = 32_000  # an epoch: the authors' 250 batches of 128
    n_test: int = 6400  # the held-out set the incentive is measured on
    init: str = "balanced"  # a random balanced OV pair (the paper states none; the authors' default layers)
    init_scale: float = 0.6  # entries of PyTorch's default size
    lr: float = 1e-2  # "gradient descent": the authors' SGD at 0.01
    batch_size: int = 128  # the authors' batches
    epochs: int = 500  # about 500 shown in Figure 3
    delta: float = 0.005  # the increase of alpha in the incentive (Section 5)
    check_epoch: int = 100  # "positive for about 100 epochs": the epoch the claims read
    fade_fraction: float = 0.1  # an incentive below this share of its peak has faded

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (self.seeds and len(set(self.seeds)) == len(self.seeds)):
            raise ValueError(f"seeds must be a non-empty list of distinct integers (got {list(self.seeds)!r})")
        if not (self.alphas and all(0 <= a <= 1 for a in self.alphas) and len(set(self.alphas)) == len(self.alphas)):
            raise ValueError(f"alphas must be a non-empty list of distinct numbers in [0, 1] (got {list(self.alphas)!r})")
        if not 0 < self.delta <= 0.1:
            raise ValueError(f"delta must lie in (0, 0.1] (got {self.delta!r})")
        if self.others not in OTHERS:
            raise ValueError(f"others must be one of {', '.join(OTHERS)} (got {self.others!r})")
        if self.epochs < 1 or not 1 <= self.check_epoch <= self.epochs:
            raise ValueError(f"epochs must be >= 1 and check_epoch in [1, epochs] (got {self.epochs}, "
                             f"{self.check_epoch})")
        if not 0 < self.fade_fraction < 1:
            raise ValueError(f"fade_fraction must lie in (0, 1) (got {self.fade_fraction!r})")
        if not self.n_classes <= self.batch_size <= self.n_train or self.n_test < 1:
            raise ValueError(f"batch_size must lie in [n_classes, n_train] and n_test >= 1 (got batch_size "
                             f"{self.batch_size}, n_train {self.n_train}, n_test {self.n_test})")
        AttentionConfig("FAFO", vocab=self.vocab, init=self.init, init_scale=self.init_scale)
        RateSchedule(self.lr)

    def models(self) -> list[OVModel]:
        """Factorised W_O W_V and collapsed W_OV as in the paper, and collapsed with an output bias (the authors')."""
        return [OVModel(factorised=True, init=self.init, init_scale=self.init_scale),
                OVModel(factorised=False, init=self.init, init_scale=self.init_scale),
                OVModel(factorised=False, bias=True, init=self.init, init_scale=self.init_scale)]


PROFILES = {
    "smoke": dict(seeds=(0,), alphas=(0.2, 0.6, 1.0), n_train=1280, n_test=640, epochs=3, check_epoch=2),
    "official": dict(layout="official", distinct_weights="linear", vocab_size=50, others="all", seeds=(0,)),
}


def run(setup: Setup, device: torch.device, progress: bool = True) -> pd.DataFrame:
    """Every model's per-epoch curves (``fixed_attention.run_models``) on per-seed training and held-out sets."""
    seeds, cfg = list(setup.seeds), setup.data
    train_set, test_set = synthetic_data(cfg, seeds, setup.n_train, setup.n_test)
    train_x, test_x = (bag_features(s, cfg.vocab, setup.others).to(device) for s in (train_set, test_set))
    return run_models(setup.models(), list(setup.alphas), seeds, train_x, train_set.labels.to(device), test_x,
                      test_set.labels.to(device), setup.lr, setup.batch_size, setup.epochs, setup.delta, progress)


def claims(curves: pd.DataFrame, check_epoch: int) -> pd.DataFrame:
    """Section 5 / Figure 3, from the per-epoch curves (seed means) of the factorised and collapsed OV models."""
    mean = curves.groupby(["model", "alpha", "epoch"])[["train_loss", "incentive_per_delta"]].mean()
    alphas = sorted(curves["alpha"].unique())
    last = int(curves["epoch"].max())

    def near(a: float) -> float:
        return min(alphas, key=lambda x: abs(x - a))

    def at(model: str, a: float, epoch: int, col: str) -> float:
        return float(mean.loc[(model, near(a), epoch), col])

    a2 = near(0.2)
    f_final = at("factorised", a2, last, "train_loss")
    early = mean.loc[("factorised", a2)].loc[:check_epoch, "incentive_per_delta"]
    not_positive = np.nonzero(early.to_numpy() <= 0)[0]
    after = not_positive[-1] + 1 if len(not_positive) else 0  # from here on the incentive stays positive
    onset = int(early.index[after]) if after < len(early) else None
    inc_2 = at("factorised", a2, check_epoch, "incentive_per_delta")
    inc_f = {a: at("factorised", a, check_epoch, "incentive_per_delta") for a in alphas if a >= 0.4 and a < 1}
    mid = [a for a in alphas if 0.2 <= a <= 0.8]
    slower = {a: (at("collapsed", a, check_epoch, "train_loss"), at("factorised", a, check_epoch, "train_loss"))
              for a in mid}
    high = {m: [float(a) for a in alphas if at(m, a, last, "incentive_per_delta") >= HIGH_INCENTIVE]
            for m in ("factorised", "collapsed")}
    rows = [
        ("factorised_loss_near_zero", f"factorised OV: loss near zero already at alpha = {a2:g}", f"training loss {f_final:.4f} at epoch {last}",
         f_final <= NEAR_ZERO),
        ("factorised_incentive_positive", f"factorised OV: incentive at alpha = {a2:g} positive for about {check_epoch} epochs",
         f"incentive/δ over epochs 1-{check_epoch}: smallest {early.min():.3f}; " + (
             f"positive from epoch {onset} through {check_epoch}" if onset else f"negative at epoch {check_epoch}"),
         bool(early.min() > 0)),
        ("factorised_incentive_fades", "factorised OV: the incentive fades for alpha >= 0.4",
         f"incentive/δ at epoch {check_epoch}: alpha {a2:g}: {inc_2:.3f}; largest for alpha >= 0.4: "
         f"{max(inc_f.values()):.3f}", max(inc_f.values()) <= FADED * inc_2),
        ("collapsed_loss_slower", "collapsed OV: the loss falls more slowly for 0.2 <= alpha <= 0.8",
         f"training loss at epoch {check_epoch}, collapsed vs factorised: "
         + ", ".join(f"{a:g}: {c:.3f} vs {f:.3f}" for a, (c, f) in slower.items()),
         all(c > f for c, f in slower.values())),
        ("collapsed_incentive_high", "collapsed OV: the incentive stays high over a wider range of alpha",
         f"alphas with incentive/δ >= {HIGH_INCENTIVE} at epoch {last}: factorised {high['factorised']}, "
         f"collapsed {high['collapsed']}", len(high["collapsed"]) > len(high["factorised"])),
    ]
    return claim_table(rows)


ROWS = {"train_loss": ("training loss", "training loss"),
        "incentive_per_delta": ("incentive / δ", "(L(α) − L(α+δ)) / δ"),
        "incentive": ("incentive", "L(α) − L(α+δ)")}


def figure(curves: pd.DataFrame, models: Sequence[str],
           rows: Sequence[str] = ("train_loss", "incentive_per_delta")) -> go.Figure:
    """Figure 3 with one column per OV model and one row per quantity (training loss, incentive per unit alpha,
    raw incentive) against epochs, one curve per fixed alpha, mean ± std over seeds."""
    paper = {("train_loss", 0): "(a) ", ("train_loss", 1): "(b) ", ("incentive_per_delta", 0): "(c) ",
             ("incentive_per_delta", 1): "(d) "}  # the paper's panel names, for its two models
    titles = [f"{paper.get((y, i), '')}{m}<br>{ROWS[y][0]}" for y in rows for i, m in enumerate(models)]
    fig = make_subplots(rows=len(rows), cols=len(models), subplot_titles=titles, horizontal_spacing=0.07,
                        vertical_spacing=0.18)
    fig.update_annotations(font_size=13)  # two short lines per panel title: long ones ran into each other
    colors = qualitative.Plotly + qualitative.D3
    for col, model in enumerate(models, start=1):
        sub = curves[curves["model"] == model]
        for i, (a, g) in enumerate(sub.groupby("alpha")):
            stats = g.groupby("epoch")[list(rows)].agg(["mean", "std"]).fillna(0)
            color = hex_to_rgb(colors[i % len(colors)])
            for row, y in enumerate(rows, start=1):
                if g[y].isna().all():  # no incentive at alpha = 1: alpha + delta would leave [0, 1]
                    continue
                band(fig, stats.index, stats[(y, "mean")], stats[(y, "std")], color, f"α = {a:g}", row, col,
                     show=col == 1 and row == 1)
    fig.update_xaxes(title_text="epoch")
    for row, y in enumerate(rows, start=1):
        fig.update_yaxes(title_text=ROWS[y][1], row=row, col=1)
        if y == "train_loss":
            fig.update_yaxes(type="log", row=row)
    fig.update_layout(template="plotly_white", height=380 * len(rows), legend_title_text="fixed α",
                      margin=dict(l=60, r=20, t=80, b=50))
    return fig
