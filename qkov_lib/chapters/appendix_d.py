"""Appendix D, checked: Propositions 1-2 and Lemmas 1, 2, 4, 5 (factorised against collapsed circuits) against
autograd and gradient flow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd
import torch

from ..core.validation import require_positive_numbers
from ..metrics.verdicts import CONSERVED, EXACT, Claim, check, claim_table
from ..present.text import scientific
from ..runs import theory_runs
from ..theory import factorised
from ..theory.factorised import label


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
            raise ValueError(
                f"t_end must be > 0 and every lr <= t_end (got t_end={self.t_end!r}, lrs={list(self.lrs)!r})"
            )


PROFILES = {"smoke": dict(lrs=(0.1, 0.01))}


class Checks(NamedTuple):
    """Appendix D's checks, each a relative error or imbalance by name: Propositions 1-2, Lemmas 1 and 4
    (conservation), Lemmas 2 and 5 (preconditioning)."""

    propositions: dict[str, float]
    conservation: dict[str, float]
    preconditioning: dict[str, float]

    def tidy(self) -> pd.DataFrame:
        """Every check in one long table, as the chapter stores them (``factorised.tidy_checks``)."""
        return factorised.tidy_checks(
            {
                "propositions": self.propositions,
                "conservation": self.conservation,
                "preconditioning": self.preconditioning,
            }
        )


def run(setup: Setup, *, device: torch.device | None = None, progress: bool = True) -> Checks:
    """Every check on the setup's random instance; an error where a formula the page calls right is not exact or
    the flow does not conserve. Float64 on the CPU at once: ``device`` and ``progress`` are unused here."""
    props = factorised.proposition_checks(setup.seed, setup.d, setup.M)
    cons = theory_runs.conservation(setup.seed, d=setup.d, M=setup.M, t_end=setup.t_end, lrs=setup.lrs)  # stored
    pre = factorised.preconditioning_checks(setup.seed, setup.d, setup.M)
    if not (
        props["eq31"] < EXACT
        and props["eq45_transposed"] < EXACT
        and cons["flow"] < CONSERVED
        and pre["lemma2_balanced"] < EXACT
        and pre["lemma5_balanced"] < EXACT
    ):
        raise RuntimeError(f"a check the page reads as exact fails: {props}, {cons}, {pre}")
    return Checks(props, cons, pre)


CLAIM_COLUMNS = (
    ("claim", "claim"),
    ("this run", "this run (exact checks: no seeds)"),
    ("rule", "how the verdict is read"),
)


def claims(props: dict[str, float], conservation: dict[str, float], precond: dict[str, float]) -> pd.DataFrame:
    """Appendix D: Propositions 1-2, Lemmas 1/4 (conservation) and 2/5 (preconditioning), as printed (exact checks:
    each holds or fails)."""
    p, c, q = props, conservation, precond
    prop1 = max(p["eq31"], p["eq32"])
    gd = [v for k, v in c.items() if k.startswith("gd_")]
    lemma25 = max(q["lemma2_balanced"], q["lemma5_balanced"])
    exact = (
        f"holds if the relative error against automatic differentiation is below {scientific(EXACT, 0)} "
        "(float64 rounding)"
    )
    return claim_table(
        [
            Claim(
                "proposition1",
                "Proposition 1: the gradients of the output-value factors are the collapsed gradient "
                "times the other factor.",
                f"relative error {scientific(prop1)}",
                check(prop1 < EXACT),
                exact,
                prop1,
            ),
            Claim(
                "proposition2_eq45",
                "Proposition 2, eq. (45): the query-key gradient is G as printed.",
                f"relative error {p['eq45_printed']:.2f} (of G transposed: {scientific(p['eq45_transposed'])})",
                check(p["eq45_printed"] < EXACT),
                exact,
                p["eq45_printed"],
            ),
            Claim(
                "lemmas1_4_conservation",
                "Lemmas 1 and 4: gradient flow conserves each circuit's imbalance between its two factors.",
                f"relative drift under gradient flow {scientific(c['flow'])}; gradient descent "
                "over the same time " + ", ".join(scientific(v) for v in gd) + " (first order in the step)",
                check(c["flow"] < CONSERVED),
                f"holds if the flow's relative drift stays below {scientific(CONSERVED, 0)}",
                c["flow"],
            ),
            Claim(
                "lemmas2_5_preconditioning",
                "Lemmas 2 and 5: balanced factorised gradient flow is the collapsed flow preconditioned by Ω.",
                f"relative error {scientific(lemma25)} (vec stacking columns)",
                check(lemma25 < EXACT),
                exact,
                lemma25,
            ),
        ]
    )


def check_table(checks: dict[str, float], column: str = "relative error") -> pd.DataFrame:
    """Checks as the book shows them: one row per label (LaTeX in ``$...$``: show it with ``math_table``), the value
    in scientific notation (``scientific``)."""
    return pd.DataFrame({column: {label(k): scientific(v) for k, v in checks.items()}})
