"""Figure 4's stored numbers beside this book under ``official``: the attention alpha at the loss the authors'
notebook stopped at, per ratio r, from Theorem 1's solution (``fig4_mu_trajectories``), compared to the digits the
authors printed (``verdicts.as_printed``). Read by the chapter's page and by the summary alike."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...data import authors
from ...metrics.official import OfficialUnit
from ...metrics.verdicts import Interval, beside_official
from .. import fig4_mu_trajectories

STORED_LOSS = fig4_mu_trajectories.Setup().target_loss  # the loss at which the authors' notebook printed alpha


def keys() -> list[str]:
    """The authors' stored Figure 4 numbers ('fig4.alpha.<ratio>')."""
    table = authors.table()
    return list(table.index[table["chapter"] == "fig4_mu_trajectories"])


def alphas(matched: pd.DataFrame) -> dict[str, Interval]:
    """Each stored ratio's alpha at ``STORED_LOSS`` in a run's matched read-out (``main``), where the run reached
    that loss at that ratio."""
    at = matched[np.isclose(matched["stopping_loss"], STORED_LOSS)]
    found = {k: at.loc[np.isclose(at["ratio"], float(k.removeprefix("fig4.alpha."))), "alpha"] for k in keys()}
    return {k: Interval.of(v.iloc[:1]) for k, v in found.items() if len(v)}


def compared(matched: pd.DataFrame, official: OfficialUnit | None) -> pd.DataFrame:
    """The paper, the authors' notebook, this run (``matched``) and this book under ``official`` (None: not run),
    side by side, each stored alpha with whether official gives it back to the printed digits (none where the
    official run departs from the authors' settings)."""
    ours, ratios = alphas(matched), matched["ratio"].to_numpy()

    def text(key: str) -> str:
        if key in ours:
            return ours[key].text(3)
        ran = np.isclose(ratios, float(key.removeprefix("fig4.alpha."))).any()
        return f"stopped before the loss {STORED_LOSS:g}" if ran else "not run"

    table = authors.three_way({k: text(k) for k in keys()})
    theirs = None if official is None else alphas(official.tables["main"])
    evidence = official is not None and official.guard.comparable
    return beside_official(table, keys(), theirs, lambda i: i.text(3), printed=True, evidence=evidence)
