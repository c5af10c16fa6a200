"""Eq. (1) for a stack of models on token counts, with its hand-derived backward pass (checked against autograd in
the tests): the attention mass per token a[v] = softmax_v(s_v + log c[v]) (the "bag", X^T softmax(.)), the OV circuit
applied as W_O (W_V a), the cross-entropy of eq. (2), and the read-outs of a trained stack."""

from __future__ import annotations

import numpy as np
import torch

from .counts import CountSet
from .stack import StackConfig


def qk_scores(params: dict[str, torch.Tensor], query_ids: torch.Tensor) -> torch.Tensor:
    """[K, Q, V]: the score of every key token for each query token (W_QK[v, q] = (W_K W_Q^T)[v, q])."""
    if "W_QK" in params:
        return params["W_QK"][:, :, query_ids].transpose(1, 2)
    return torch.bmm(params["W_Q"][:, query_ids, :], params["W_K"].transpose(1, 2))


def attention_bag(
    params: dict[str, torch.Tensor],
    log_counts: torch.Tensor,
    slots: torch.Tensor,
    query_ids: torch.Tensor,
    score_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
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


def ov_logits(
    params: dict[str, torch.Tensor], bag: torch.Tensor, product: bool = False
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


def loss_and_grads(
    params: dict[str, torch.Tensor],
    sc: StackConfig,
    bag_or_counts: torch.Tensor,
    slots: torch.Tensor | None,
    labels: torch.Tensor,
    query_ids: torch.Tensor | None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Mean cross-entropy per model [K] (eq. 2) on a batch and its gradient for every parameter.

    ``bag_or_counts`` is the log counts [K, B, V] (with ``slots`` and ``query_ids``) or, for ``qk="fixed"``, the
    attention bag itself."""
    if sc.qk == "fixed":
        bag = bag_or_counts
    elif slots is None or query_ids is None:
        raise ValueError(f'qk="{sc.qk}" attends from the log counts: it needs their slots and query_ids (got None)')
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
def evaluate_counts(
    params: dict[str, torch.Tensor], sc: StackConfig, data: CountSet, rows: torch.Tensor, chunk: int = 2048
) -> dict[str, np.ndarray]:
    """Per model and example: NLL, probability of the true label, correctness, attention on the query position and
    attention mass on distinct tokens. Model k reads data row ``rows[k]``."""
    out: dict[str, list[torch.Tensor]] = {k: [] for k in ("nll", "prob_true", "correct", "attn_query", "attn_distinct")}
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
