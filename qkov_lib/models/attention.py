"""The single-layer attention model of eq. (1), f(X) = W_O W_V X^T softmax(X W_K W_Q^T x_T), for many seeds at once.

Parameters carry a leading seed dimension S, so S independent models train in one pass. Parameterisations
(Section 3): FAFO (W_Q, W_K, W_O, W_V), FACO (W_Q, W_K, W_OV), CAFO (W_QK, W_O, W_V), CACO (W_QK, W_OV).
Because tokens are ids and x_t = E[token], both circuits reduce to small effective matrices over the vocabulary,
QK[key, query] = E W_K W_Q^T E^T and OV[class, token] = W_O W_V E^T, which the forward pass indexes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

PARAMETERISATIONS = ("FAFO", "FACO", "CAFO", "CACO")
INITS = ("balanced", "identity", "pytorch")
COLLAPSED_INITS = ("product", "factor")


def check_init(init: str, init_scale: float, collapsed_init: str = "product") -> None:
    """Raise ValueError unless the initialisation (``AttentionConfig``'s ``init``, ``init_scale`` and
    ``collapsed_init``) is one the models know."""
    if init not in INITS:
        raise ValueError(f"unknown init {init!r}; allowed: {', '.join(INITS)}")
    if collapsed_init not in COLLAPSED_INITS:
        raise ValueError(f"unknown collapsed_init {collapsed_init!r}; allowed: {', '.join(COLLAPSED_INITS)}")
    if not init_scale > 0:
        raise ValueError(f"init_scale must be > 0 (got {init_scale!r})")


@dataclass(frozen=True)
class AttentionConfig:
    """``d_model=None`` means one-hot embeddings (E = I, d = vocab); an int gives a learned E [vocab, d_model].

    ``init_scale`` sigma: each circuit starts as a balanced factor pair of scale sigma (factorised) or as the
    product of such a pair (collapsed), so all four parameterisations start from the same function for a seed.
    ``init="balanced"`` draws the pair at random; ``"identity"`` uses sigma * I for every factor (the authors');
    ``"pytorch"`` draws every matrix, factor or collapsed, as ``nn.Linear`` does by default, U(+-sigma/sqrt(fan_in))
    (sigma = 1 is PyTorch's own default; the parameterisations then do not start from the same function).
    ``score_scale`` multiplies the attention scores (eq. 1 has none; the authors used 1/sqrt(d)).
    ``collapsed_init``: a collapsed circuit starts as its factor pair's ``"product"`` (sigma^2 * I for the identity
    init), or as one ``"factor"`` (sigma * I: the authors' notebooks, where each layer starts at 1e-6 * I).
    """

    parameterisation: str = "FAFO"
    vocab: int = 58
    n_out: int | None = None
    d_model: int | None = None
    init_scale: float = 0.1
    init: str = "balanced"
    score_scale: float = 1.0
    attend_to_query: bool = True
    collapsed_init: str = "product"

    def __post_init__(self) -> None:
        if self.parameterisation not in PARAMETERISATIONS:
            raise ValueError(
                f"unknown parameterisation {self.parameterisation!r}; allowed: {', '.join(PARAMETERISATIONS)}"
            )
        if not (isinstance(self.vocab, int) and self.vocab > 1):
            raise ValueError(f"vocab must be an integer > 1 (got {self.vocab!r})")
        if self.d_model is not None and not (isinstance(self.d_model, int) and self.d_model > 0):
            raise ValueError(
                f"d_model must be a positive integer or None for one-hot embeddings (got {self.d_model!r})"
            )
        check_init(self.init, self.init_scale, self.collapsed_init)

    @property
    def d(self) -> int:
        return self.d_model or self.vocab

    @property
    def outputs(self) -> int:
        """M: the number of logits (the vocabulary unless set)."""
        return self.n_out or self.vocab

    @property
    def qk_factorised(self) -> bool:
        return self.parameterisation[:2] == "FA"

    @property
    def ov_factorised(self) -> bool:
        return self.parameterisation[2:] == "FO"


def matrices(parameterisation: str) -> tuple[str, ...]:
    """The matrices a parameterisation trains (Section 3): W_K and W_Q or W_QK, then W_O and W_V or W_OV."""
    qk = ("W_K", "W_Q") if parameterisation[:2] == "FA" else ("W_QK",)
    return qk + (("W_O", "W_V") if parameterisation[2:] == "FO" else ("W_OV",))


def _orthonormal(rows: int, cols: int, gen: torch.Generator) -> torch.Tensor:
    q, r = torch.linalg.qr(torch.randn(rows, cols, generator=gen, dtype=torch.float64))
    return (q * torch.sign(torch.diagonal(r))).float()


def _balanced_qk(d: int, sigma: float, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """W_K = sigma U1 A, W_Q = sigma U2 A: W_Q^T W_Q = W_K^T W_K (Lemma 1's balancedness)."""
    a = torch.randn(d, d, generator=gen) / d**0.5
    return sigma * _orthonormal(d, d, gen) @ a, sigma * _orthonormal(d, d, gen) @ a


def _balanced_ov(m: int, d: int, sigma: float, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """W_V = sigma A U1, W_O = sigma U2 A^T (U2 with orthonormal columns): W_O^T W_O = W_V W_V^T."""
    a = torch.randn(d, d, generator=gen) / d**0.5
    if m < d:
        raise ValueError(f"a balanced W_O needs at least as many outputs as d_model (got M={m}, d={d})")
    return sigma * _orthonormal(m, d, gen) @ a.T, sigma * a @ _orthonormal(d, d, gen)


def _pairs(cfg: AttentionConfig, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Identity or random balanced factor pairs of scale sigma; a collapsed circuit starts as its pair's product, or
    as its first factor (``collapsed_init="factor"``)."""
    if cfg.init == "identity":
        w_k = w_q = w_v = cfg.init_scale * torch.eye(cfg.d)
        w_o = cfg.init_scale * torch.eye(cfg.outputs, cfg.d)
    else:
        w_k, w_q = _balanced_qk(cfg.d, cfg.init_scale, gen)
        w_o, w_v = _balanced_ov(cfg.outputs, cfg.d, cfg.init_scale, gen)
    product = cfg.collapsed_init == "product"
    p = {"W_K": w_k, "W_Q": w_q} if cfg.qk_factorised else {"W_QK": w_k @ w_q.T if product else w_k}
    return p | ({"W_O": w_o, "W_V": w_v} if cfg.ov_factorised else {"W_OV": w_o @ w_v if product else w_o})


def _pytorch_default(cfg: AttentionConfig, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Every matrix as an ``nn.Linear`` weight [out, in] starts by default: U(-b, b), b = sigma / sqrt(in)."""

    def linear(rows: int, cols: int) -> torch.Tensor:
        return (torch.rand(rows, cols, generator=gen) * 2 - 1) * cfg.init_scale / cols**0.5

    d, m = cfg.d, cfg.outputs
    p = {"W_K": linear(d, d), "W_Q": linear(d, d)} if cfg.qk_factorised else {"W_QK": linear(d, d)}
    p |= {"W_O": linear(m, d), "W_V": linear(d, d)} if cfg.ov_factorised else {"W_OV": linear(m, d)}
    return p


def init_params(
    cfg: AttentionConfig, seeds: Sequence[int], device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """Parameters for each seed, stacked on a leading dimension; each seed's draw is independent of the others."""
    per_seed = []
    for seed in seeds:
        gen = torch.Generator().manual_seed(int(seed))
        p = _pytorch_default(cfg, gen) if cfg.init == "pytorch" else _pairs(cfg, gen)
        if cfg.d_model is not None:
            p["E"] = torch.randn(cfg.vocab, cfg.d, generator=gen) / cfg.d**0.5
        per_seed.append(p)
    return {k: torch.stack([p[k] for p in per_seed]).to(device).requires_grad_() for k in per_seed[0]}


def effective_circuits(params: dict[str, torch.Tensor], cfg: AttentionConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """QK [S, vocab(key), vocab(query)] = E W_QK E^T and OV [S, M, vocab] = W_OV E^T, from factors or directly."""
    w_qk = params["W_K"] @ params["W_Q"].transpose(1, 2) if cfg.qk_factorised else params["W_QK"]
    w_ov = params["W_O"] @ params["W_V"] if cfg.ov_factorised else params["W_OV"]
    if "E" in params:
        e = params["E"]
        return e @ w_qk @ e.transpose(1, 2), w_ov @ e.transpose(1, 2)
    return w_qk, w_ov


def forward(
    params: dict[str, torch.Tensor], cfg: AttentionConfig, tokens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits [S, B, M] and attention [S, B, T] at the query (last) position, for tokens [S, B, T]."""
    qk, ov = effective_circuits(params, cfg)
    s, b, t = tokens.shape
    query = tokens[:, :, -1]
    columns = torch.gather(qk.transpose(1, 2), 1, query[:, :, None].expand(s, b, qk.shape[1]))  # [S, B, vocab]
    scores = torch.gather(columns, 2, tokens) * cfg.score_scale
    if not cfg.attend_to_query:
        scores = scores.masked_fill(torch.arange(t, device=tokens.device) == t - 1, float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    bag = torch.zeros(s, b, qk.shape[1], device=tokens.device, dtype=attn.dtype).scatter_add_(2, tokens, attn)
    return torch.einsum("smv,sbv->sbm", ov, bag), attn
