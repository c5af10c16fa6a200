"""Token-level classification data with relevance masks (Section 7): splits, a word-level vocabulary built from the
training split, and id tensors with a read-out token appended (the position the classifier reads)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .registry import DataError

PAD, UNK, READOUT = "<pad>", "<unk>", "<readout>"


def seeded_rows(size: int, n: int | None, seed: int = 0) -> np.ndarray:
    """The rows of a seeded random subset of n out of ``size``, in order (all rows when n is None or >= size)."""
    if n is None or n >= size:
        return np.arange(size)
    return np.sort(np.random.default_rng(seed).choice(size, n, replace=False))


@dataclass
class TextSplit:
    """One split: tokens and label per example; ``relevant`` a boolean mask per example (None: no annotation);
    ``groups`` an integer per example for accuracy by group (SVA: the number of attractors); ``backoff`` a token per
    token to read where the vocabulary lacks the word (SVA: its part-of-speech tag)."""

    name: str
    tokens: list[list[str]]
    labels: np.ndarray
    relevant: Sequence[np.ndarray | None]
    groups: np.ndarray | None = None
    backoff: list[list[str]] | None = None

    def __post_init__(self) -> None:
        if not self.tokens:
            raise DataError(f"the {self.name} split is empty; check the data files")
        for i, (toks, rel) in enumerate(zip(self.tokens, self.relevant)):
            if rel is not None and len(rel) != len(toks):
                raise DataError(f"{self.name} example {i}: relevance mask of length {len(rel)} for {len(toks)} tokens")
        if self.groups is not None and len(self.groups) != len(self.tokens):
            raise DataError(f"{self.name}: {len(self.groups)} groups for {len(self.tokens)} examples")
        if self.backoff is not None and [len(b) for b in self.backoff] != [len(t) for t in self.tokens]:
            raise DataError(f"{self.name}: the back-off tokens do not align with the tokens")

    def __len__(self) -> int:
        return len(self.tokens)

    def subset(self, n: int | None, seed: int = 0) -> TextSplit:
        """A seeded random subset of n examples (all when n is None or >= the size), order kept."""
        return self if n is None or n >= len(self) else self.take(seeded_rows(len(self), n, seed))

    def take(self, rows: np.ndarray, name: str | None = None) -> TextSplit:
        """The examples at ``rows``, in that order."""
        return TextSplit(
            name or self.name,
            [self.tokens[i] for i in rows],
            self.labels[rows],
            [self.relevant[i] for i in rows],
            None if self.groups is None else self.groups[rows],
            None if self.backoff is None else [self.backoff[i] for i in rows],
        )


class Vocab:
    """Words of the training split seen at least ``min_freq`` times (at most ``max_size``), after the specials
    (<pad> = 0, <unk> = 1, <readout> = 2, then ``extra``)."""

    def __init__(
        self,
        splits_tokens: list[list[str]],
        min_freq: int = 1,
        max_size: int | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        counts = Counter(t for toks in splits_tokens for t in toks)
        words = [w for w, c in counts.most_common(max_size) if c >= min_freq and w not in extra]
        self.itos = [PAD, UNK, READOUT, *extra, *words]
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def ids(self, tokens: list[str], backoff: list[str] | None = None) -> list[int]:
        """Each token's id; an unknown token reads its ``backoff`` token when given and known, else <unk>."""
        if backoff is None:
            return [self.stoi.get(t, 1) for t in tokens]
        return [self.stoi.get(t, self.stoi.get(b, 1)) for t, b in zip(tokens, backoff)]


@dataclass
class Encoded:
    """ids [N, T] (0 = padding, the read-out token after the last kept word), labels [N], relevant [N, T] bool
    (False where unannotated), has_relevance [N] (examples with at least one relevant kept token), groups [N] or
    None."""

    ids: torch.Tensor
    labels: torch.Tensor
    relevant: torch.Tensor
    has_relevance: torch.Tensor
    groups: torch.Tensor | None = None

    @property
    def lengths(self) -> torch.Tensor:
        return (self.ids != 0).sum(1)


def encode(split: TextSplit, vocab: Vocab, max_len: int) -> Encoded:
    """Truncate to ``max_len - 1`` words, append the read-out token, pad; relevance masks truncated alike. Unknown
    words read their back-off token where the split has one."""
    if max_len < 2:
        raise ValueError(f"max_len must be >= 2 (one word and the read-out token); got {max_len}")
    n = len(split)
    ids = torch.zeros(n, max_len, dtype=torch.long)
    rel = torch.zeros(n, max_len, dtype=torch.bool)
    for i, toks in enumerate(split.tokens):
        kept = vocab.ids(toks[: max_len - 1], None if split.backoff is None else split.backoff[i][: max_len - 1])
        ids[i, : len(kept)] = torch.tensor(kept, dtype=torch.long)
        ids[i, len(kept)] = vocab.stoi[READOUT]
        mask = split.relevant[i]
        if mask is not None:
            rel[i, : len(kept)] = torch.from_numpy(np.asarray(mask[: len(kept)], dtype=bool))
    groups = None if split.groups is None else torch.as_tensor(split.groups, dtype=torch.long)
    return Encoded(ids, torch.as_tensor(split.labels, dtype=torch.long), rel, rel.any(1), groups)


def unknown_rate(split: TextSplit, vocab: Vocab) -> float:
    """Share of the split's tokens outside the vocabulary (before any back-off)."""
    total = sum(len(t) for t in split.tokens)
    return sum(tok not in vocab.stoi for toks in split.tokens for tok in toks) / max(total, 1)
