"""Errata: every formula of Section 6 and Appendices B-D found wrong or incomplete as printed, with the corrected
form and the evidence, computed by the same checks as the theory chapters, and the page's table of them."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from IPython.display import HTML

from ..present.claims import claims_html
from ..present.text import math_html
from ..theory import factorised
from ..theory.errata import errata_table
from ..theory.instance import assumption_cases


@dataclass(frozen=True, kw_only=True)
class Setup:
    """The seed of the random instances the evidence is computed on."""

    seed: int = 0  # Appendix D's random sequences and factors


PROFILES: dict[str, dict] = {}


def run(setup: Setup, *, device: torch.device | None = None, progress: bool = True) -> pd.DataFrame:
    """The errata, one row each, their evidence computed by the theory chapters' checks on the setup's seed
    (``theory.errata.errata_table``). Float64 on the CPU at once: ``device`` and ``progress`` are unused here."""
    seed = setup.seed
    return errata_table(
        factorised.proposition_checks(seed),
        factorised.preconditioning_checks(seed),
        factorised.conservation_checks(seed),
        assumption_cases(),
        seed,
    )


COLUMNS = (("formula", "as the paper prints it, and corrected"), ("evidence", "evidence (this run)"))


def present(table: pd.DataFrame) -> HTML:
    """The errata for reading, as a verdict table (each row a card on a phone): the verdict on the formula as
    printed, then where and what the paper prints above the corrected form, and the evidence, their formulas
    typeset."""
    shown = pd.DataFrame(
        {
            "verdict": table["verdict"],
            "formula": [
                f"<strong>{math_html(w)}</strong>: {math_html(p)}<br><em>Corrected:</em> {math_html(c)}"
                for w, p, c in zip(table["where"], table["as printed"], table["corrected"])
            ],
            "evidence": table["evidence"].map(math_html),
        }
    )
    return HTML(claims_html(shown, COLUMNS, raw=[key for key, _ in COLUMNS]))
