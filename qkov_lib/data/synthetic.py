"""The synthetic next-token task of Section 4 and Appendix A.2.1 (after Tian et al., 2023).

Each class c has a query token q_c, a next token n_c (the label), C distinct tokens of its own, and shares D common
tokens with every class. A sequence is ``seq_len - 1`` context tokens drawn i.i.d. from
P(l | n) = gamma / C for l distinct to the class, (1 - gamma) / D for l common, then the query token.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

from ..core.validation import is_positive_int, require_positive_ints

LAYOUTS = ("disjoint", "official")
WEIGHTS = ("uniform", "linear")
CLASS_DRAWS = ("balanced", "random")
FIELDS = ("tokens", "labels", "classes", "distinct")


def check_seq_len(name: str, value: int) -> None:
    """A sequence length: an integer >= 2, at least one context token and the query."""
    if not (is_positive_int(value) and value >= 2):
        raise ValueError(f"{name} must be an integer >= 2: at least one context token and the query (got {value!r})")


@dataclass(frozen=True)
class SyntheticConfig:
    """Task sizes and sampling. ``vocab_size=None`` means exactly the tokens the layout needs."""

    n_classes: int = 4  # "4 classes" (Section 4)
    n_distinct: int = 10  # distinct tokens per class (Section 4)
    n_common: int = 10  # common tokens (Section 4)
    seq_len: int = 64  # "sequence length 64" (Section 4): 63 context tokens and the query
    gamma: float = 11 / 31  # the distinct tokens' share (never stated; the authors' notebook samples 11/31)
    vocab_size: int | None = None  # None: exactly the tokens the layout needs (58; the paper says 50)
    distinct_weights: str = "uniform"  # P(l | n) = gamma / C (Section 4); the authors': "linear"
    layout: str = "disjoint"  # every token its own id; "official": the authors' 50 ids
    class_draw: str = "balanced"  # "classes uniform": n/4 of each, shuffled; "random": each drawn anew (the authors')

    def __post_init__(self) -> None:
        require_positive_ints(self, ("n_classes", "n_distinct", "n_common", "seq_len"))
        if not (isinstance(self.gamma, (int, float)) and 0 < self.gamma < 1):
            raise ValueError(f"gamma (mixture weight of distinct tokens) must lie in (0, 1) (got {self.gamma!r})")
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)} (got {self.layout!r})")
        if self.class_draw not in CLASS_DRAWS:
            raise ValueError(f"class_draw must be one of {', '.join(CLASS_DRAWS)} (got {self.class_draw!r})")
        if self.distinct_weights not in WEIGHTS:
            raise ValueError(f"distinct_weights must be one of {', '.join(WEIGHTS)} (got {self.distinct_weights!r})")
        check_seq_len("seq_len", self.seq_len)
        if self.vocab_size is not None and self.vocab_size < self.min_vocab:
            raise ValueError(
                f"vocab_size = {self.vocab_size} cannot hold the {self.min_vocab} tokens the "
                f"{self.layout!r} layout needs; use vocab_size >= {self.min_vocab} or None"
            )

    @property
    def min_vocab(self) -> int:
        """Tokens needed: the official layout hides queries and next tokens among the common ids."""
        base = self.n_classes * self.n_distinct + self.n_common
        return base if self.layout == "official" else base + 2 * self.n_classes

    @property
    def vocab(self) -> int:
        return self.vocab_size or self.min_vocab

    @property
    def data(self) -> SyntheticConfig:
        """The task alone: a plain ``SyntheticConfig`` of these sizes and sampling (a chapter's setup that extends
        this class adds its own fields)."""
        return SyntheticConfig(**{f.name: getattr(self, f.name) for f in fields(SyntheticConfig)})

    def token_ids(self) -> dict[str, np.ndarray]:
        """Ids of common tokens [D], distinct tokens [classes, C], queries [classes] and next tokens [classes]."""
        k, c, d = self.n_classes, self.n_distinct, self.n_common
        common = np.arange(d)
        distinct = d + np.arange(k * c).reshape(k, c)
        if self.layout == "official":  # authors' notebook: next 1..k and queries 5..5+k-1, inside the common ids
            if d < 5 + k:
                raise ValueError(f"the official layout needs n_common >= {5 + k} (got {d})")
            return {"common": common, "distinct": distinct, "query": 5 + np.arange(k), "next": 1 + np.arange(k)}
        start = d + k * c
        return {"common": common, "distinct": distinct, "query": start + np.arange(k), "next": start + k + np.arange(k)}

    def context_distribution(self) -> np.ndarray:
        """P(l | class) as a [classes, vocab] matrix (rows sum to 1)."""
        ids = self.token_ids()
        probs = np.zeros((self.n_classes, self.vocab))
        w = np.ones(self.n_distinct) if self.distinct_weights == "uniform" else np.arange(1, self.n_distinct + 1) / 10
        for cls in range(self.n_classes):
            probs[cls, ids["common"]] += (1 - self.gamma) / self.n_common
            probs[cls, ids["distinct"][cls]] += self.gamma * w / w.sum()
        return probs


@dataclass
class SyntheticSplit:
    """Token ids [N, seq_len] (query last), labels (next-token ids) [N], classes [N], distinct mask [N, seq_len]."""

    tokens: torch.Tensor
    labels: torch.Tensor
    classes: torch.Tensor
    distinct: torch.Tensor

    def __len__(self) -> int:
        return len(self.labels)

    def apply(self, fn) -> SyntheticSplit:
        """The same split with ``fn`` applied to each of its tensors (move to a device, slice seeds, ...)."""
        return SyntheticSplit(*(fn(getattr(self, f)) for f in FIELDS))


def inverse_cdf(cum: np.ndarray, u: np.ndarray, grid: int = 4096) -> np.ndarray:
    """``np.searchsorted(cum, u, side="left")`` for u in [0, 1), the same integers ~10x faster: u * grid is exact
    (grid is a power of two), so u lies in [j, j + 1) / grid with j = floor(u * grid), and the answer there is
    known wherever no entry of ``cum`` falls inside that cell; only the few other u are searched."""
    cells = np.arange(grid + 1) / grid
    bounds = np.searchsorted(cum, cells, side="left")  # answer for u = cell edge; monotone in u
    lo, sure = bounds[:-1], bounds[:-1] == bounds[1:]
    j = (u * grid).astype(np.intp)
    out = lo[j]
    unsure = ~sure[j]
    out[unsure] = np.searchsorted(cum, u[unsure], side="left")
    return out


def _sample(cfg: SyntheticConfig, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n sequences, their classes balanced (shuffled) or each drawn uniformly at random (``class_draw``); returns
    (tokens [n, T], classes [n])."""
    if cfg.class_draw == "balanced":
        classes = rng.permutation(np.arange(n) % cfg.n_classes)
    else:
        classes = rng.integers(0, cfg.n_classes, n)
    probs = cfg.context_distribution()
    cum = np.cumsum(probs, axis=1)
    u = rng.random((n, cfg.seq_len - 1))
    context = np.empty(u.shape, dtype=np.int64)
    for cls in range(cfg.n_classes):  # inverse CDF: the first token whose cumulative probability reaches u
        rows = classes == cls
        context[rows] = inverse_cdf(cum[cls], u[rows])
    context = np.minimum(context, cfg.vocab - 1)
    query = cfg.token_ids()["query"][classes]
    return np.concatenate([context, query[:, None]], axis=1), classes


def _distinct_mask(cfg: SyntheticConfig, tokens: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """[N, T]: whether each position holds a distinct token of its sequence's class (never the query position)."""
    table = np.zeros((cfg.n_classes, cfg.vocab), dtype=bool)  # table[class, token]: distinct for that class
    np.put_along_axis(table, cfg.token_ids()["distinct"], True, axis=1)
    mask = table[classes[:, None], tokens]
    mask[:, -1] = False
    return mask


def _as_split(cfg: SyntheticConfig, tokens: np.ndarray, classes: np.ndarray) -> SyntheticSplit:
    return SyntheticSplit(
        torch.as_tensor(tokens),
        torch.as_tensor(cfg.token_ids()["next"][classes]),
        torch.as_tensor(classes),
        torch.as_tensor(_distinct_mask(cfg, tokens, classes)),
    )


def sample_tokens(cfg: SyntheticConfig, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n fresh sequences (classes as ``class_draw`` says), as the authors' notebooks draw every batch: tokens [n, T]
    (query last) and labels (next-token ids) [n]; no distinct mask, which training batches do not read."""
    tokens, classes = _sample(cfg, n, rng)
    return tokens, cfg.token_ids()["next"][classes]


def sample_split(cfg: SyntheticConfig, n: int, rng: np.random.Generator) -> SyntheticSplit:
    """n fresh sequences with their distinct masks (``sample_tokens``' draw), for what reads the distinct positions
    of fresh sequences (Figure 3's bags under the authors' regime)."""
    return _as_split(cfg, *_sample(cfg, n, rng))


def make_splits(cfg: SyntheticConfig, n_train: int, n_test: int, seed: int) -> tuple[SyntheticSplit, SyntheticSplit]:
    """A fixed training set and a held-out test set with no sequence in common, both from ``seed``."""
    if n_train < cfg.n_classes or n_test < cfg.n_classes:
        raise ValueError(f"n_train and n_test must be >= n_classes = {cfg.n_classes} (got {n_train}, {n_test})")
    rng = np.random.default_rng(seed)
    (tr_tok, tr_cls), (te_tok, te_cls) = _sample(cfg, n_train, rng), _sample(cfg, n_test, rng)
    tokens, classes = np.concatenate([tr_tok, te_tok]), np.concatenate([tr_cls, te_cls])
    _, first = np.unique(tokens, axis=0, return_index=True)
    keep = np.zeros(len(tokens), bool)
    keep[first] = True  # a repeated sequence stays only where it first occurs
    train_idx = np.arange(n_train)
    test_idx = np.arange(n_train, n_train + n_test)
    test_idx = test_idx[keep[test_idx] & ~_in_rows(tokens[test_idx], tokens[train_idx])]
    return _as_split(cfg, tokens[train_idx], classes[train_idx]), _as_split(cfg, tokens[test_idx], classes[test_idx])


def _in_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each row of a, whether it equals some row of b."""
    seen = {row.tobytes() for row in b}
    return np.array([row.tobytes() in seen for row in a], dtype=bool)


def stack_splits(splits: list[SyntheticSplit]) -> SyntheticSplit:
    """Stack per-seed splits on a leading seed dimension (trimmed to the shortest, should a test set have lost a
    duplicated sequence)."""
    n = min(len(s) for s in splits)
    return SyntheticSplit(*(torch.stack([getattr(s, f)[:n] for s in splits]) for f in FIELDS))
