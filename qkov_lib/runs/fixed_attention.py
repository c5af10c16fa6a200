"""Section 5: attention held at alpha on the distinct tokens while only the OV circuit trains (Figure 3).

With attention fixed, the model sees the effective input x~ = (alpha/m) sum_{distinct} x_j + ((1-alpha)/n)
sum_{common} x_j and the loss L(alpha) = -log softmax_y(W_O W_V x~) (factorised) or with a collapsed W_OV.
Many (alpha, seed) models train at once as one stack of the synthetic engine (``engine``, attention given), on a
fixed training set or, as the authors' notebooks do, on new sequences every step (``Fresh``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from ..core.device import cpu_workers
from ..data.synthetic import FIELDS, SyntheticConfig, SyntheticSplit, sample_split
from ..models import AttentionConfig, init_params
from ..train.backends import train_stack
from ..train.counts import CountSet, FixedBatches
from ..train.optim import RateSchedule
from ..train.stack import Member, RunSpec, StackConfig
from .store import Batch, Piece, slug

OTHERS = ("common", "all")


def bag_features(split: SyntheticSplit, vocab: int, others: str = "common") -> torch.Tensor:
    """[S, N, 2, vocab]: the mean one-hot vector over a sequence's distinct positions and over its other positions.

    ``others="common"``: the context positions that are not distinct (the paper's x~); ``"all"``: every position that
    is not distinct, the last one (here the query) included, as in the authors' notebook, whose last input token is
    the class's next-token id and whose label is its query id: the reverse of this task's order, equivalent in
    function since either id names the class. A sequence with no distinct token gets a zero
    distinct part, so the mass alpha is then placed nowhere.
    """
    if others not in OTHERS:
        raise ValueError(f"others must be one of {', '.join(OTHERS)} (got {others!r})")
    distinct = split.distinct.float()
    rest = 1.0 - distinct
    if others == "common":
        rest[..., -1] = 0.0
    feats = []
    for weights in (distinct, rest):
        counts = torch.zeros(*split.tokens.shape[:-1], vocab).scatter_add_(-1, split.tokens, weights)
        feats.append(counts / weights.sum(-1, keepdim=True).clamp(min=1.0))
    return torch.stack(feats, dim=-2)


def effective_input(feats: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """x~ = alpha * (distinct mean) + (1 - alpha) * (other mean); feats [K, B, 2, V], alpha [K] -> [K, B, V]."""
    return torch.lerp(feats[..., 1, :], feats[..., 0, :], alpha.view(-1, *[1] * (feats.dim() - 2)))


BIAS_SEED = 2**32  # the bias's generator: this plus the seed, apart from every weight generator's seed


@dataclass(frozen=True)
class OVModel:
    """The OV circuit alone: factorised W_O W_V or collapsed W_OV, optionally with an output bias."""

    factorised: bool
    bias: bool = False
    init: str = "identity"
    init_scale: float = 1e-6

    @property
    def name(self) -> str:
        return ("factorised" if self.factorised else "collapsed") + (" + bias" if self.bias else "")

    def init_params(
        self, vocab: int, seeds: Sequence[int], device: torch.device | str = "cpu"
    ) -> dict[str, torch.Tensor]:
        """Same draw as the Figure 2 model for each seed, keeping the OV parameters only."""
        cfg = AttentionConfig(
            "FAFO" if self.factorised else "FACO", vocab=vocab, init=self.init, init_scale=self.init_scale
        )
        params = {k: v for k, v in init_params(cfg, seeds, device).items() if k in ("W_O", "W_V", "W_OV")}
        if self.bias:
            params["b_OV"] = self._bias(vocab, seeds).to(device).requires_grad_()
        return params

    def _bias(self, vocab: int, seeds: Sequence[int]) -> torch.Tensor:
        """[K, vocab]: zero, or under PyTorch's init ``nn.Linear``'s default bias U(+-sigma/sqrt(vocab)), each seed
        from a generator of its own (offset from the weights' seed)."""
        if self.init != "pytorch":
            return torch.zeros(len(seeds), vocab)
        bound = self.init_scale / vocab**0.5
        return torch.stack(
            [
                (torch.rand(vocab, generator=torch.Generator().manual_seed(BIAS_SEED + int(s))) * 2 - 1) * bound
                for s in seeds
            ]
        )

    @staticmethod
    def logits(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """[K, B, M] from x~ [K, B, V]."""
        w = params["W_O"] @ params["W_V"] if "W_O" in params else params["W_OV"]
        out = torch.bmm(x, w.transpose(1, 2))
        return out + params["b_OV"][:, None, :] if "b_OV" in params else out


def _nll_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Summed cross-entropy per model [K] of logits [K, n, M] against labels [K, n]."""
    return -torch.log_softmax(logits, -1).gather(-1, labels[..., None]).sum((1, 2))


def _losses(
    params: dict[str, torch.Tensor],
    feats: torch.Tensor,
    rows: torch.Tensor,
    labels: torch.Tensor,
    alphas: Sequence[torch.Tensor],
    chunk: int = 2048,
) -> list[torch.Tensor]:
    """Mean cross-entropy per model [K] over a split (feats [R, N, 2, V], model k on row ``rows[k]``) at each of
    ``alphas``. The logits are linear in x~, so one pass serves every alpha: logits(alpha) = lerp(L_other,
    L_distinct, alpha)."""
    totals = [torch.zeros(len(rows), device=rows.device) for _ in alphas]
    for start in range(0, labels.shape[1], chunk):
        part = feats[rows, start : start + chunk]
        k, n, _, v = part.shape
        both = OVModel.logits(params, part.reshape(k, 2 * n, v)).view(k, n, 2, -1)
        y = labels[rows, start : start + chunk]
        for total, a in zip(totals, alphas):
            total += _nll_sum(torch.lerp(both[:, :, 1], both[:, :, 0], a.view(-1, 1, 1)), y)
    return [t / labels.shape[1] for t in totals]


def _loss_at(params: dict[str, torch.Tensor], x: torch.Tensor, labels: torch.Tensor, chunk: int = 2048) -> torch.Tensor:
    """Mean cross-entropy per model [K] on its own effective inputs x [K, n, V] with labels [K, n]."""
    sums = [
        _nll_sum(OVModel.logits(params, x[:, s : s + chunk]), labels[:, s : s + chunk])
        for s in range(0, labels.shape[1], chunk)
    ]
    if not sums:
        raise ValueError(f"no examples to take the loss over (labels {tuple(labels.shape)})")
    return sum(sums[1:], sums[0]) / labels.shape[1]


def effective_inputs(feats: torch.Tensor, rows: Sequence[int], alpha: torch.Tensor) -> torch.Tensor:
    """x~ [K, N, V] of model k (on data row ``rows[k]``, at ``alpha[k]``) for every example, made once."""
    return torch.stack([effective_input(feats[r], a.view(1)) for r, a in zip(rows, alpha)])


def bag_set(x: torch.Tensor, labels: torch.Tensor) -> CountSet:
    """Effective inputs x [K, N, V] and labels [K, N] as the engine's table of examples (``FixedBatches`` reads it
    through one flat index; the compiled engine reads it in place). Fixed attention has no query slots (zeros) and
    no distinct-token counts (empty): the engines read neither for ``qk="fixed"``."""
    empty = torch.zeros(0, device=x.device)
    return CountSet(x, torch.zeros(labels.shape, dtype=torch.long, device=x.device), labels, empty, empty.long())


FRESH_SEED = 104729  # as ``counts.FreshBatches``: a seed's fresh training sequences come from seed + this
LOSS_SEED = 2 * FRESH_SEED  # and its fresh read-out sequences from seed + this, a stream of their own


@dataclass(frozen=True)
class Fresh:
    """The authors' regime (Fig-3_Fixed-Self-Attention-Experiments_*.ipynb): new sequences of ``task`` for every
    training step (``n_train`` an epoch, each mini-batch's classes balanced) and, at every read-out, the loss at
    alpha and alpha + delta on ``n_loss`` new ones (their ``calculate_loss``: 1000 batches of 128), which is also
    the training loss they print; ``others`` as ``bag_features``; models on ``device``."""

    task: SyntheticConfig
    others: str
    n_train: int
    n_loss: int
    device: str = "cpu"


class FreshBags:
    """``Fresh``'s sequences as bags: model k draws from the generators of its data row (so the alphas of one seed
    read the same sequences, as they read one fixed set), an epoch of mini-batches at a time."""

    def __init__(self, fresh: Fresh, seeds: Sequence[int], rows: Sequence[int], alpha: torch.Tensor, batch: int):
        self.fresh, self.rows, self.alpha, self.batch = fresh, list(rows), alpha, batch
        self.train_rngs = [np.random.default_rng(int(s) + FRESH_SEED) for s in seeds]
        self.loss_rngs = [np.random.default_rng(int(s) + LOSS_SEED) for s in seeds]
        self.epoch: CountSet | None = None

    def _bags(self, rng: np.random.Generator, n: int, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Bag features [n, 2, V] and labels [n] of n new sequences, classes balanced within each ``batch``."""
        splits = [sample_split(self.fresh.task, batch, rng) for _ in range(n // batch)]
        split = SyntheticSplit(*(torch.cat([getattr(s, f) for s in splits]) for f in FIELDS))
        return bag_features(split, self.fresh.task.vocab, self.fresh.others), split.labels

    def loss_set(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A new read-out draw per data row: bag features [R, n_loss, 2, V] and labels [R, n_loss]."""
        return self._stacked([self._bags(rng, self.fresh.n_loss, self.fresh.n_loss) for rng in self.loss_rngs])

    def _stacked(self, drawn: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-row draws stacked on a leading row dimension, on the models' device."""
        return torch.stack([f for f, _ in drawn]).to(self.fresh.device), torch.stack([y for _, y in drawn]).to(
            self.fresh.device
        )

    def take(self, step: int, active: Sequence[int]) -> tuple[torch.Tensor, ...]:
        """The mini-batch of ``step`` for the ``active`` models: effective inputs, (unused) slots, labels."""
        per_epoch = self.fresh.n_train // self.batch
        if step % per_epoch == 0 or self.epoch is None:
            feats, labels = self._stacked(
                [self._bags(rng, per_epoch * self.batch, self.batch) for rng in self.train_rngs]
            )
            self.epoch = bag_set(effective_inputs(feats, self.rows, self.alpha), labels[self.rows])
        j = step % per_epoch
        index = torch.arange(j * self.batch, (j + 1) * self.batch, device=self.alpha.device)
        flat = torch.as_tensor(list(active), device=self.alpha.device)[:, None] * self.epoch.size + index
        return self.epoch.take_flat(flat)


def run_fixed_attention(
    model: OVModel,
    alphas: Sequence[float],
    seeds: Sequence[int],
    train_feats: torch.Tensor | None,
    train_labels: torch.Tensor | None,
    test_feats: torch.Tensor | None,
    test_labels: torch.Tensor | None,
    lr: float,
    batch_size: int,
    epochs: int,
    delta: float,
    progress: bool = True,
    fresh: Fresh | None = None,
) -> pd.DataFrame:
    """Train one OV model per (alpha, seed) for ``epochs`` passes over the training set with SGD; after every epoch
    record the training loss at alpha (on the first training sequences, as many as are held out), the held-out
    losses at alpha and alpha + delta, and the incentive
    L(alpha) - L(alpha + delta) (NaN where alpha + delta > 1). Feature tensors are [S, N, 2, V], one row per seed;
    models train on the device those tensors are on. ``fresh``: the authors' regime instead (``Fresh``; the four
    tensors None), new sequences every step and every read-out, where the training loss is the read-out's at
    alpha."""
    pairs = [(a, i) for a in alphas for i in range(len(seeds))]
    rows_k = [i for _, i in pairs]
    seeds_k = [seeds[i] for i in rows_k]
    if fresh is None:
        if train_feats is None or train_labels is None or test_feats is None or test_labels is None:
            raise ValueError("a fixed-set run takes its training and held-out features and labels (or pass fresh)")
        device, vocab, per_epoch = train_feats.device, train_feats.shape[-1], train_labels.shape[1] // batch_size
        fixed = ((train_feats, train_labels), (test_feats, test_labels))
    else:
        device, vocab, per_epoch = torch.device(fresh.device), fresh.task.vocab, fresh.n_train // batch_size
    alpha = torch.tensor([a for a, _ in pairs], dtype=torch.float32, device=device)
    params = {k: v.detach() for k, v in model.init_params(vocab, seeds_k, device).items()}
    rows_t = torch.as_tensor(rows_k, device=device)
    spec = RunSpec(rates=RateSchedule(lr=lr), max_steps=epochs * per_epoch)
    members = [Member(s, k, spec) for k, s in enumerate(seeds_k)]
    if fresh is None:
        take, losses = _fixed_reads(members, rows_k, alpha, batch_size, *fixed)
    else:
        take, losses = _fresh_reads(rows_k, alpha, batch_size, seeds, fresh)
    sc = StackConfig(
        qk="fixed",
        ov_factorised=model.factorised,
        ov_bias=model.bias,
        batch_size=batch_size,
        target_nll=0.0,
        eval_every=per_epoch,
    )
    records: list[dict] = []

    def monitor(prm: dict[str, torch.Tensor], active: list[int], step: int) -> None:
        with torch.no_grad():
            tr, te, te_up = losses(prm, rows_t, [alpha, alpha + delta])
        for k, (a, i) in enumerate(pairs):
            valid = a + delta <= 1 + 1e-12
            inc = float(te[k] - te_up[k]) if valid else float("nan")
            records.append(
                {
                    "model": model.name,
                    "alpha": a,
                    "seed": seeds[i],
                    "epoch": step // per_epoch,
                    "train_loss": float(tr[k]),
                    "test_loss": float(te[k]),
                    "incentive": inc,
                    "incentive_per_delta": inc / delta,
                }
            )

    train_stack(params, members, sc, take, every_eval=monitor, progress=progress, desc=f"fixed attention, {model.name}")
    return pd.DataFrame(records)


Losses = Callable[[dict[str, torch.Tensor], torch.Tensor, list[torch.Tensor]], tuple[torch.Tensor, ...]]
Reads = tuple[Callable[[int, Sequence[int]], tuple[torch.Tensor, ...]], Losses]


def _fixed_reads(
    members: Sequence[Member],
    rows: Sequence[int],
    alpha: torch.Tensor,
    batch: int,
    train: tuple[torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor],
) -> Reads:
    """Mini-batches of the fixed training set (model k, on data row ``rows[k]``, reads row k of the effective inputs,
    at its own alpha, in the order ``training.FixedSetBatches`` gives its seed) and the read-out: the training loss
    at alpha on as many of its first training sequences as are held out, then the held-out losses at each alpha."""
    train_x = effective_inputs(train[0], rows, alpha)
    train_y = train[1][torch.as_tensor(list(rows), device=alpha.device)]
    n_check = min(train[1].shape[1], test[1].shape[1])

    def losses(prm: dict[str, torch.Tensor], rows_t: torch.Tensor, alphas: list[torch.Tensor]) -> tuple:
        return (
            _loss_at(prm, train_x[:, :n_check], train_y[:, :n_check]),
            *_losses(prm, test[0], rows_t, test[1], alphas),
        )

    return FixedBatches(bag_set(train_x, train_y), members, batch).take, losses


def _fresh_reads(rows: Sequence[int], alpha: torch.Tensor, batch: int, seeds: Sequence[int], fresh: Fresh) -> Reads:
    """``FreshBags``' mini-batches and the read-out on a new draw: the losses at each alpha, the first of them also
    as the training loss (the authors print ``calculate_loss`` at alpha on new sequences as the training loss)."""
    source = FreshBags(fresh, seeds, rows, alpha, batch)

    def losses(prm: dict[str, torch.Tensor], rows_t: torch.Tensor, alphas: list[torch.Tensor]) -> tuple:
        feats, labels = source.loss_set()
        at = _losses(prm, feats, rows_t, labels, alphas)
        return (at[0], *at)

    return source.take, losses


STACKS_PER_MODEL = 2  # each OV model's alphas train as this many stacks, so 3 models keep 2 cores evenly busy


def run_models(
    models: Sequence[OVModel],
    alphas: Sequence[float],
    seeds: Sequence[int],
    train_feats: torch.Tensor | None,
    train_labels: torch.Tensor | None,
    test_feats: torch.Tensor | None,
    test_labels: torch.Tensor | None,
    lr: float,
    batch_size: int,
    epochs: int,
    delta: float,
    progress: bool = True,
    fresh: Fresh | None = None,
    values: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """``run_fixed_attention`` for each model, its alphas split into ``STACKS_PER_MODEL`` stacks (a fixed split, so
    the numbers do not depend on the core count), one stored run per stack (``store.Batch``; ``values``: the
    chapter's setup values its data comes from), side by side on the CPU's cores; curves joined in the order of
    one stack per model (epoch, then alpha, then seed). ``fresh``: the authors' regime (``run_fixed_attention``)."""
    parts = max(1, min(STACKS_PER_MODEL, len(alphas)))
    groups = [[float(a) for a in g] for g in np.array_split(np.asarray(alphas, dtype=float), parts)]
    if fresh is None and train_feats is None:
        raise ValueError("a fixed-set run takes its training and held-out features and labels (or pass fresh)")
    device = torch.device(fresh.device) if fresh is not None else train_feats.device  # type: ignore[union-attr]
    shared = dict(values or {}, seeds=list(seeds), lr=lr, batch_size=batch_size, epochs=epochs, delta=delta)
    shared["fresh"] = None if fresh is None else {**asdict(fresh), "device": None, "task": asdict(fresh.task)}
    pieces = [
        Piece(slug(f"{m.name}-{k}"), {**shared, "model": asdict(m), "alphas": g})
        for m in models
        for k, g in enumerate(groups)
    ]
    batch = Batch(pieces, [__name__], device)
    todo = batch.missing
    data = (train_feats, train_labels, test_feats, test_labels)
    tasks = [
        (models[i // parts], groups[i % parts], seeds, *data, lr, batch_size, epochs, delta, progress, fresh)
        for i in todo
    ]
    batch.compute(run_fixed_attention, tasks, cpu_workers(device), lambda t, out: {todo[t]: {"main": out}})
    curves = [t["main"] for t in batch.tables()]
    return pd.concat(
        [
            pd.concat(curves[i * parts : (i + 1) * parts]).sort_values("epoch", kind="stable")
            for i in range(len(models))
        ],
        ignore_index=True,
    )


def fade_epochs(curves: pd.DataFrame, fraction: float = 0.1) -> pd.DataFrame:
    """Per model and alpha (seed means): the peak incentive, its epoch, and the first epoch after the peak at which
    the incentive falls below ``fraction`` of that peak (NaN if it never does)."""
    mean = curves.groupby(["model", "alpha", "epoch"], sort=False)["incentive"].mean().reset_index()
    rows = []
    for (name, a), g in mean.groupby(["model", "alpha"], sort=False):
        inc = g["incentive"].to_numpy()
        if np.all(np.isnan(inc)):
            rows.append({"model": name, "alpha": a, "peak": np.nan, "peak_epoch": np.nan, "fade_epoch": np.nan})
            continue
        top = int(np.nanargmax(inc))
        below = np.nonzero(inc[top:] < fraction * inc[top])[0]
        rows.append(
            {
                "model": name,
                "alpha": a,
                "peak": float(inc[top]),
                "peak_epoch": int(g["epoch"].iloc[top]),
                "fade_epoch": float(g["epoch"].iloc[top + below[0]]) if len(below) else np.nan,
            }
        )
    return pd.DataFrame(rows)
