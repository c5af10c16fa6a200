"""The attention mass a model that learned no attention would show (Section 7's MRTA): every head's attention uniform
over the positions it may see, rolled out over the layers (``rationale.rollout``) and read where the measure reads
it. A measured mass is read beside it: how far training moved attention from uniform, for these tokens and mask.

Where attention is read (``real_setup.MEASURES``): ``authors``, at the last of the ``max_len`` padded positions with
nothing masked (the authors' HateXplain notebooks), so a uniform row spreads over every padded position and the mass
is the relevant share of them; ``companion``, at the read-out token, padding masked, so it spreads over the post's
own tokens. With a causal mask each position sees itself and those before it only: a single layer read at the last
position sees every position either way, but below the top layer the early positions gather more of the rollout."""

from __future__ import annotations

import torch

from .rationale import relevant_mass, rollout

CHUNK = 256  # examples whose attention maps are formed at once


def visible(ids: torch.Tensor, measure: str, causal: bool) -> torch.Tensor:
    """Which positions each position may attend to, [N, T, T]: every padded position (``authors``) or the post's own
    tokens (``companion``: ids other than 0), and with ``causal`` only itself and those before it."""
    n, t = ids.shape
    seen = torch.ones(n, t, t, dtype=torch.bool) if measure == "authors" else (ids != 0)[:, None, :].expand(n, t, t)
    return seen & torch.ones(t, t, dtype=torch.bool).tril() if causal else seen


def read_position(ids: torch.Tensor, measure: str) -> torch.Tensor:
    """Where each example's attention is read, [N]: the last padded position (``authors``) or the read-out token,
    the last non-padding one (``companion``)."""
    if measure == "authors":
        return torch.full((ids.shape[0],), ids.shape[1] - 1)
    return (ids != 0).sum(-1) - 1


def uniform_mass(
    ids: torch.Tensor,
    relevant: torch.Tensor,
    layers: int,
    *,
    measure: str,
    causal: bool,
    identity_weight: float = 0.0,
) -> torch.Tensor:
    """Each example's attention mass on its relevant tokens, [N], under uniform attention in every one of
    ``layers`` layers (rolled out with ``identity_weight``), read as ``measure`` reads it; ``relevant`` 0/1 masks or
    weights [N, T] (``relevant_mass``)."""
    if layers < 1:
        raise ValueError(f"layers must be >= 1 (got {layers})")
    parts = []
    for start in range(0, ids.shape[0], CHUNK):  # [chunk, T, T] at a time: a test set's maps would take gigabytes
        part = ids[start : start + CHUNK]
        seen = visible(part, measure, causal).to(torch.float64)
        rows = seen / seen.sum(-1, keepdim=True).clamp(min=1)
        rolled = rollout([rows[:, None]] * layers, identity_weight)  # one head: [chunk, T, T]
        read = rolled[torch.arange(part.shape[0]), read_position(part, measure)]
        parts.append(relevant_mass(read, relevant[start : start + CHUNK].to(torch.float64)))
    return torch.cat(parts)


def uniform_mrta(
    ids: torch.Tensor,
    relevant: torch.Tensor,
    measured: torch.Tensor,
    layers: int,
    *,
    measure: str,
    causal: bool,
    identity_weight: float = 0.0,
) -> float:
    """MRTA (%) under uniform attention: ``uniform_mass`` averaged over the ``measured`` examples ([N] bool, as
    ``real_data.evaluate_condition`` measures them)."""
    mass = uniform_mass(ids, relevant, layers, measure=measure, causal=causal, identity_weight=identity_weight)
    return float(100 * mass[measured].mean())
