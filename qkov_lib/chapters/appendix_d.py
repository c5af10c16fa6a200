"""Appendix D, checked: Propositions 1-2 and Lemmas 1, 2, 4, 5 (factorised against collapsed circuits) against
autograd and gradient flow."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..validation import require_positive_numbers
from ..verdicts import CONSERVED, EXACT, claim_table


@dataclass(frozen=True, kw_only=True)
class Setup:
    """The seed of the random instance, its sizes d >= M >= 2, the time span of the flows and the gradient-descent
    step sizes (each at most the span); Appendix D states its results for any sizes and data."""

    seed: int = 0  # the random Gaussian sequences and starting factors
    d: int = 5  # the token dimension
    M: int = 3  # the output dimension (classes)
    t_end: float = 5.0  # the time span of the conservation flows (Lemmas 1 and 4)
    lrs: tuple[float, ...] = (0.1, 0.01, 0.001)  # gradient-descent step sizes over the same span

    def __post_init__(self) -> None:
        if not 2 <= self.M <= self.d:
            raise ValueError(f"need integers 2 <= M <= d (got M={self.M!r}, d={self.d!r})")
        require_positive_numbers("lrs", self.lrs)
        if not self.t_end > 0 or max(self.lrs) > self.t_end:
            raise ValueError(f"t_end must be > 0 and every lr <= t_end (got t_end={self.t_end!r}, "
                             f"lrs={list(self.lrs)!r})")


PROFILES = {"smoke": dict(lrs=(0.1, 0.01))}


def claims(props: dict[str, float], conservation: dict[str, float], precond: dict[str, float]) -> pd.DataFrame:
    """Appendix D: Propositions 1-2, Lemmas 1/4 (conservation) and 2/5 (preconditioning), as printed."""
    p, c, q = props, conservation, precond
    prop1 = max(p["eq31"], p["eq32"])
    gd = [v for k, v in c.items() if k.startswith("gd_")]
    rows = [
        ("proposition1", "Proposition 1: dL/dW_O = grad L1 W_V^T, dL/dW_V = W_O^T grad L1", f"relative error {prop1:.1e}",
         prop1 < EXACT),
        ("proposition2_eq45", "Proposition 2, eq. (45): dL/dW_QK = G as printed",
         f"relative error {p['eq45_printed']:.2f} (G^T: {p['eq45_transposed']:.1e})", p["eq45_printed"] < EXACT),
        ("lemmas1_4_conservation", "Lemmas 1 and 4: W_O^T W_O - W_V W_V^T and W_Q^T W_Q - W_K^T W_K are conserved by gradient flow",
         f"relative drift: flow {c['flow']:.1e}; GD over the same time " + ", ".join(f"{v:.1e}" for v in gd)
         + " (first order in the step)", c["flow"] < CONSERVED),
        ("lemmas2_5_preconditioning", "Lemmas 2 and 5: balanced factorised flow = Omega-preconditioned collapsed flow",
         f"relative error {max(q['lemma2_balanced'], q['lemma5_balanced']):.1e} (column-stacking vec)",
         max(q["lemma2_balanced"], q["lemma5_balanced"]) < EXACT),
    ]
    return claim_table(rows)
