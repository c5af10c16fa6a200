"""Figure 2's claims (``fig2_dtap.claims``) across the atlas: checked in every setting of the grid and multiplier
set, and in every ablation run; where they hold, and which factor flips which. The page's side of the atlas: no
stored run's key holds this module (its runs train in ``grid`` and ``ablation``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ...metrics.verdicts import FAILS, HOLDS, UNDECIDED
from .. import fig2_dtap
from .ablation import runs
from .grid import RUN, SETTING, rows_of
from .setup import FACTOR_KEYS


def claims_per_setting(rows: pd.DataFrame) -> pd.DataFrame:
    """Figure 2's claims checked in every setting and multiplier set, on the per-seed rows (as the chapter does);
    rows of ablation runs are left out."""
    rows = rows_of(rows)
    out = []
    base = rows[rows["mult_set"] < 0]
    for key, faster in rows[rows["mult_set"] >= 0].groupby([*SETTING, "mult_set"], sort=False):
        setting_values, j = dict(zip(SETTING, key[:-1])), key[-1]
        panels_here = pd.concat([base[(base[SETTING] == pd.Series(setting_values)).all(axis=1)], faster])
        out += claim_rows(panels_here, {**setting_values, "mult_set": j})
    return pd.DataFrame(out)


def claim_rows(panels_here: pd.DataFrame, key: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Figure 2's claims on one run's per-seed rows, one row per claim led by ``key``, with its capped models."""
    table = fig2_dtap.claims(panels_here)
    capped = int(panels_here["hit_cap"].sum())
    return [
        {
            **key,
            "claim_id": row["id"],
            "claim": row["claim"],
            "this run": row["this run"],
            "verdict": row["verdict"],
            "capped models": capped,
            "models": len(panels_here),
        }
        for _, row in table.iterrows()
    ]


def where_claims_hold(table: pd.DataFrame) -> pd.DataFrame:
    """Per claim: in how many settings (and multiplier sets) it holds, fails and is undecided, of how many."""
    out = table.groupby(["claim_id", "claim"], sort=False)["verdict"].value_counts().unstack(fill_value=0)
    out = out.reindex(columns=[HOLDS, FAILS, UNDECIDED], fill_value=0).astype(int)
    out["settings"] = out.sum(axis=1)
    out["holds %"] = (100 * out[HOLDS] / out["settings"]).round(1)
    return out.reset_index()


def share_by_claim(table: pd.DataFrame) -> dict[str, str]:
    """'holds in k of n settings (fails in f, undecided in u)' per claim id, for the scorecard and the summary."""
    share = where_claims_hold(table)
    return {
        r.claim_id: f"holds in {r[HOLDS]} of {r.settings} settings (fails in {r[FAILS]}, undecided in {r[UNDECIDED]})"
        for _, r in share.iterrows()
    }


def claims_per_run(rows: pd.DataFrame, factors: Sequence[str] = FACTOR_KEYS) -> pd.DataFrame:
    """Figure 2's claims checked in every ablation run (``runs(factors)``, in that order): run, start, factor,
    claim_id, claim, this run, verdict, capped models."""
    out = []
    for r in runs(factors):
        here = rows[rows[RUN] == r.key]
        if here.empty:
            raise ValueError(f"the ablation's rows have no run {r.key!r}; rerun the chapter to train it")
        out += claim_rows(here, {RUN: r.key, "start": r.start, "factor": r.factor})
    return pd.DataFrame(out)


def effect(before: str, after: str) -> str:
    """What switching a factor did to a verdict: 'flips' (holds <-> fails), 'no change', or 'unclear' (one side
    undecided)."""
    if before == after:
        return "no change"
    return "flips" if {before, after} == {HOLDS, FAILS} else "unclear"


def flips(table: pd.DataFrame) -> pd.DataFrame:
    """The factor x claim table: per factor and claim, the verdict without and with the factor from the paper's
    settings (switched on) and with and without it from the authors' settings (switched off), and what each switch
    did (``effect``). ``table`` is ``claims_per_run``' output."""
    verdict = table.set_index([RUN, "claim_id"])["verdict"]
    claims = list(dict.fromkeys(table["claim_id"]))
    out = []
    for key in dict.fromkeys(table["factor"].dropna()):
        for cid in claims:
            p0, p1 = verdict[("paper", cid)], verdict[(f"paper+{key}", cid)]
            a1, a0 = verdict[("authors", cid)], verdict[(f"authors-{key}", cid)]
            out.append(
                {
                    "factor": key,
                    "claim_id": cid,
                    "paper": p0,
                    "paper + factor": p1,
                    "from the paper's": effect(p0, p1),
                    "authors": a1,
                    "authors - factor": a0,
                    "from the authors'": effect(a1, a0),
                }
            )
    return pd.DataFrame(out)


def decided(table: pd.DataFrame) -> dict[str, int]:
    """How many of a verdict table's verdicts are decided (holds or fails), undecided, and in all."""
    words = table["verdict"]
    return {
        "decided": int(words.isin([HOLDS, FAILS]).sum()),
        "undecided": int((words == UNDECIDED).sum()),
        "verdicts": len(words),
    }
