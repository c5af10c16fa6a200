"""Eq. (1) written out literally for one model, with one-hot (or embedded) token matrices X and plain matmuls.

Slow on purpose: it is the cross-check of ``attention.forward`` and the per-seed baseline of the benchmark.
"""

from __future__ import annotations

import torch

from .attention import AttentionConfig


def literal_forward(
    params: dict[str, torch.Tensor], cfg: AttentionConfig, tokens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits [B, M] and attention [B, T] for one seed's parameters (no seed dimension) and tokens [B, T]."""
    x = torch.nn.functional.one_hot(tokens, cfg.vocab).float()
    if "E" in params:
        x = x @ params["E"]  # X = rows E[token]
    x_t = x[:, -1, :]  # the query token
    if cfg.qk_factorised:
        scores = torch.einsum("btd,de,fe,bf->bt", x, params["W_K"], params["W_Q"], x_t)
    else:
        scores = torch.einsum("btd,de,be->bt", x, params["W_QK"], x_t)
    scores = scores * cfg.score_scale
    if not cfg.attend_to_query:
        scores[:, -1] = float("-inf")
    attn = torch.softmax(scores, dim=-1)
    pooled = torch.einsum("btd,bt->bd", x, attn)  # X^T softmax(...)
    w_ov = params["W_O"] @ params["W_V"] if cfg.ov_factorised else params["W_OV"]
    return pooled @ w_ov.T, attn
