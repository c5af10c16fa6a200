"""The collapsed single-layer model of Section 6 on explicit token vectors: z = W_OV X^T softmax(X W_QK x_T)."""

from __future__ import annotations

import torch


def attention(X: torch.Tensor, x_query: torch.Tensor, w_qk: torch.Tensor, self_attend: bool) -> torch.Tensor:
    """softmax(X W_QK x_T) per sequence [S, T]; the query (last) position masked unless it may attend to itself."""
    s = torch.einsum("std,de,se->st", X, w_qk, x_query)
    if not self_attend:
        s = torch.cat([s[:, :-1], torch.full_like(s[:, -1:], float("-inf"))], dim=1)
    return torch.softmax(s, dim=-1)


def weighted_loss(
    X: torch.Tensor,
    x_query: torch.Tensor,
    labels: torch.Tensor,
    probs: torch.Tensor,
    w_ov: torch.Tensor,
    w_qk: torch.Tensor,
    self_attend: bool = False,
) -> torch.Tensor:
    """sum_s probs_s * CE(W_OV X_s^T softmax(X_s W_QK x_T), y_s): eq. (1) in the collapsed form of Section 6."""
    pooled = torch.einsum("std,st->sd", X, attention(X, x_query, w_qk, self_attend))
    return (probs * torch.nn.functional.cross_entropy(pooled @ w_ov.T, labels, reduction="none")).sum()
