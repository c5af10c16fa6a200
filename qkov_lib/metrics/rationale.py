"""Attention-based interpretability metrics on real data (Section 7, Appendix D.6): attention rollout, the mass on
relevant tokens (MRTA, AC, ACMC), and ERASER's sufficiency and comprehensiveness (DeYoung et al., 2020)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

ERASE_MODES = ("remove", "mask")


def rollout(attns: Sequence[torch.Tensor], identity_weight: float = 0.0) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema, 2020): head-averaged attention per layer, mixed with the identity as
    w I + (1 - w) A (rows renormalised), multiplied from the first layer up; [..., T, T]. With one layer and w = 0
    it is the attention itself."""
    if not 0 <= identity_weight < 1:
        raise ValueError(f"identity_weight must lie in [0, 1) (got {identity_weight!r})")
    out = None
    for attn in attns:
        a = attn.mean(-3)  # mean over heads
        a = identity_weight * torch.eye(a.shape[-1], dtype=a.dtype, device=a.device) + (1 - identity_weight) * a
        a = a / a.sum(-1, keepdim=True)
        out = a if out is None else a @ out
    if out is None:
        raise ValueError("rollout needs the attention of at least one layer (got none)")
    return out


def readout_attention(attns: Sequence[torch.Tensor], ids: torch.Tensor, identity_weight: float = 0.0) -> torch.Tensor:
    """The rollout row of each example's read-out position (its last non-padding token): [S, B, T]. ``attns`` as
    the classifier returns them: full maps [S, B, H, T, T] below the last layer, the read-out row [S, B, H, 1, T] at
    the last, mixed with the identity's read-out row."""
    if not 0 <= identity_weight < 1:
        raise ValueError(f"identity_weight must lie in [0, 1) (got {identity_weight!r})")
    top = attns[-1].mean(-3)  # [S, B, 1, T]
    last = ((ids != 0).sum(-1) - 1).expand(top.shape[:2])
    own = torch.nn.functional.one_hot(last, top.shape[-1]).to(top.dtype)[:, :, None]
    top = identity_weight * own + (1 - identity_weight) * top
    top = top / top.sum(-1, keepdim=True)
    if len(attns) > 1:
        top = top @ rollout(attns[:-1], identity_weight)
    return top.squeeze(-2)


def word_mask(ids: torch.Tensor) -> torch.Tensor:
    """Boolean mask of the real words: neither padding nor the read-out token (the last non-padding position)."""
    words = ids != 0
    return words.scatter(-1, words.sum(-1, keepdim=True) - 1, False)


def top_tokens(
    scores: torch.Tensor, ids: torch.Tensor, k_percent: float, words: torch.Tensor | None = None
) -> torch.Tensor:
    """Boolean [S, B, T]: the ceil(k% of the words) highest-scoring words of each example; ``words`` the positions
    that count (default: every real word, neither the read-out token nor padding)."""
    words = word_mask(ids) if words is None else words
    n = words.sum(-1, keepdim=True)
    k = torch.clamp(torch.ceil(n * k_percent / 100.0), min=1).long()
    masked = scores.masked_fill(~words, float("-inf"))
    rank = masked.argsort(-1, descending=True).argsort(-1)
    return (rank < k) & words


def erase(ids: torch.Tensor, drop: torch.Tensor, mode: str = "remove", mask_id: int = 1) -> torch.Tensor:
    """Ids with the ``drop`` positions removed (the rest shifted left, order kept, padded at the end) or replaced
    by ``mask_id`` (mode ``mask``); the read-out token is never dropped."""
    if mode not in ERASE_MODES:
        raise ValueError(f"erase mode must be one of {', '.join(ERASE_MODES)} (got {mode!r})")
    if mode == "mask":
        return ids.masked_fill(drop, mask_id)
    keep = (ids != 0) & ~drop
    order = torch.argsort((~keep).to(torch.int8), dim=-1, stable=True)  # kept positions first, in order
    out = torch.gather(ids, -1, order)
    return out.masked_fill(~torch.gather(keep, -1, order), 0)


def faithfulness(
    predict: Callable[[torch.Tensor], torch.Tensor],
    ids: torch.Tensor,
    scores: torch.Tensor,
    k_percents: Sequence[float],
    mode: str = "remove",
    full: torch.Tensor | None = None,
    words: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ERASER sufficiency and comprehensiveness per example [S, B], averaged over ``k_percents`` (AOPC):
    p(y^|x) - p(y^|top-k% kept) and p(y^|x) - p(y^|top-k% removed), y^ the prediction on the full input.
    ``predict`` maps ids [S, B, T] to class probabilities [S, B, C]; ``full`` passes predict(ids) when known;
    ``words`` [S, B, T] the positions that may be erased (default: every real word; SQuAD: the context only)."""
    full = predict(ids) if full is None else full
    words = word_mask(ids).expand_as(scores) if words is None else words
    y_hat = full.argmax(-1, keepdim=True)
    p_full = full.gather(-1, y_hat).squeeze(-1)
    suff, comp = torch.zeros_like(p_full), torch.zeros_like(p_full)
    for k in k_percents:
        if not 0 < k <= 100:
            raise ValueError(f"each k percent must lie in (0, 100] (got {k!r})")
        top = top_tokens(scores, ids, k, words)
        kept = predict(erase(ids, words & ~top, mode)).gather(-1, y_hat).squeeze(-1)
        dropped = predict(erase(ids, top, mode)).gather(-1, y_hat).squeeze(-1)
        suff += p_full - kept
        comp += p_full - dropped
    return suff / len(k_percents), comp / len(k_percents)


def padded_as_readout(ids: torch.Tensor, length: int, readout_id: int) -> torch.Tensor:
    """The authors' HateXplain input on this model: ``ids`` padded to ``length``, every padding position holding the
    read-out token. Their model has no padding mask and reads its prediction at the first padding token, so their
    padding is their read-out token (OFFICIAL_CODE.md; HateXplain_Same_LR_Final_Config.ipynb cell 22); the last row
    of this input is the row they read attention at (``R[-1]``, position 127)."""
    out = torch.nn.functional.pad(ids, (0, length - ids.shape[-1]))
    return out.masked_fill(out == 0, readout_id)


def authors_read(seq: torch.Tensor, readout_id: int) -> torch.Tensor:
    """What the authors' model reads of a reordered or shortened input: the tokens up to its first read-out (their
    first padding token), the rest set to padding; with none, the first token alone (``argmax`` of no padding is 0)."""
    first = (seq == readout_id).int().argmax(-1, keepdim=True)
    return seq.masked_fill(torch.arange(seq.shape[-1], device=seq.device) > first, 0)


def authors_k(k_percent: float, length: int) -> int:
    """The authors' number of erased positions: ceil(k% of the padded ``length``), at least 1 (their cell 55)."""
    if not 0 < k_percent <= 100:
        raise ValueError(f"each k percent must lie in (0, 100] (got {k_percent!r})")
    return max(1, int(np.ceil(0.01 * k_percent * length)))


def authors_faithfulness(
    predict: Callable[[torch.Tensor], torch.Tensor],
    padded: torch.Tensor,
    scores: torch.Tensor,
    k_percents: Sequence[float],
    readout_id: int,
    full: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sufficiency and comprehensiveness per example [S, B] as the authors' notebooks compute them
    (``compute_comprehensiveness_sufficiency_classification``, HateXplain_Same_LR_Final_Config.ipynb cell 55):
    k = ceil(k% of the padded length) positions, padding included, ranked by ``scores`` (the rollout row of the
    last position, [S, B, T]) with numpy's ``argpartition``; comprehensiveness removes them, sufficiency keeps them
    alone, in ``argpartition``'s order, as theirs does. ``padded`` from ``padded_as_readout``; ``full`` the class
    probabilities of the unerased input [S, B, C]. Averaged over ``k_percents`` (theirs: 5 alone)."""
    T = padded.shape[-1]
    y_hat = full.argmax(-1, keepdim=True)
    p_full = full.gather(-1, y_hat).squeeze(-1)
    padded = padded.expand(*scores.shape)
    order = -scores.double().cpu().numpy()
    suff, comp = torch.zeros_like(p_full), torch.zeros_like(p_full)
    for pct in k_percents:
        k = authors_k(pct, T)
        top = torch.from_numpy(np.argpartition(order, min(k, T - 1), axis=-1)[..., :k]).to(padded.device)
        dropped = torch.zeros_like(padded, dtype=torch.bool).scatter_(-1, top, True)
        rest = torch.argsort(dropped.to(torch.int8), dim=-1, stable=True)[..., : T - k]  # the others, in order
        kept_alone = authors_read(torch.gather(padded, -1, top), readout_id)
        removed = authors_read(torch.gather(padded, -1, rest), readout_id)
        suff += p_full - predict(kept_alone).gather(-1, y_hat).squeeze(-1)
        comp += p_full - predict(removed).gather(-1, y_hat).squeeze(-1)
    return suff / len(k_percents), comp / len(k_percents)


def relevant_mass(attention: torch.Tensor, relevant: torch.Tensor) -> torch.Tensor:
    """The attention on the relevant tokens, [..., T] -> [...]: the sum of the attention weighted by ``relevant``,
    0/1 masks (boolean) or weights in [0, 1]. With weights that are the mean of several annotators' 0/1 masks it
    is the mean of the masses on each mask, as the authors' HateXplain notebooks compute it
    (``attention_mass_classification``, HateXplain_Same_LR_Final_Config.ipynb and
    HateXplain_Faster_QK_LR_Final_Config.ipynb cell 55, In [44]: the rollout row times the three masks, summed
    over tokens, averaged over the masks); their DTAP map (``plot_heatmaps``, cell 52, In [43]) bins the same mean
    over the three masks (of one head's attention), so AC and ACMC read the mass as it is (``mass_metrics``). Their
    sufficiency and comprehensiveness
    (``compute_comprehensiveness_sufficiency_classification``, cell 55) rank tokens by the rollout alone, the
    rationale entering only an unused overlap count, so weights do not enter ``faithfulness`` either."""
    return (attention * relevant).sum(-1)


def mass_metrics(
    mass: torch.Tensor, prob_true: torch.Tensor, threshold: float = 0.5, confidence: float = 0.5
) -> dict[str, torch.Tensor]:
    """Per seed over examples [S, N]: MRTA (mean mass on relevant tokens, %), AC (% with mass > threshold) and
    ACMC (% with mass > threshold and true-class probability > confidence), as in Appendix D.6."""
    high = mass > threshold
    return {
        "MRTA": 100 * mass.mean(-1),
        "AC": 100 * high.float().mean(-1),
        "ACMC": 100 * (high & (prob_true > confidence)).float().mean(-1),
    }
