"""What Section 7's real-data pages decide from a run's per-seed measures: whether the models learned the task at all
(against the majority class), Table 1's rows, the official run set beside the authors' stored numbers (through
``metrics.official``'s guard), and the claims with their verdicts."""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from scipy.stats import binomtest

from ..data import authors
from ..metrics import mean_ci, paired_effects
from ..metrics.official import Guard, OfficialUnit, departures, full_size_command
from ..metrics.stats import Majority
from ..metrics.verdicts import (
    NOT_EVIDENCE,
    PERCENT,
    Claim,
    Interval,
    above,
    at_least,
    below,
    beside_official,
    claim_table,
    not_evidence,
    rule,
)
from ..present.table1 import DIGITS, TABLE_METRICS, interval_words
from .official_read import official_unit

LEARNED_ALPHA = 0.05  # the level of the one-sided exact binomial test of each seed against the majority share


def why_not_learned(per_seed: pd.DataFrame, majority: Majority, alpha: float = LEARNED_ALPHA) -> str | None:
    """Why one condition's models did not learn the task, in words, or None if they did.

    The rule (a model that did not learn is never evidence): a seed's model counts as learned only if

    1. it predicts more than one class over the test set (``predicted_classes`` > 1): a model that gives one class
       for every input has learned nothing about its input, whatever its accuracy; and
    2. its number of correct test predictions (``correct`` of ``examples``, integers) beats always predicting the
       majority class by a one-sided exact binomial test at level ``alpha``: under the null hypothesis each
       prediction is right with probability ``majority.count / majority.examples``, and the seed passes when
       P(X >= correct) < alpha (``scipy.stats.binomtest``, alternative 'greater').

    A condition counts as learned only if every one of its seeds does: the claims pair the two conditions seed by
    seed, and a pair with an untrained model says nothing. Counts, not accuracies: an accuracy computed in float32
    can land a hair above the majority share for a model that predicts the majority class for every input."""
    if not (per_seed["examples"] == majority.examples).all():
        raise ValueError(
            f"the per-seed results count {sorted(set(per_seed['examples']))} test examples, the "
            f"majority baseline {majority.examples}: they must be the same test set"
        )
    failed = []
    for _, r in per_seed.iterrows():
        seed, correct, n = int(r["seed"]), int(r["correct"]), int(r["examples"])
        if int(r["predicted_classes"]) <= 1:
            failed.append(f"seed {seed} predicts one class for every test example")
            continue
        p = binomtest(correct, n, majority.count / n, alternative="greater").pvalue
        if not p < alpha:
            failed.append(
                f"seed {seed}'s {correct} of {n} correct does not beat the majority class's "
                f"{majority.count} (one-sided exact binomial p = {p:.2g}, not below {alpha:g})"
            )
    return "; ".join(failed) or None


def table1(per_seed: pd.DataFrame, by: str = "condition", metrics: Sequence[str] = TABLE_METRICS) -> pd.DataFrame:
    """Table 1 rows: per condition and metric, the mean over seeds and its 95% CI half-width."""
    rows = []
    for cond, part in per_seed.groupby(by, sort=False):
        row = {by: cond}
        for metric in metrics:
            mean, half = mean_ci(part[metric].to_numpy())
            row[metric], row[f"{metric} ±"] = mean, half
        rows.append(row)
    return pd.DataFrame(rows)


def reduction(module: types.ModuleType, parameters: Mapping[str, Any] | None) -> str | None:
    """Why an official run of a chapter ``module`` with these ``parameters`` (``Chapter.params``, or a unit's
    metadata) is not the authors' experiment, in words (``official.departures``: any override of the official
    profile, every size it scales down, or parameters not recorded); None when it is theirs."""
    return ", ".join(departures(module, parameters)) or None


@dataclass(frozen=True)
class OfficialRun:
    """A run of a chapter under the ``official`` profile (the authors' setup): its per-seed results, whether
    its models are evidence (no claim of the run reads 'not evidence'), and why it is not the authors' experiment
    (``reduction``; None: it is)."""

    per_seed: pd.DataFrame
    evidence: bool
    reduced: str | None = None
    different: Mapping[str, str] = field(default_factory=dict)  # metric -> how it is another quantity than theirs
    tables: Mapping[str, pd.DataFrame] = field(default_factory=dict)  # every table of its unit (``official_unit``)

    @property
    def comparable(self) -> bool:
        """Whether its numbers may be set against the authors': its models learned and it is their experiment."""
        return self.guard.comparable

    @property
    def guard(self) -> Guard:
        """Its guard (``official.Guard``): the departures and whether its models learned."""
        return Guard(
            (self.reduced,) if self.reduced else (), "" if self.evidence else "its models did not learn the task"
        )


def official_run(
    module: types.ModuleType,
    profile: str,
    per_seed: pd.DataFrame | None = None,
    claims: pd.DataFrame | None = None,
    root: Path | None = None,
    depth: int | None = None,
    parameters: Mapping[str, Any] | None = None,
    extra: Mapping[str, pd.DataFrame] | None = None,
) -> OfficialRun | None:
    """A real-data chapter's run under ``official`` (``official_read.official_unit``, the path the summary reads it by
    too): this run's ``per_seed`` and ``claims`` with its ``parameters`` (``Chapter.params``) when it runs under
    ``official`` itself (with its ``extra`` tables), else the unit ``<root>/official/<chapter>``; None when there is
    none. ``depth``: only that depth's rows and claims (Table 5's chapter)."""
    here = None
    if per_seed is not None and claims is not None:
        here = {"per_seed": per_seed, "claims": claims, **(extra or {})}
    unit = official_unit(module, profile, here, parameters, root)
    return None if unit is None else official_from(unit, module, depth)


def official_from(unit: OfficialUnit, module: types.ModuleType, depth: int | None = None) -> OfficialRun | None:
    """An official unit of chapter ``module`` as an ``OfficialRun``: its per-seed rows, its guard, and the quantities
    the chapter cannot measure the authors' way (its ``DIFFERENT_UNDER_OFFICIAL``, if any); ``depth``: that depth's
    rows and claims only. None when it has no rows (of that depth). A chapter whose authors' run is not published
    names why in its ``STAND_IN_UNDER_OFFICIAL``: its official run is a stand-in, and no verdict is drawn from it."""
    if "per_seed" not in unit.tables or "claims" not in unit.tables:
        return None
    rows, verdicts = unit.tables["per_seed"], unit.tables["claims"]
    if depth is not None:
        rows = rows[rows["layers"] == depth] if "layers" in rows else rows
        verdicts = verdicts[verdicts["id"].str.startswith(f"{depth}_layers_")]
    if rows.empty:
        return None
    stand_in = getattr(module, "STAND_IN_UNDER_OFFICIAL", "")  # the authors' experiment is not published
    reduced = ", ".join((*unit.guard.departures, *([stand_in] if stand_in else []))) or None
    evidence = not (verdicts["verdict"] == NOT_EVIDENCE).any()
    return OfficialRun(rows, evidence, reduced, getattr(module, "DIFFERENT_UNDER_OFFICIAL", {}), unit.tables)


def official_note(module: types.ModuleType, official: OfficialRun | None) -> str:
    """What a page says below its table beside the authors' numbers when no verdict is drawn from its official run
    (why, the command that runs the authors' experiment, and where its models did not learn the cause a chapter
    measures from its official unit's tables, its ``not_learned_cause``); '' otherwise."""
    if official is None:
        return ""
    command = "" if getattr(module, "STAND_IN_UNDER_OFFICIAL", "") else full_size_command(module)
    cause_of = getattr(module, "not_learned_cause", None)
    note, cause = official.guard.note(command), cause_of(official.tables) if cause_of else ""
    return f"{note} Why its models did not learn: {cause}" if note and cause and not official.evidence else note


def compared(per_seed: pd.DataFrame | None, stored: str, official: OfficialRun | None = None) -> pd.DataFrame:
    """The paper, the authors' notebooks as stored, this run and this book under ``official``, side by side
    (``authors.three_way``), for every number the CSV holds for chapter ``stored`` (keys
    '<stored>.<metric>.<baseline|faster>'), with a verdict on whether ``official`` gives the authors' number back
    (``verdicts.beside_official``, the rule ``verdicts.REPRODUCTION_RULE``). A run's number: the mean over seeds and
    its 95% interval of its first (baseline) or second (faster-QK) condition (a percentage's within [0, 100]),
    '12.3 [10.1, 14.5] %' with non-breaking spaces inside the interval, or 'not run' (``per_seed`` or ``official``
    None: a depth or profile not run). A metric the official run measures as another quantity than the authors'
    (``OfficialRun.different``) gets no verdict. Several quantities: indexed by (quantity, condition), each
    quantity named once over its conditions' rows."""
    rows = authors.table()
    keys = list(rows.index[rows["chapter"] == stored])
    if not keys:
        raise ValueError(f"the authors' stored numbers hold no key for {stored!r}")

    def values(run: pd.DataFrame) -> dict[str, list[float]]:
        """Each key's per-seed values, for the keys whose condition and measure the run has."""
        conditions = dict(zip(("baseline", "faster"), run["condition"].unique()))
        found = {}
        for key in keys:
            _, metric, condition = key.rsplit(".", 2)
            if condition in conditions and metric in run:
                found[key] = list(run.loc[run["condition"] == conditions[condition], metric])
        return found

    def intervals(run: pd.DataFrame | None) -> dict[str, Interval] | None:
        """Each key's interval over the run's seeds (``values``)."""
        if run is None:
            return None
        return {k: Interval.of(v, PERCENT if rows.loc[k, "unit"] == "%" else None) for k, v in values(run).items()}

    def text(key: str) -> Callable[[Interval], str]:
        unit = " %" if rows.loc[key, "unit"] == "%" else ""
        digits = DIGITS.get(key.rsplit(".", 2)[1], 1)
        # breaks only before the interval
        return lambda i: (interval_words(i, digits) + unit).replace(", ", ",\u00a0").replace(" %", "\u00a0%")

    texts = {key: text(key) for key in keys}
    ours = intervals(per_seed) or {}
    table = authors.three_way({key: texts[key](ours[key]) if key in ours else "not run" for key in keys})
    table = beside_official(
        table,
        keys,
        intervals(official.per_seed) if official else None,
        texts,
        evidence=official is not None and official.comparable,
        samples=values(official.per_seed) if official else None,
        different={k: why for k in keys for m, why in official.different.items() if k.rsplit(".", 2)[1] == m}
        if official
        else None,
    )
    if "quantity" in table.columns:  # several quantities: each named once, over its conditions' rows
        table = table.set_index("quantity", append=True).swaplevel()
    return table


ACC_SLACK = 1.0  # "performance unchanged": the task metric at most this many points lower on average


def claims(
    per_seed: pd.DataFrame,
    performance: str = "accuracy",
    floor: Majority | float | None = None,
    floor_name: str = "always predicting the majority class",
    stored: str | None = None,
) -> pd.DataFrame:
    """Section 7 / Table 1, baseline against faster QK, paired by seed: the task metric (``performance``: accuracy,
    or F1 for SQuAD) comparable (its 95% interval at least ACC_SLACK points below 0 at worst); AC and ACMC up,
    sufficiency down, comprehensiveness up (the interval of the paired difference on the claimed side of 0). When a
    condition's models do not beat ``floor``, every claim is 'not evidence': a model that has not learned the task
    says nothing about where attention goes. ``floor`` is the majority class (``Majority``: a classifier, judged on
    counts by ``why_not_learned``, every seed against it) or a number (a score that is no count of correct
    predictions, such as SQuAD's F1: the 95% interval over seeds of ``performance`` must lie above it). ``stored``
    names the chapter's keys in the authors' stored numbers (``data.authors``: '<stored>.<metric>.baseline|faster').
    """
    base, _faster = per_seed["condition"].unique()[:2]
    e = paired_effects(
        per_seed, base, [performance, "AC", "ACMC", "sufficiency", "comprehensiveness"], by="condition"
    ).set_index("metric")

    def change(metric: str) -> Interval:
        r = e.loc[metric]
        return Interval(r["effect"], r["ci_low"], r["ci_high"], int(r["seeds"]))

    def text(metric: str) -> str:
        r, digits = e.loc[metric], 3 if metric in ("sufficiency", "comprehensiveness") else 1
        return f"{r['baseline']:.{digits}f} → {r['with change']:.{digits}f}, change {change(metric).text(digits, True)}"

    def theirs(metric: str) -> str:
        keys = [k for k in (f"{stored}.{metric}.baseline", f"{stored}.{metric}.faster") if k in authors.table().index]
        return authors.summary(keys) if stored and keys else ""

    perf = change(performance)
    rows = [
        Claim(
            f"{performance}_comparable",
            f"Faster query-key learning leaves {performance} unchanged (or better).",
            text(performance),
            at_least(perf, -ACC_SLACK),
            rule("at least", performance, f"-{ACC_SLACK:g} point", paired=True),
            *perf.numbers,
            authors=theirs(performance),
        )
    ]
    words = {
        "AC": "more test examples put most of their attention on the relevant tokens (AC)",
        "ACMC": "more test examples attend mostly to the relevant tokens and predict correctly (ACMC)",
        "sufficiency": "the relevant tokens alone carry more of the prediction (sufficiency falls)",
        "comprehensiveness": "removing the relevant tokens hurts the prediction more (comprehensiveness rises)",
    }
    for metric, up in (("AC", True), ("ACMC", True), ("sufficiency", False), ("comprehensiveness", True)):
        c = change(metric)
        rows.append(
            Claim(
                f"{metric}_{'rises' if up else 'falls'}",
                f"With faster query-key learning, {words[metric]}.",
                text(metric),
                above(c, 0.0) if up else below(c, 0.0),
                rule("above" if up else "below", metric, "0", paired=True),
                *c.numbers,
                authors=theirs(metric),
            )
        )
    table = claim_table(rows)
    if floor is None:
        return table
    if performance == "accuracy" and not isinstance(floor, Majority):
        raise ValueError(
            "an accuracy floor is the majority class as counts (Majority, e.g. Prepared.majority), "
            f"compared exactly with each seed's correct predictions (got {floor!r})"
        )
    for cond, part in per_seed.groupby("condition", sort=False):
        if isinstance(floor, Majority):
            why = why_not_learned(part, floor)
            if why:
                return not_evidence(
                    table,
                    f"the {cond} models do not beat {floor_name} ({floor.count} of "
                    f"{floor.examples}, {floor.share:.1f}%) on every seed: {why}",
                )
            continue
        score = Interval.of(part[performance])
        if not score.low > floor:
            return not_evidence(
                table, f"the {cond} model's {performance} ({score.text()}) does not beat {floor_name} ({floor:.1f})"
            )
    return table


def uniform_sentence(
    per_seed: pd.DataFrame, uniform: float, relevant: str = "relevant tokens", examples: str = "posts"
) -> str:
    """A sentence setting each condition's MRTA beside the uniform-attention value ``uniform``
    (``real_facts.uniform_mrta_of``): how far training moved attention from where a model that learned none would
    put it."""
    rows = table1(per_seed, metrics=("MRTA",))
    each = "; ".join(
        f"the {name.split(' (')[0]} model's is {mrta:.2f}% ({mrta / uniform:.1f} times that)"
        for name, mrta in zip(rows["condition"], rows["MRTA"])
    )
    return (
        f"A model that learned no attention (every head uniform over the positions it may see, read as this run reads "
        f"it) would put {uniform:.2f}% of its attention on the {relevant} of these {examples} and tokens; "
        f"{each}."
    )
