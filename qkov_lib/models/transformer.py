"""A small transformer classifier for the real-data tasks (Section 7), many seeds at once (a leading seed dimension).

Token and learned position embeddings; ``n_layers`` blocks of multi-head attention (W_Q, W_K, W_V [H, d, d_head],
W_O [H, d_head, d]; padding masked, and with ``causal`` every later position too) with an optional residual stream
and MLP (ReLU or GELU), optionally with biases (b_Q, b_K, b_V [H, d_head], b_O [d]; the MLP's b_in, b_out); a linear
read-out of the last real position, which holds the read-out token. Parameter names end in W_Q, W_K, W_V, W_O so that
``optim.circuit_groups`` puts them in the QK and OV groups; everything else is 'other'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..core.validation import require_positive_ints


@dataclass(frozen=True)
class ClassifierConfig:
    vocab: int
    n_classes: int
    max_len: int
    d_model: int = 64
    n_heads: int = 4
    d_head: int = 16
    n_layers: int = 1
    mlp: bool = True
    d_mlp: int = 256
    residual: bool = True
    init_scale: float = 0.02
    activation: str = "relu"  # the MLP's: "relu", "gelu" (exact) or "gelu_tanh" (the authors' ``gelu_new``)
    biases: bool = False  # biases on Q, K, V, O and the MLP (zero at the start)
    causal: bool = False  # each position attends to itself and those before it only (the authors' HateXplain model)

    def __post_init__(self) -> None:
        require_positive_ints(self, ("vocab", "n_classes"))
        if self.n_classes < 2:
            raise ValueError(f"n_classes must be >= 2 (got {self.n_classes})")
        if not self.init_scale > 0:
            raise ValueError(f"init_scale must be > 0 (got {self.init_scale!r})")
        check_shape(self)


ACTIVATIONS = ("relu", "gelu", "gelu_tanh")
SHAPE = ("max_len", "d_model", "n_heads", "d_head", "n_layers", "d_mlp")  # the sizes a classifier's shape takes


def check_shape(cfg: Any) -> None:
    """The checks of a classifier's shape (``ClassifierConfig``'s, and a setup's that carries the same names, as
    ``RealSetup`` does): positive integer sizes (``SHAPE``) and a known activation."""
    require_positive_ints(cfg, SHAPE)
    if cfg.activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)} (got {cfg.activation!r})")


def activate(x: torch.Tensor, activation: str) -> torch.Tensor:
    """The MLP's nonlinearity: ReLU, GELU (exact, ``torch.nn.GELU``), or GELU in its tanh form (``gelu_new`` of
    the authors' HateXplain and SVA notebooks)."""
    if activation == "relu":
        return torch.relu(x)
    return torch.nn.functional.gelu(x, approximate="tanh" if activation == "gelu_tanh" else "none")


def is_bias(name: str) -> bool:
    """Whether a parameter is a bias (starts at zero): ``unembed_bias``, ``b_Q``, ``blocks.0.b_in``, ..."""
    return name.endswith("bias") or name.rsplit(".", 1)[-1].startswith("b_")


def init_classifier(
    cfg: ClassifierConfig, seeds: Sequence[int], device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """Normal(0, init_scale) weights, zero biases, one independent draw per seed, stacked on dimension 0 (biases
    draw nothing, so a model with biases starts its weights where one without them does)."""
    shapes = {
        "embed": (cfg.vocab, cfg.d_model),
        "pos": (cfg.max_len, cfg.d_model),
        "unembed": (cfg.d_model, cfg.n_classes),
        "unembed_bias": (cfg.n_classes,),
    }
    for layer in range(cfg.n_layers):
        p = f"blocks.{layer}."
        shapes |= {
            p + "W_Q": (cfg.n_heads, cfg.d_model, cfg.d_head),
            p + "W_K": (cfg.n_heads, cfg.d_model, cfg.d_head),
            p + "W_V": (cfg.n_heads, cfg.d_model, cfg.d_head),
            p + "W_O": (cfg.n_heads, cfg.d_head, cfg.d_model),
        }
        if cfg.biases:
            shapes |= {
                p + "b_Q": (cfg.n_heads, cfg.d_head),
                p + "b_K": (cfg.n_heads, cfg.d_head),
                p + "b_V": (cfg.n_heads, cfg.d_head),
                p + "b_O": (cfg.d_model,),
            }
        if cfg.mlp:
            shapes |= {p + "mlp_in": (cfg.d_model, cfg.d_mlp), p + "mlp_out": (cfg.d_mlp, cfg.d_model)}
            if cfg.biases:
                shapes |= {p + "b_in": (cfg.d_mlp,), p + "b_out": (cfg.d_model,)}
    per_seed = []
    for seed in seeds:
        gen = torch.Generator().manual_seed(int(seed))
        per_seed.append(
            {
                k: (torch.zeros(s) if is_bias(k) else cfg.init_scale * torch.randn(s, generator=gen))
                for k, s in shapes.items()
            }
        )
    return {k: torch.stack([p[k] for p in per_seed]).to(device).requires_grad_() for k in shapes}


def trim(ids: torch.Tensor, *aligned: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Drop the trailing positions that are padding in every row, from ``ids`` and tensors aligned with it."""
    width = max(int((ids != 0).sum(-1).max()), 1)
    return (ids[..., :width], *(a[..., :width] for a in aligned))


def _at(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Row ``pos`` [S, B] of x [S, B, T, d], kept as a length-1 position axis: [S, B, 1, d]."""
    return torch.gather(x, 2, pos[..., None, None].expand(-1, -1, 1, x.shape[-1]))


def scaled_attention(scores: torch.Tensor, blocked: torch.Tensor, d_head: int) -> torch.Tensor:
    """Attention weights [S, B, H, Q, T] from raw query-key products (a fresh tensor: scaled by 1/sqrt(d_head) and
    masked in place), the keys ``blocked`` (broadcast to the scores) left out."""
    return torch.softmax(scores.div_(d_head**0.5).masked_fill_(blocked, float("-inf")), dim=-1)


def readout_heads(
    x: torch.Tensor,
    queries: torch.Tensor,
    blocked: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
    biases: tuple[torch.Tensor, ...] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The last layer's attention [S, B, H, 1, T] from the read-out row ``queries`` [S, B, 1, d] over x [S, B, T, d]
    (keys ``blocked`` [S, B, 1, 1, T] left out), and each head's output [S, B, H, 1, d_head]. Keys and values are
    not formed per position: q.(W_K^T x_t) = (W_K q).x_t and sum_t a_t W_V^T x_t = W_V^T (sum_t a_t x_t). With
    ``biases`` (b_Q, b_K, b_V [S, H, d_head]): q gains b_Q, every score q.b_K (the same for every key, so it changes
    no attention weight), every head's output b_V (the weights sum to 1)."""
    q = torch.einsum("sbqd,shde->sbhqe", queries, w_q)
    if biases is not None:
        q = q + biases[0][:, None, :, None, :]
    key = torch.einsum("sbhqe,shde->sbhqd", q, w_k)
    scores = torch.einsum("sbhqd,sbtd->sbhqt", key, x)
    if biases is not None:
        scores = scores + (q * biases[1][:, None, :, None, :]).sum(-1, keepdim=True)
    attn = scaled_attention(scores, blocked, w_q.shape[-1])
    heads = torch.einsum("sbhqd,shde->sbhqe", torch.einsum("sbhqt,sbtd->sbhqd", attn, x), w_v)
    return attn, heads if biases is None else heads + biases[2][:, None, :, None, :]


def classify(
    params: dict[str, torch.Tensor], cfg: ClassifierConfig, ids: torch.Tensor
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Logits [S, B, C] at the read-out position and each layer's attention (rows: queries): [S, B, H, T, T] below
    the last layer; at the last layer only the read-out row, [S, B, H, 1, T], since no other row reaches the logits
    (the last layer's other queries and MLP rows are not computed), nor its keys and values at every position
    (``readout_heads``; ``benchmarks/bench_classifier.py`` times a training step against that).

    ``ids`` [S, B, T] or [B, T] (shared by every seed); 0 is padding, the read-out token is the last non-padding
    position of each row. Trim all-padding columns first (``trim``): they cost time and change nothing. With
    ``cfg.causal`` a layer below the last also hides from each query the positions after it; the read-out row sees
    every real position either way (padding trails), so one layer computes the same with or without it.
    """
    S = params["embed"].shape[0]
    if ids.dim() == 2:
        ids = ids.expand(S, *ids.shape)
    T = ids.shape[-1]
    pad = ids == 0  # [S, B, T]
    last = (~pad).sum(-1) - 1  # [S, B]
    blocked = pad[:, :, None, None, :]  # padding keys, for every head and query
    below = blocked | torch.ones(T, T, dtype=torch.bool, device=ids.device).triu(1) if cfg.causal else blocked
    x = params["embed"][torch.arange(S, device=ids.device)[:, None, None], ids] + params["pos"][:, None, :T]
    attns = []
    for layer in range(cfg.n_layers):
        p = f"blocks.{layer}."
        w_q, w_k, w_v, w_o = (params[p + name] for name in ("W_Q", "W_K", "W_V", "W_O"))
        b = tuple(params[p + name] for name in ("b_Q", "b_K", "b_V")) if cfg.biases else None
        if layer < cfg.n_layers - 1:
            queries = x
            q, k, v = (torch.einsum("sbtd,shde->sbhte", x, w) for w in (w_q, w_k, w_v))
            if b is not None:
                q, k, v = (t + bias[:, None, :, None, :] for t, bias in zip((q, k, v), b))
            attn = scaled_attention(q @ k.transpose(-1, -2), below, cfg.d_head)
            heads = attn @ v
        else:
            queries = _at(x, last)
            attn, heads = readout_heads(x, queries, blocked, w_q, w_k, w_v, b)
        attns.append(attn)
        out = torch.einsum("sbhqe,shed->sbqd", heads, w_o)
        if cfg.biases:
            out = out + params[p + "b_O"][:, None, None, :]
        x = queries + out if cfg.residual else out
        if cfg.mlp:
            pre = torch.einsum("sbtd,sdm->sbtm", x, params[p + "mlp_in"])
            h = activate(pre + params[p + "b_in"][:, None, None, :] if cfg.biases else pre, cfg.activation)
            x = x + torch.einsum("sbtm,smd->sbtd", h, params[p + "mlp_out"])
            if cfg.biases:
                x = x + params[p + "b_out"][:, None, None, :]
    return torch.einsum("sbd,sdc->sbc", x.squeeze(2), params["unembed"]) + params["unembed_bias"][:, None], attns
