"""One engine for every synthetic run (Figure 2, the corollaries, Figure 3): a stack of single-layer attention models
(eq. 1), each with its own seed, data row, learning rates, QK/OV multipliers and ramp, OV weight decay, optimiser
state and stop, stepped together with a hand-derived backward pass (checked against autograd in the tests).

With one-hot tokens a sequence enters eq. (1) only through its token counts c[v] and its query token q: every
position holding token v gets the weight exp(s_v)/Z, so the attention mass on token v is
a[v] = c[v] exp(s_v) / sum_u c[u] exp(s_u) = softmax_v(s_v + log c[v]), and X^T softmax(.) = a (the "bag").
Only the query tokens' columns of W_QK are read (s_v = scale * W_QK[v, q]), and the OV circuit is applied as
W_O (W_V a) without forming the product. Figure 3's fixed attention is the same model with a given bag.
Models that reach their stop leave the stack, so the remaining ones run faster.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from ..core.progress import bar
from ..core.validation import require_positive_ints
from ..data.synthetic import SyntheticConfig, SyntheticSplit, sample_tokens
from .optim import CIRCUIT_OF, RateSchedule
from .training import FixedSetBatches, check_finite, check_optimiser_and_stop

QK_KINDS = ("factorised", "collapsed", "fixed")


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """How one run trains: its learning rates (``optim.RateSchedule``: the base rate, the QK and OV multipliers and
    the QK ramp), its step cap, decoupled weight decay on its OV parameters, and how it stops early: the stack's rule,
    the authors' rule with epochs of ``stop_epoch`` steps (see ``StackConfig``), or not at all (``early_stop=False``).
    Every seed of the run trains with it."""

    rates: RateSchedule
    max_steps: int
    ov_decay: float = 0.0
    stop_epoch: int | None = None
    early_stop: bool = True

    def __post_init__(self) -> None:
        require_positive_ints(self, ("max_steps",))
        if not self.ov_decay >= 0:
            raise ValueError(f"ov_decay must be >= 0 (got {self.ov_decay!r})")
        if self.stop_epoch is not None:
            require_positive_ints(self, ("stop_epoch",))


@dataclass(frozen=True)
class Member:
    """One model of a stack: its seed (initialisation and batch order), the data row it reads, and how its run
    trains."""

    seed: int
    row: int
    spec: RunSpec


@dataclass(frozen=True)
class StackConfig:
    """What every model of a stack shares: the circuits' kinds, the optimiser, the batch size and the stop rule.

    Stop rule (Section 4, "train until NLL <= 0.001"): every ``eval_every`` steps each model's mean mini-batch loss
    over those steps is read; a model whose mean is at most ``gate`` x ``target_nll`` then has its NLL on the whole
    training set computed, and stops if that is <= ``target_nll``. ``target_nll = 0`` disables stopping.

    The authors' rule, for a model with ``RunSpec.stop_epoch`` = E (a multiple of ``eval_every``): at the end of each
    epoch of E steps the sum of its mini-batch losses since the last reset, divided by E, is compared with
    ``target_nll`` and the model stops if it is not larger; the sum is reset after every 100th epoch, as their
    notebooks print and reset it there (so after a reset it is one epoch's mean, then the sum of two, ...)."""

    qk: str = "factorised"
    ov_factorised: bool = True
    ov_bias: bool = False
    score_scale: float = 1.0
    optimizer: str = "sgd"
    batch_size: int = 32
    target_nll: float = 1e-3
    eval_every: int = 200
    gate: float = 2.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        if self.qk not in QK_KINDS:
            raise ValueError(f"qk must be one of {', '.join(QK_KINDS)} (got {self.qk!r})")
        check_optimiser_and_stop(self, ("batch_size", "eval_every"))
        if not self.gate >= 1:
            raise ValueError(f"gate must be >= 1 (got {self.gate!r})")

    @staticmethod
    def of(parameterisation: str, **kwargs) -> "StackConfig":
        """The stack for a parameterisation name (FAFO, FACO, CAFO, CACO)."""
        return StackConfig(qk="factorised" if parameterisation[:2] == "FA" else "collapsed",
                           ov_factorised=parameterisation[2:] == "FO", **kwargs)


# ----------------------------------------------------------------------------------------------------------------
# Data as the engine reads it


@dataclass
class CountSet:
    """Sequences as counts: log token counts [R, N, V] (-inf where absent), the query's slot among ``query_ids``
    [R, N], labels [R, N], and per token the number of positions that are distinct for the sequence's class [R, N, V]
    (for the attention mass on distinct tokens). R rows of data (one per data seed)."""

    log_counts: torch.Tensor
    slots: torch.Tensor
    labels: torch.Tensor
    distinct: torch.Tensor
    query_ids: torch.Tensor

    @property
    def size(self) -> int:
        return self.labels.shape[1]

    def take(self, rows: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The examples ``idx`` [K, B] of data rows ``rows`` [K]: log counts, slots, labels."""
        return self.take_flat(rows[:, None] * self.size + idx)

    def take_flat(self, flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The examples at positions ``row * size + index`` [K, B] (contiguous): log counts, slots, labels."""
        shape, flat = flat.shape, flat.view(-1)
        return (self.log_counts.view(-1, self.log_counts.shape[-1]).index_select(0, flat).view(*shape, -1),
                self.slots.view(-1).index_select(0, flat).view(shape),
                self.labels.view(-1).index_select(0, flat).view(shape))


def count_set(split: SyntheticSplit, vocab: int, attend_to_query: bool = True,
              query_ids: torch.Tensor | None = None) -> CountSet:
    """A split [R, N, T] (query last) as counts. ``attend_to_query=False`` removes the query position itself."""
    tokens = split.tokens
    distinct = torch.zeros(*tokens.shape[:-1], vocab, device=tokens.device).scatter_add_(-1, tokens,
                                                                                          split.distinct.float())
    query_ids = (torch.unique(tokens[..., -1]) if query_ids is None else query_ids).to(tokens.device)
    return CountSet(_log_counts(tokens, vocab, attend_to_query), _query_slots(tokens, query_ids, vocab),
                    split.labels, distinct, query_ids)


def _log_counts(tokens: torch.Tensor, vocab: int, attend_to_query: bool) -> torch.Tensor:
    """[..., V]: log of each token's count in sequences [..., T], -inf where absent (the query, last, not counted
    when ``attend_to_query`` is False)."""
    ones = torch.ones(tokens.shape, dtype=torch.float32, device=tokens.device)
    if not attend_to_query:
        ones[..., -1] = 0.0
    counts = torch.zeros(*tokens.shape[:-1], vocab, device=tokens.device).scatter_add_(-1, tokens, ones)
    return counts.clamp(min=1.0).log_().masked_fill_(counts == 0, -torch.inf)  # log(0) is ~20x slower


def _query_slots(tokens: torch.Tensor, query_ids: torch.Tensor, vocab: int) -> torch.Tensor:
    """[...]: each sequence's query (its last token) as its slot among ``query_ids``."""
    lookup = torch.full((vocab,), -1, dtype=torch.long, device=tokens.device)
    lookup[query_ids] = torch.arange(len(query_ids), device=tokens.device)
    return lookup[tokens[..., -1]]


# ----------------------------------------------------------------------------------------------------------------
# Batches: from a fixed training set (the order of ``training.FixedSetBatches``) or fresh, each model from its own seed


class FixedBatches:
    """Mini-batches of a fixed count set in ``training.FixedSetBatches``' order (model k reads its data row and
    reshuffles every epoch from its seed), gathered through one flat index per step; the positions of the models
    still training are rebuilt only when some leave (gathering is a fixed cost of every step; see the benchmark)."""

    def __init__(self, data: CountSet, members: Sequence[Member], batch_size: int) -> None:
        rows = [m.row for m in members]
        self.data = data
        self.order = FixedSetBatches(data.log_counts, data.labels, [m.seed for m in members], batch_size, rows=rows)
        self.offsets = torch.as_tensor(rows, device=data.labels.device)[:, None] * data.size
        self.active: tuple[int, torch.Tensor] | None = None  # (how many are left, their positions)

    def take(self, step: int, active: Sequence[int]) -> tuple[torch.Tensor, ...]:
        flat = self.order.indices(step) + self.offsets
        if len(active) < len(flat):
            if self.active is None or self.active[0] != len(active):  # models only ever leave the stack
                self.active = (len(active), torch.as_tensor(active, device=flat.device))
            flat = flat.index_select(0, self.active[1])
        return self.data.take_flat(flat)


class FreshBatches:
    """The authors' regime: new sequences for every step, each model from its own generator, drawn ``block`` steps
    at a time (classes balanced within a block) into one stacked count set that each step slices."""

    def __init__(self, cfg: SyntheticConfig, members: Sequence[Member], batch_size: int, block: int,
                 attend_to_query: bool, device: torch.device) -> None:
        self.cfg, self.batch_size, self.block, self.device = cfg, batch_size, block, device
        self.attend_to_query = attend_to_query
        self.rngs = [np.random.default_rng(int(m.seed) + 104729) for m in members]
        self.query_ids = torch.as_tensor(cfg.token_ids()["query"], device=device)
        self.drawn: tuple[list[int], tuple[torch.Tensor, ...]] | None = None  # (models, their block's tensors)

    def draw(self, active: Sequence[int]) -> tuple[torch.Tensor, ...]:
        """The next block of each active model, from its own generator: log counts, slots, labels [K, block B]."""
        drawn = [sample_tokens(self.cfg, self.batch_size * self.block, self.rngs[k]) for k in active]
        tokens, labels = (torch.as_tensor(np.stack(part), device=self.device) for part in zip(*drawn))
        return (_log_counts(tokens, self.cfg.vocab, self.attend_to_query),
                _query_slots(tokens, self.query_ids, self.cfg.vocab), labels)

    def take(self, step: int, active: Sequence[int]) -> tuple[torch.Tensor, ...]:
        if step % self.block == 0:
            self.drawn = (list(active), self.draw(active))
        models, block = self.drawn
        if len(active) < len(models):  # models only ever leave the stack
            keep = torch.as_tensor([models.index(k) for k in active], device=self.device)
            self.drawn = models, block = list(active), tuple(t.index_select(0, keep) for t in block)
        j = (step % self.block) * self.batch_size
        return tuple(t[:, j:j + self.batch_size] for t in block)  # views of the block: training only reads them


# ----------------------------------------------------------------------------------------------------------------
# The model: forward and hand-derived backward for a stack


def qk_scores(params: dict[str, torch.Tensor], query_ids: torch.Tensor) -> torch.Tensor:
    """[K, Q, V]: the score of every key token for each query token (W_QK[v, q] = (W_K W_Q^T)[v, q])."""
    if "W_QK" in params:
        return params["W_QK"][:, :, query_ids].transpose(1, 2)
    return torch.bmm(params["W_Q"][:, query_ids, :], params["W_K"].transpose(1, 2))


def attention_bag(params: dict[str, torch.Tensor], log_counts: torch.Tensor, slots: torch.Tensor,
                  query_ids: torch.Tensor, score_scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The attention mass per token a [K, B, V] (= X^T softmax(X W_QK x_T)) and the one-hot slots [K, B, Q]."""
    onehot = torch.nn.functional.one_hot(slots, len(query_ids)).to(log_counts.dtype)
    scores = torch.bmm(onehot, qk_scores(params, query_ids))
    if score_scale != 1.0:
        scores *= score_scale
    return torch.softmax(scores.add_(log_counts), dim=-1), onehot


def _times_transposed(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """a @ w^T for stacks [K, B, V] x [K, M, V] -> [K, B, M], contiguous (measured faster on the CPU than
    (w @ a^T)^T for every batch size the chapters use: 0.22 against 0.35 ms for 30 models, batch 128, V = 58)."""
    return torch.bmm(a, w.transpose(1, 2))


def forms_product(params: dict[str, torch.Tensor], bag: torch.Tensor) -> bool:
    """Whether a factorised OV circuit is cheaper applied as its product W_O W_V, formed once per step: when the
    batch is larger than the hidden size d (3 d^3 + 2 B d^2 multiply-adds per model against 5 B d^2)."""
    return "W_V" in params and bag.shape[1] > params["W_V"].shape[1]


def ov_logits(params: dict[str, torch.Tensor], bag: torch.Tensor, product: bool = False
              ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logits [K, B, M] = W_O (W_V a) (+ bias), and the hidden W_V a (None for a collapsed W_OV, or when the
    factorised circuit is applied as its ``product`` W_O W_V)."""
    if "W_OV" in params or product:
        w = params["W_OV"] if "W_OV" in params else torch.bmm(params["W_O"], params["W_V"])
        hidden, logits = None, _times_transposed(bag, w)
    else:
        hidden = _times_transposed(bag, params["W_V"])
        logits = _times_transposed(hidden, params["W_O"])
    logits = logits.contiguous()
    if "b_OV" in params:
        logits += params["b_OV"][:, None, :]
    return logits, hidden


def _cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-example NLL [K, B] and softmax probabilities [K, B, M]."""
    logp = torch.log_softmax(logits, dim=-1)
    return -torch.gather(logp, 2, labels[..., None]).squeeze(-1), logp.exp_()


def loss_and_grads(params: dict[str, torch.Tensor], sc: StackConfig, bag_or_counts: torch.Tensor,
                   slots: torch.Tensor | None, labels: torch.Tensor, query_ids: torch.Tensor | None
                   ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Mean cross-entropy per model [K] (eq. 2) on a batch and its gradient for every parameter.

    ``bag_or_counts`` is the log counts [K, B, V] (with ``slots`` and ``query_ids``) or, for ``qk="fixed"``, the
    attention bag itself."""
    if sc.qk == "fixed":
        bag = bag_or_counts
    else:
        bag, onehot = attention_bag(params, bag_or_counts, slots, query_ids, sc.score_scale)
    product = sc.qk == "fixed" and forms_product(params, bag)  # no gradient flows back into the bag then
    logits, hidden = ov_logits(params, bag, product)
    nll, g = _cross_entropy(logits, labels)
    g.scatter_add_(2, labels[..., None], torch.full(labels[..., None].shape, -1.0, dtype=g.dtype, device=g.device))
    g /= labels.shape[1]  # dL/dlogits of the batch mean
    grads: dict[str, torch.Tensor] = {}
    if "b_OV" in params:
        grads["b_OV"] = g.sum(1)
    if product:  # dL/d(W_O W_V), then the chain rule through the product
        d_w = torch.bmm(g.transpose(1, 2), bag)
        grads["W_O"] = torch.bmm(d_w, params["W_V"].transpose(1, 2))
        grads["W_V"] = torch.bmm(params["W_O"].transpose(1, 2), d_w)
        d_bag = None
    elif hidden is None:
        grads["W_OV"] = torch.bmm(g.transpose(1, 2), bag)
        d_bag = torch.bmm(g, params["W_OV"]) if sc.qk != "fixed" else None
    else:
        grads["W_O"] = torch.bmm(g.transpose(1, 2), hidden)
        d_hidden = torch.bmm(g, params["W_O"])
        grads["W_V"] = torch.bmm(d_hidden.transpose(1, 2), bag)
        d_bag = torch.bmm(d_hidden, params["W_V"]) if sc.qk != "fixed" else None
    if d_bag is not None:
        d_scores = bag * (d_bag - (bag * d_bag).sum(-1, keepdim=True))
        d_cols = torch.bmm(onehot.transpose(1, 2), d_scores)  # [K, Q, V]
        if sc.score_scale != 1.0:
            d_cols *= sc.score_scale
        if sc.qk == "collapsed":
            grads["W_QK"] = torch.zeros_like(params["W_QK"])
            grads["W_QK"][:, :, query_ids] = d_cols.transpose(1, 2)
        else:
            w_q = params["W_Q"][:, query_ids, :]
            grads["W_K"] = torch.bmm(d_cols.transpose(1, 2), w_q)
            grads["W_Q"] = torch.zeros_like(params["W_Q"])
            grads["W_Q"][:, query_ids, :] = torch.bmm(d_cols, params["W_K"])
    return nll.mean(1), grads


@torch.no_grad()
def evaluate_counts(params: dict[str, torch.Tensor], sc: StackConfig, data: CountSet, rows: torch.Tensor,
                    chunk: int = 2048) -> dict[str, np.ndarray]:
    """Per model and example: NLL, probability of the true label, correctness, attention on the query position and
    attention mass on distinct tokens. Model k reads data row ``rows[k]``."""
    out: dict[str, list[torch.Tensor]] = {k: [] for k in ("nll", "prob_true", "correct", "attn_query",
                                                          "attn_distinct")}
    for start in range(0, data.size, chunk):
        idx = torch.arange(start, min(start + chunk, data.size), device=rows.device).expand(len(rows), -1)
        log_counts, slots, labels = data.take(rows, idx)
        bag, _ = attention_bag(params, log_counts, slots, data.query_ids, sc.score_scale)
        logits, _ = ov_logits(params, bag)
        nll, prob = _cross_entropy(logits, labels)
        q = data.query_ids[slots][..., None]
        per_position = bag / log_counts.exp().clamp(min=1.0)  # the weight of one position holding each token
        out["nll"].append(nll)
        out["prob_true"].append(torch.gather(prob, 2, labels[..., None]).squeeze(-1))
        out["correct"].append(logits.argmax(-1) == labels)
        out["attn_query"].append(torch.gather(per_position, 2, q).squeeze(-1))
        out["attn_distinct"].append((per_position * data.distinct[rows[:, None], idx]).sum(-1))
    return {k: torch.cat(v, dim=1).cpu().numpy() for k, v in out.items()}


# ----------------------------------------------------------------------------------------------------------------
# Training


@dataclass
class StackResult:
    """Per model: final parameters (no stack dimension), the step it stopped at (-1: its cap), the steps it ran,
    and its curve of mean mini-batch loss per ``eval_every`` steps."""

    params: list[dict[str, torch.Tensor]]
    stopped_at: np.ndarray
    steps_run: np.ndarray
    curves: list[list[tuple[int, float]]] = field(default_factory=list)

    @property
    def hit_cap(self) -> np.ndarray:
        return self.stopped_at < 0

    def stacked(self, name: str) -> torch.Tensor:
        return torch.stack([p[name] for p in self.params])


class UpdateRatios:
    """The effective QK/OV ratio of each step it sees (Section 8's Adam question): for each model,
    (|dQK| / |QK|) / (|dOV| / |OV|), with |.| the Frobenius norm over a circuit's parameters. Under plain gradient
    flow on the ansatz this is what r = eta_QK/eta_OV scales; under AdamW a nominal multiplier need not."""

    def __init__(self, every: int = 50) -> None:
        if not (isinstance(every, int) and every >= 1):
            raise ValueError(f"every must be an integer >= 1 (got {every!r})")
        self.every = every
        self.rows: list[dict] = []

    def __call__(self, step: int, names: Sequence[tuple[str, int]], params: dict[str, torch.Tensor],
                 updates: dict[str, torch.Tensor]) -> None:
        """``names[k]`` = (panel, seed) of stacked model k."""
        def norm(tensors: dict[str, torch.Tensor], group: str) -> np.ndarray:
            sq = sum(t.flatten(1).pow(2).sum(1) for k, t in tensors.items() if _group(k) == group)
            return sq.sqrt().cpu().numpy()

        rel = {g: norm(updates, g) / np.maximum(norm(params, g), 1e-30) for g in ("qk", "ov")}
        for k, (panel, seed) in enumerate(names):
            self.rows.append({"step": step, "panel": panel, "seed": seed, "qk_rel_update": float(rel["qk"][k]),
                              "ov_rel_update": float(rel["ov"][k]),
                              "effective_ratio": float(rel["qk"][k] / max(rel["ov"][k], 1e-300))})


@contextlib.contextmanager
def flush_denormals(enabled: bool = True) -> Iterator[None]:
    """Flush subnormal floats to zero while training (the 1e-6 initialisation's products are subnormal and make
    CPU matmuls ~10x slower); restores the previous setting."""
    if not enabled:
        yield
        return
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def _group(name: str) -> str:
    """The circuit a stack parameter belongs to (``optim.CIRCUIT_OF``; Figure 3's output bias counts as OV)."""
    return CIRCUIT_OF.get(name, "ov")


class _Rates:
    """Each model's QK and OV learning rate at a step, as tensors (constant rates are built once)."""

    def __init__(self, members: Sequence[Member], device: torch.device) -> None:
        self.schedules, self.device = [m.spec.rates for m in members], device
        self.ramps = any(s.qk_schedule == "ramp" for s in self.schedules)
        self.fixed = {g: torch.tensor([s.rate(g, 0) for s in self.schedules], device=device) for g in ("qk", "ov")}
        self.cache: tuple[int, dict[str, torch.Tensor]] | None = None

    def at(self, step: int, active: Sequence[int]) -> dict[str, torch.Tensor]:
        if self.cache is None or self.cache[0] != len(active):  # models only ever leave the stack
            index = torch.as_tensor(active, device=self.device)
            self.cache = (len(active), {g: r[index] for g, r in self.fixed.items()})
        rates = dict(self.cache[1])
        if self.ramps:
            rates["qk"] = torch.tensor([self.schedules[k].rate("qk", step) for k in active], device=self.device)
        return rates


class _Optimiser:
    """SGD or AdamW (decoupled decay) over a stack, with a per-model rate and OV decay."""

    def __init__(self, sc: StackConfig, params: dict[str, torch.Tensor]) -> None:
        self.sc = sc
        self.state = {k: (torch.zeros_like(p), torch.zeros_like(p)) for k, p in params.items()} \
            if sc.optimizer == "adamw" else {}

    def step(self, params: dict[str, torch.Tensor], grads: dict[str, torch.Tensor], rates: dict[str, torch.Tensor],
             decay: torch.Tensor | None, count: int, keep_updates: bool = False) -> dict[str, torch.Tensor]:
        """Update in place (``decay`` None: no OV decay in this stack); returns the updates if asked."""
        updates = {}
        for name, p in params.items():
            shape = (-1, *[1] * (p.dim() - 1))
            g = grads[name]
            if self.sc.optimizer == "adamw":
                m, v = self.state[name]
                b1, b2 = self.sc.betas
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                g = (m / (1 - b1 ** count)) / ((v / (1 - b2 ** count)).sqrt_().add_(self.sc.eps))
            if decay is not None and _group(name) == "ov":
                g = g.addcmul_(p, decay.view(shape)) if g is grads[name] else g + decay.view(shape) * p
            lr = rates[_group(name)].view(shape)
            if keep_updates:
                updates[name] = lr * g
                p.sub_(updates[name])
            else:
                p.addcmul_(g, lr, value=-1.0)
        return updates

    def keep(self, index: torch.Tensor) -> None:
        self.state = {k: (m[index], v[index]) for k, (m, v) in self.state.items()}


def model_label(m: Member) -> str:
    """A model, as an error names it."""
    return f"the model with seed {m.seed} (lr = {m.spec.rates.lr}, QK multiplier = {m.spec.rates.qk_mult})"


# ----------------------------------------------------------------------------------------------------------------
# The one outer loop of both engines (read-outs, stop rules, recording, models leaving) over a step kernel


Batch = Callable[[int, Sequence[int]], tuple[torch.Tensor, ...]]
Monitor = Callable[[dict[str, torch.Tensor], Sequence[int], int], np.ndarray | None]
Recorder = Callable[[int, Sequence[int], dict[str, torch.Tensor], dict[str, torch.Tensor]], None]


class StepKernel(Protocol):
    """What trains under ``train_stack``'s one outer loop: the active models' parameters, optimiser state and
    batches. ``window`` [K] holds each active model's batch losses summed since the loop last zeroed it."""

    window: torch.Tensor

    def advance(self, start: int, stop: int, active: Sequence[int], record: bool) -> dict[str, torch.Tensor] | None:
        """Train the models ``active`` (ids, in stack order) over steps ``start`` to ``stop - 1``, adding their
        losses to ``window``; with ``record``, return the updates of step ``stop - 1``."""

    def params(self, rows: list[int] | None = None) -> dict[str, torch.Tensor]:
        """The active models' stacked parameters as they train, or a copy of those at positions ``rows``."""

    def model(self, j: int) -> dict[str, torch.Tensor]:
        """A copy of the parameters of the model at position ``j`` (no stack dimension)."""

    def keep(self, rows: list[int]) -> None:
        """Only the models at positions ``rows`` go on (models only ever leave the stack)."""


# A kernel for (params, members, sc, batch, query_ids, quiet): ``quiet`` when the progress bar is off
KernelFactory = Callable[[dict[str, torch.Tensor], Sequence[Member], StackConfig, Batch, torch.Tensor | None, bool],
                         StepKernel]


class TorchKernel:
    """The torch engine as a step kernel: one step at a time (the reference, and the CUDA path; it has no notice
    to keep ``quiet``)."""

    def __init__(self, params: dict[str, torch.Tensor], members: Sequence[Member], sc: StackConfig, batch: Batch,
                 query_ids: torch.Tensor | None, quiet: bool) -> None:
        self.sc, self.batch, self.query_ids = sc, batch, query_ids
        self.work = {k: v.detach().clone() for k, v in params.items()}
        self.opt = _Optimiser(sc, self.work)
        device = next(iter(self.work.values())).device
        self.decay = torch.tensor([m.spec.ov_decay for m in members], device=device) \
            if any(m.spec.ov_decay for m in members) else None
        self.window = torch.zeros(len(members), device=device)
        self.rates = _Rates(members, device)

    def advance(self, start: int, stop: int, active: Sequence[int], record: bool) -> dict[str, torch.Tensor] | None:
        updates = None
        for step in range(start, stop):
            inputs, slots, labels = self.batch(step, active)
            loss, grads = loss_and_grads(self.work, self.sc, inputs, slots, labels, self.query_ids)
            self.window += loss
            updates = self.opt.step(self.work, grads, self.rates.at(step, active), self.decay, step + 1,
                                    keep_updates=record and step == stop - 1)
        return updates if record else None

    def params(self, rows: list[int] | None = None) -> dict[str, torch.Tensor]:
        return self.work if rows is None else {k: v[rows] for k, v in self.work.items()}

    def model(self, j: int) -> dict[str, torch.Tensor]:
        return {name: v[j].clone() for name, v in self.work.items()}

    def keep(self, rows: list[int]) -> None:
        index = torch.as_tensor(rows, dtype=torch.long, device=self.window.device)
        self.work = {name: v[index] for name, v in self.work.items()}
        self.opt.keep(index)
        self.window = self.window[index]
        self.decay = self.decay[index] if self.decay is not None else None


def _epoch_stops(running: torch.Tensor, members: Sequence[Member], active: Sequence[int], done: int,
                 target: float) -> list[int]:
    """The authors' stop rule (``StackConfig``) at step ``done`` for the active models that use it: which of them
    stop (positions in ``active``); resets their sums after every 100th epoch."""
    hits = []
    for j, k in enumerate(active):
        epoch = members[k].spec.stop_epoch
        if epoch is None or not members[k].spec.early_stop or done % epoch:
            continue
        if float(running[j]) / epoch <= target:
            hits.append(j)
        if (done // epoch) % 100 == 0:
            running[j] = 0.0
    return hits


def _chunk_end(step: int, every: int, cap: int, record_every: int) -> int:
    """Where the loop next looks, training from ``step``: the next read-out (a multiple of ``every``), the first cap
    of the models left, or just after the next recorded step, whichever comes first."""
    end = min((step // every + 1) * every, cap)
    if record_every:
        end = min(end, -(-step // record_every) * record_every + 1)
    return end


def train_stack(params: dict[str, torch.Tensor], members: Sequence[Member], sc: StackConfig, batch: Batch,
                query_ids: torch.Tensor | None = None, full_nll: Monitor | None = None,
                every_eval: Monitor | None = None, recorder: Recorder | None = None, record_every: int = 0,
                progress: bool = True, desc: str = "training", kernel: KernelFactory = TorchKernel) -> StackResult:
    """Train the stacked ``params`` [K, ...] (model k = ``members[k]``) on ``batch(step, active) -> (inputs, slots,
    labels)``. ``full_nll(params, active, step)`` returns the training-set NLL of the given models (the stop rule,
    see ``StackConfig``); ``every_eval`` is called every ``eval_every`` steps (Figure 3's read-outs);
    ``recorder(step, active, params, updates)`` sees every ``record_every``-th update (Section 8). Parameters are
    not modified.

    The one outer loop of both engines: the ``kernel`` (``TorchKernel``, or ``compiled.CompiledKernel`` as
    ``backends.train_stack`` picks) trains up to the next step the loop must look at (a read-out, a model's cap, a
    recorded step); the loop keeps the loss curves, both stop rules (Section 4) and the models that leave."""
    specs = [m.spec for m in members]
    for spec in specs:
        if spec.stop_epoch is not None and spec.stop_epoch % sc.eval_every:
            raise ValueError(f"stop_epoch = {spec.stop_epoch} must be a multiple of eval_every = {sc.eval_every}")
    n = len(members)
    final: list[dict[str, torch.Tensor] | None] = [None] * n
    stopped, steps_run = np.full(n, -1), np.zeros(n, dtype=int)
    curves: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    active, step, record = list(range(n)), 0, recorder is not None and record_every > 0
    with bar(None, desc, enabled=progress, total=max(spec.max_steps for spec in specs), leave=False) as steps:
        stack = kernel(params, members, sc, batch, query_ids, steps.disable)
        running = torch.zeros_like(stack.window)  # summed losses since the last reset, for the authors' stop rule
        while active:
            done = _chunk_end(step, sc.eval_every, min(specs[k].max_steps for k in active), record_every * record)
            recorded = record and (done - 1) % record_every == 0
            updates = stack.advance(step, done, active, recorded)
            steps.update(done - step)
            step = done
            if recorded:
                recorder(done - 1, active, stack.params(), updates)
            finished = [j for j, k in enumerate(active) if specs[k].max_steps == done]
            window = stack.window
            if done % sc.eval_every == 0 or finished:
                check_finite(window, done, lambda j: model_label(members[active[j]]), sc.eval_every)
            if done % sc.eval_every == 0:
                mean = (window / sc.eval_every).cpu().numpy()
                running += window
                window.zero_()
                for j, k in enumerate(active):
                    curves[k].append((done, float(mean[j])))
                if every_eval is not None:
                    every_eval(stack.params(), active, done)
                if sc.target_nll > 0:
                    hits = _epoch_stops(running, members, active, done, sc.target_nll)
                    near = [j for j, k in enumerate(active) if specs[k].early_stop and specs[k].stop_epoch is None
                            and mean[j] <= sc.gate * sc.target_nll]
                    if near and full_nll is not None:
                        nll = full_nll(stack.params(near), [active[j] for j in near], done)
                        hits += [j for j, value in zip(near, nll) if value <= sc.target_nll]
                    stopped[[active[j] for j in hits]] = done
                    finished = sorted(set(finished) | set(hits))
            if finished:
                for j in finished:
                    final[active[j]] = stack.model(j)
                    steps_run[active[j]] = done
                keep = [j for j in range(len(active)) if j not in finished]
                stack.keep(keep)
                running = running[torch.as_tensor(keep, dtype=torch.long, device=running.device)]
                active = [active[j] for j in keep]
                steps.set_postfix_str(f"{len(active)} of {n} running")
    return StackResult(final, stopped, steps_run, curves)
