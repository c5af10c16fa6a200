"""Sequences as the synthetic engine reads them: with one-hot tokens a sequence enters eq. (1) only through its token
counts and its query (``CountSet``), and the mini-batches of a stack, from a fixed training set in
``training.FixedSetBatches``' order or fresh for every step, each model from its own seed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..data.synthetic import SyntheticConfig, SyntheticSplit, sample_tokens
from .stack import Member
from .training import FixedSetBatches


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
        return (
            self.log_counts.view(-1, self.log_counts.shape[-1]).index_select(0, flat).view(*shape, -1),
            self.slots.view(-1).index_select(0, flat).view(shape),
            self.labels.view(-1).index_select(0, flat).view(shape),
        )


def count_set(
    split: SyntheticSplit, vocab: int, attend_to_query: bool = True, query_ids: torch.Tensor | None = None
) -> CountSet:
    """A split [R, N, T] (query last) as counts. ``attend_to_query=False`` removes the query position itself."""
    tokens = split.tokens
    distinct = torch.zeros(*tokens.shape[:-1], vocab, device=tokens.device).scatter_add_(
        -1, tokens, split.distinct.float()
    )
    query_ids = (torch.unique(tokens[..., -1]) if query_ids is None else query_ids).to(tokens.device)
    return CountSet(
        log_counts(tokens, vocab, attend_to_query),
        query_slots(tokens, query_ids, vocab),
        split.labels,
        distinct,
        query_ids,
    )


def log_counts(tokens: torch.Tensor, vocab: int, attend_to_query: bool) -> torch.Tensor:
    """[..., V]: log of each token's count in sequences [..., T], -inf where absent (the query, last, not counted
    when ``attend_to_query`` is False)."""
    ones = torch.ones(tokens.shape, dtype=torch.float32, device=tokens.device)
    if not attend_to_query:
        ones[..., -1] = 0.0
    counts = torch.zeros(*tokens.shape[:-1], vocab, device=tokens.device).scatter_add_(-1, tokens, ones)
    return counts.clamp(min=1.0).log_().masked_fill_(counts == 0, -torch.inf)  # log(0) is ~20x slower


def query_slots(tokens: torch.Tensor, query_ids: torch.Tensor, vocab: int) -> torch.Tensor:
    """[...]: each sequence's query (its last token) as its slot among ``query_ids``."""
    lookup = torch.full((vocab,), -1, dtype=torch.long, device=tokens.device)
    lookup[query_ids] = torch.arange(len(query_ids), device=tokens.device)
    return lookup[tokens[..., -1]]


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

    def __init__(
        self,
        cfg: SyntheticConfig,
        members: Sequence[Member],
        batch_size: int,
        block: int,
        attend_to_query: bool,
        device: torch.device,
    ) -> None:
        self.cfg, self.batch_size, self.block, self.device = cfg, batch_size, block, device
        self.attend_to_query = attend_to_query
        self.rngs = [np.random.default_rng(int(m.seed) + 104729) for m in members]
        self.query_ids = torch.as_tensor(cfg.token_ids()["query"], device=device)
        self.drawn: tuple[list[int], tuple[torch.Tensor, ...]] | None = None  # (models, their block's tensors)

    def draw(self, active: Sequence[int]) -> tuple[torch.Tensor, ...]:
        """The next block of each active model, from its own generator: log counts, slots, labels [K, block B]."""
        drawn = [sample_tokens(self.cfg, self.batch_size * self.block, self.rngs[k]) for k in active]
        tokens, labels = (torch.as_tensor(np.stack(part), device=self.device) for part in zip(*drawn))
        return (
            log_counts(tokens, self.cfg.vocab, self.attend_to_query),
            query_slots(tokens, self.query_ids, self.cfg.vocab),
            labels,
        )

    def take(self, step: int, active: Sequence[int]) -> tuple[torch.Tensor, ...]:
        if step % self.block == 0:
            self.drawn = (list(active), self.draw(active))
        if self.drawn is None:
            raise RuntimeError(f"the first step taken must start a block of {self.block} (got step {step})")
        models, block = self.drawn
        if len(active) < len(models):  # models only ever leave the stack
            keep = torch.as_tensor([models.index(k) for k in active], device=self.device)
            self.drawn = models, block = list(active), tuple(t.index_select(0, keep) for t in block)
        j = (step % self.block) * self.batch_size
        return tuple(t[:, j : j + self.batch_size] for t in block)  # views of the block: training only reads them
