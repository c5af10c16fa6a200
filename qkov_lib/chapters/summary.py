"""The reproducibility summary, the book's first page: the paper's headline claims, what the authors' notebooks stored
for them, what this build measured, each verdict with the reason, what this companion adds, and how the build ran.
Everything on it is read from the build's results."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch

from ..core.chapter import name_of
from ..core.contents import chapter_names, title
from ..core.results import UNAVAILABLE, ResultsError, load, read_meta, results_root
from ..data import authors
from ..metrics.official import INFORMATIVE_COLUMN, OFFICIAL, Guard, OfficialUnit, official_unit, tally
from ..metrics.verdicts import (
    DIFFERS,
    NOT_EVIDENCE,
    OFFICIAL_COLUMN,
    PAPER,
    REPRODUCES,
    UNDECIDED,
    VERDICT_COLUMN,
    Interval,
    beside_official,
    counts,
    every,
    note,
    profile_tables,
    reason,
    verdict_table,
)
from ..runs.real_data import compared as real_compared
from ..runs.real_data import official_from
from . import fig2_dtap, fig3_incentive, fig4_mu_trajectories, hatexplain, hatexplain_layers, scorecard, squad, sva
from .scorecard import CLAIMS_SECTION

BESIDE = ("official",)  # the authors' setup: every chapter's results under it are set beside this run's


@dataclass(frozen=True, kw_only=True)
class Setup:
    """The summary takes no parameters: it reads the results of the profile it is run under."""

    profile: str = field(init=False, default="default")  # the profile it runs under (``chapter.resolve`` sets it)


PROFILES: dict[str, dict] = {}


@dataclass(frozen=True)
class Headline:
    """One of the paper's central claims: the chapter that checks it, the claim ids whose verdicts it combines (all
    must hold), the claim in one plain sentence, and, where it combines several, a short label per id that names
    each part's numbers."""

    page: str
    ids: tuple[str, ...]
    statement: str
    labels: tuple[str, ...] = ()


HEADLINES = (
    Headline(
        "fig2_dtap",
        ("collapsed_ov_top_right",),
        "On the synthetic task, models with a collapsed output-value "
        "circuit attend to the informative tokens and predict correctly (Figure 2 b, d).",
    ),
    Headline(
        "fig2_dtap",
        ("fafo_top_left",),
        "A model with both circuits factorised (FAFO) predicts correctly while "
        "attending weakly to the informative tokens (Figure 2 a).",
    ),
    Headline(
        "fig2_dtap",
        ("faster_qk_top_right",),
        "Training the query-key circuit faster moves attention onto the "
        "informative tokens, for every parameterisation (Figure 2 e-h).",
    ),
    Headline("fig2_dtap", ("prediction_kept",), "... and it does so without hurting prediction (Figure 2 e-h)."),
    Headline(
        "fig3_incentive",
        ("factorised_incentive_fades",),
        "With attention held fixed, a factorised "
        "output-value circuit stops rewarding sharper attention once about 40% of it is on the informative "
        "tokens (Figure 3).",
    ),
    Headline(
        "fig4_mu_trajectories",
        ("alpha_near_one", "alpha_near_uniform"),
        "In Theorem 1's dynamics, at the same "
        "loss, a query-key rate 100 times the output-value rate leaves attention near 1, and 100 times smaller "
        "near uniform (Figure 4).",
    ),
    Headline(
        "theorem1", ("exact_instances",), "Theorem 1: in the orthogonal setting, training reduces to two scalar ODEs."
    ),
    Headline(
        "hatexplain",
        ("ACMC_rises", "accuracy_comparable"),
        "HateXplain: faster query-key learning puts "
        "attention on the annotators' rationales without hurting accuracy (Table 1).",
        ("ACMC", "accuracy"),
    ),
    Headline(
        "sva",
        ("ACMC_rises", "accuracy_comparable"),
        "Subject-verb agreement: faster query-key learning puts "
        "attention on the subject without hurting accuracy (Table 1).",
        ("ACMC", "accuracy"),
    ),
    Headline(
        "squad",
        ("ACMC_rises", "F1_comparable"),
        "SQuAD: faster query-key learning puts attention on the answer without hurting F1 (Table 1).",
        ("ACMC", "F1"),
    ),
    Headline(
        "hatexplain_layers",
        ("2_layers_ACMC_rises", "4_layers_ACMC_rises"),
        "With two and four layers, faster query-key learning still puts attention on the rationales (Table 5).",
        ("2 layers", "4 layers"),
    ),
    Headline(
        "factorised_dynamics",
        ("falsifier_collapsed (Theorem 1)", "falsifier_factorised (rescaled ODE)"),
        "The reviewers' falsifier: trained to the same loss, a fast query-key circuit ends with sharp attention "
        "and a slow one with uniform attention, for collapsed and factorised circuits.",
        ("collapsed", "factorised"),
    ),
)


def results_table(claims: pd.DataFrame) -> pd.DataFrame:
    """One row per headline: the claim, the verdict (all its parts must hold; a part that is not evidence makes it
    so), the authors' stored numbers, this build's numbers, and the reason with a link to the chapter's section
    that decides it. ``claims`` is the scorecard's table (``scorecard.gather``)."""
    rows = []
    for h in HEADLINES:
        parts = claims[(claims["page"] == h.page) & claims["id"].isin(h.ids)]
        if parts.empty:  # the chapter did not run, or its profile checks none of these claims
            rows.append(
                {
                    "claim": h.statement,
                    "verdict": UNDECIDED,
                    "authors": "",
                    "this run": "",
                    "reason": "not in this build's results",
                    "page": h.page,
                }
            )
            continue
        verdicts = list(parts["verdict"])
        verdict = NOT_EVIDENCE if NOT_EVIDENCE in verdicts else every(verdicts)
        decisive = parts[parts["verdict"] == verdict].iloc[0] if verdict in verdicts else parts.iloc[0]
        rows.append(
            {
                "claim": h.statement,
                "verdict": verdict,
                "authors": _joined(parts, "authors", h) or "not recorded",
                "this run": _joined(parts, "this run", h),
                "reason": reason(decisive["verdict"], decisive["rule"]),
                "page": h.page,
            }
        )
    return pd.DataFrame(rows)


def _joined(parts: pd.DataFrame, column: str, h: Headline) -> str:
    """A column's texts of a headline's parts on one line: each after its label ('ACMC: ...'), where the headline
    labels its parts, else joined by semicolons."""
    labels = dict(zip(h.ids, h.labels))
    texts = [(labels.get(i, ""), t) for i, t in zip(parts["id"], parts[column].fillna("")) if t]
    if labels:
        return ". ".join(f"{label}: {t}" for label, t in texts)
    return "; ".join(t for _, t in texts)


def results_html(table: pd.DataFrame) -> str:
    """The results table for reading, three columns: the verdict (a coloured word); the claim, with why and a link
    to the chapter section that decides it; this build's numbers over the authors' stored ones. Cells stack into
    cards on a narrow screen."""

    def cells(r: pd.Series) -> tuple[str, str]:
        link = f'<a href="{r["page"]}.html#{CLAIMS_SECTION}">{html.escape(title(r["page"]))}</a>'
        return (
            html.escape(r["claim"]) + note(f"why: {html.escape(r['reason'])}; see {link}"),
            (html.escape(r["this run"]) or "none") + note(f"the authors' notebooks: {html.escape(r['authors'])}"),
        )

    return verdict_table(
        ((r["verdict"], cells(r)) for _, r in table.iterrows()),
        ("verdict", "the paper's claim", "this build (95% interval over seeds)"),
        "qkov-summary",
    )


def methodology(folder: Path, pages: list[str]) -> pd.DataFrame:
    """How each chapter of this build ran, from its unit's metadata: device, commit, date and wall time; one row per
    chapter, indexed by its title."""
    rows = []
    for page in pages:
        try:
            meta = read_meta(folder, page)
        except ResultsError:
            continue
        wall = meta.get("runner_wall_time_s") or meta.get("wall_time_s")
        rows.append(
            {
                "chapter": title(page),
                "device": f"{meta.get('device', '?')} ({meta.get('device_name', '?')})",
                "commit": str(meta.get("git_commit") or "?")[:12],
                "date": meta.get("date", "?"),
                "minutes": round(wall / 60, 1) if isinstance(wall, (int, float)) else None,
            }
        )
    return pd.DataFrame(rows, columns=["chapter", "device", "commit", "date", "minutes"]).set_index("chapter")


def errata_count(folder: Path) -> int | None:
    """How many formulas the errata chapter lists (None when it has not run)."""
    try:
        return len(load(folder, "errata")[0]["main"])
    except ResultsError:
        return None


def guarded(sentence: str, true: bool | None) -> str:
    """A sentence of the summary that states an outcome, returned for the page when this build's results agree with
    it (``true``), marked as unchecked when the build did not run the chapter that decides it (None); when they
    contradict it the build stops here, naming the sentence."""
    if true is None:
        return f"{sentence} (This build did not run the chapter that checks it.)"
    if not true:
        raise AssertionError(
            f"the summary says {sentence!r}, which this build's results contradict: rewrite the "
            "sentence (notebooks/summary.md) or look at what changed"
        )
    return sentence


def agree(verdicts: list[str | None], expected: str) -> bool | None:
    """Whether every verdict is ``expected``; None when any claim was not checked in this build."""
    return None if any(v is None for v in verdicts) else all(v == expected for v in verdicts)


def verdict_of(claims: pd.DataFrame, page: str, claim_id: str) -> str | None:
    """One claim's verdict in this build (None when the chapter did not check it)."""
    found = claims[(claims["page"] == page) & (claims["id"] == claim_id)]["verdict"]
    return found.iloc[0] if len(found) else None


def profile_difference(root: Path, profile: str, other: str, page: str = "fig2_dtap") -> pd.DataFrame | None:
    """A chapter's verdicts under this build's profile beside another profile's (e.g. the authors' settings,
    ``official``), where both have been run into the same results root; None when the other has not."""
    theirs, ours = profile_tables(root, other, page), profile_tables(root, profile, page)
    if theirs is None or ours is None or "claims" not in theirs or "claims" not in ours:
        return None
    both = ours["claims"].merge(theirs["claims"], on="id", suffixes=("", " other"))
    return pd.DataFrame({"claim": both["claim"], profile: both["verdict"], other: both["verdict other"]})


# ---- the paper's text against the authors' code: this book under `official` beside the authors' stored numbers ----

Tables = Mapping[str, pd.DataFrame]  # a chapter's tables as saved (``results.load``)
Compared = tuple[pd.DataFrame, Guard] | None  # a comparison table and the official run's guard
Compare = Callable[[Tables, OfficialUnit], Compared]  # (a run, the official run) -> None: nothing official to compare
STORED_LOSS = fig4_mu_trajectories.Setup().target_loss  # the loss at which the authors' notebook printed alpha


def _synthetic(compare: Callable[[Tables, OfficialUnit], pd.DataFrame], guard: Callable) -> Compare:
    """A synthetic chapter's comparison (its ``compared`` on its tables) and its guard (its ``guard``: the
    departures and its not-learned check)."""

    def both(run: Tables, official: OfficialUnit) -> Compared:
        return compare(run, official), guard(official)

    return both


def _fig4(run: Tables, official: OfficialUnit) -> Compared:
    """Figure 4's stored numbers (attention alpha at the loss the authors' notebook stopped at, per ratio r) beside
    Theorem 1's solution (``main``: the matched read-out), compared to the digits the authors printed (none where
    the official run departs from the authors' settings)."""
    keys = list(authors.table().index[authors.table()["chapter"] == "fig4_mu_trajectories"])

    def alphas(matched: pd.DataFrame) -> dict[str, Interval]:
        at = matched[np.isclose(matched["stopping_loss"], STORED_LOSS)]
        found = {k: at.loc[np.isclose(at["ratio"], float(k.removeprefix("fig4.alpha."))), "alpha"] for k in keys}
        return {k: Interval.of(v.iloc[:1]) for k, v in found.items() if len(v)}

    ours, ratios = alphas(run["main"]), run["main"]["ratio"].to_numpy()

    def text(key: str) -> str:
        if key in ours:
            return ours[key].text(3)
        ran = np.isclose(ratios, float(key.removeprefix("fig4.alpha."))).any()
        return f"stopped before the loss {STORED_LOSS:g}" if ran else "not run"

    table = authors.three_way({k: text(k) for k in keys})
    shown = beside_official(
        table,
        keys,
        alphas(official.tables["main"]),
        lambda i: i.text(3),
        printed=True,
        evidence=official.guard.comparable,
    )
    return shown, official.guard


def _real(module: ModuleType, depth: int | None = None) -> Compare:
    """A real-data chapter's comparison (``real_data.compared`` of ``real_data.official_from``, the path its page
    takes), of the depth the authors stored (``depth``); None when the official run has no rows of that depth."""

    def both(run: Tables, official: OfficialUnit) -> Compared:
        theirs = official_from(official, depth)
        if theirs is None:
            return None
        rows = run["per_seed"]
        rows = rows[rows["layers"] == depth] if depth is not None and "layers" in rows else rows
        return real_compared(rows if len(rows) else None, name_of(module), theirs), theirs.guard

    return both


@dataclass(frozen=True)
class Beside:
    """How a chapter's run is set beside its official run: its module, the tables it reads, and the comparison."""

    module: ModuleType
    tables: tuple[str, ...]
    compare: Compare


SYNTHETIC, REAL = ("main", "claims"), ("per_seed", "claims")
BESIDE_OFFICIAL = {  # every chapter whose numbers the authors' notebooks stored (``data.authors``)
    "fig2_dtap": Beside(
        fig2_dtap,
        SYNTHETIC,
        _synthetic(lambda run, off: fig2_dtap.compared(run["main"], off, run.get("heatmaps")), fig2_dtap.guard),
    ),
    "fig3_incentive": Beside(
        fig3_incentive,
        SYNTHETIC,
        _synthetic(lambda run, off: fig3_incentive.compared(run["main"], off), fig3_incentive.guard),
    ),
    "fig4_mu_trajectories": Beside(fig4_mu_trajectories, ("main",), _fig4),
    "hatexplain": Beside(hatexplain, REAL, _real(hatexplain)),
    "hatexplain_layers": Beside(hatexplain_layers, REAL, _real(hatexplain_layers, hatexplain_layers.STORED_DEPTH)),
    "sva": Beside(sva, REAL, _real(sva)),
    "squad": Beside(squad, REAL, _real(squad)),
}


def _by_number(table: pd.DataFrame) -> pd.DataFrame:
    """A comparison table indexed by (quantity, condition), whatever its shape (``authors.three_way``: one quantity
    names the index; several are a column, or the first level of the index)."""
    if isinstance(table.index, pd.MultiIndex):
        out = table
    elif "quantity" in table.columns:
        out = table.set_index("quantity", append=True).swaplevel()
    else:
        out = table.set_index(pd.MultiIndex.from_product([[table.index.name], table.index]))
    return out.rename_axis(["quantity", "condition"])


def beside_authors(root: Path, profile: str, page: str) -> pd.DataFrame | None:
    """A chapter's stored numbers (``data.authors``), one row each: the paper's number, the authors' notebooks' as
    stored, this book under ``official`` (the unit ``<root>/official/<page>``, read by ``official.official_unit`` as
    the chapter's page reads it: its mean and 95% interval over seeds), this book under ``profile`` (its unit in the
    same root; 'not run' without one) and whether ``official`` gives the authors' number back (the chapter's own
    comparison; undecided where the unit's guard draws no verdict: its models did not learn, or it is not the
    authors' experiment, the reason beside its numbers). None when the chapter has no official results to compare:
    no unit, a unit without the tables it reads (its data was not available), or none of the depth stored."""
    spec = BESIDE_OFFICIAL[page]
    theirs = official_unit(spec.module, "", root=root)
    if theirs is None or not all(t in theirs.tables for t in spec.tables):
        return None
    compared = spec.compare(theirs.tables, theirs)
    if compared is None:
        return None
    table, guard = compared
    rows = _by_number(table)
    out = rows[["the paper", "the authors' notebooks", OFFICIAL_COLUMN, INFORMATIVE_COLUMN]].copy()
    if not guard.comparable:
        out[OFFICIAL_COLUMN] += f" ({guard.reason})"
    if profile != OFFICIAL:
        ours = _tables(root, profile, page, spec)
        here = pd.Series(dtype=str)
        if ours is not None:
            mine = spec.compare(ours, theirs)
            if mine is None:  # only an official run with nothing to compare gives None, and this one had some
                raise RuntimeError(f"{page}: comparing {profile} with {OFFICIAL} gave nothing, yet {OFFICIAL} had rows")
            here = _by_number(mine[0])["this run"]
        out[f"this book under {profile}"] = here.reindex(out.index).fillna("not run")
    out[VERDICT_COLUMN] = rows[VERDICT_COLUMN] if guard.comparable else UNDECIDED
    return out


def _tables(root: Path, profile: str, page: str, spec: Beside) -> Tables | None:
    """A chapter's tables under ``profile`` in ``root`` (``verdicts.profile_tables``), None unless it holds every
    table the comparison reads."""
    tables = profile_tables(root, profile, page)
    return tables if tables is not None and all(t in tables for t in spec.tables) else None


def official_command(page: str) -> str:
    """The command that computes a chapter under ``official``."""
    return f"python -m qkov_lib reproduce --profile {OFFICIAL} --only {page}"


def official_html(root: Path, profile: str, pages: list[str] | None = None) -> str:
    """For every chapter whose numbers the authors stored (``BESIDE_OFFICIAL``, in the book's order; or ``pages``):
    its title linked to its page, how many of its numbers ``official`` gives back, and its rows
    (``beside_authors``) folded beneath, each led by its verdict word; or, where the chapter has no official
    results in ``root``, a sentence saying so and the command that computes them."""
    parts: list[str] = []
    tables: list[pd.DataFrame] = []
    for page in pages or [n for n in chapter_names() if n in BESIDE_OFFICIAL]:
        link = f'<a href="{page}.html">{html.escape(title(page))}</a>'
        table = beside_authors(root, profile, page)
        if table is None:
            try:
                stopped = read_meta(root / OFFICIAL, page).get("status") == UNAVAILABLE
            except ResultsError:
                stopped = False
            why = "its run stopped: its data was not available where it ran" if stopped else "not run yet"
            parts.append(
                f"<p><strong>{link}</strong>: no results under <code>{OFFICIAL}</code> ({why}). "
                f"<code>{html.escape(official_command(page))}</code> computes them; this page shows them "
                f"when it is next built.</p>"
            )
            continue
        words = ", ".join(f"{word}: {n}" for word, n in counts_of(table[VERDICT_COLUMN]).items())
        line = f"{tally_of(table)}; {words}"
        tables.append(table)
        headers = (VERDICT_COLUMN, "stored number", *table.columns.drop(VERDICT_COLUMN))
        rows = (
            (
                r[VERDICT_COLUMN],
                (
                    html.escape(f"{quantity}, {condition}"),
                    *(html.escape(str(r[c])) for c in table.columns.drop(VERDICT_COLUMN)),
                ),
            )
            for (quantity, condition), r in table.iterrows()
        )
        parts.append(
            f'<details class="qkov-official" style="margin: 0.6em 0"><summary><strong>{link}</strong>: '
            f"{len(table)} stored numbers; {html.escape(line)}</summary>"
            f"{verdict_table(rows, headers, 'qkov-official')}</details>"
        )
    if tables:  # every chapter's stored numbers together: the book's tally
        parts.insert(0, f"<p><strong>All chapters</strong>: {html.escape(tally_of(pd.concat(tables)))}.</p>")
    return "\n".join(parts)


def tally_of(table: pd.DataFrame) -> str:
    """A comparison's tally (``official.tally``): 'reproduces k of n informative (m compared)'."""
    return tally(list(table[VERDICT_COLUMN]), list(table[INFORMATIVE_COLUMN]))


def counts_of(verdicts: pd.Series) -> dict[str, int]:
    """How many rows have each reproduction word, in the order reproduces, differs, undecided; a word no row has is
    left out."""
    words = list(verdicts)
    return {w: words.count(w) for w in (REPRODUCES, DIFFERS, UNDECIDED) if w in words}


class Summary(NamedTuple):
    """What the summary shows: every chapter's claims (the scorecard's table), the headlines (``results_table``)
    and how many have each verdict, the same count over the paper's claims, Figure 2's claims across the atlas
    (``scorecard.atlas_share``), how many errata there are (None: not run), the official comparisons
    (``official_html``) and how each chapter ran (``methodology``)."""

    claims: pd.DataFrame
    results: pd.DataFrame
    tally: dict[str, int]
    paper: dict[str, int]
    atlas_share: dict[str, str]
    n_errata: int | None
    official: str
    methodology: pd.DataFrame


def run(setup: Setup, *, device: torch.device | None = None, progress: bool = True) -> Summary:
    """Everything the summary shows, read from the results of the profile it runs under. It computes nothing:
    ``device`` and ``progress`` are unused here."""
    root = results_root()
    folder = root / setup.profile
    claims = scorecard.gather(folder)[0]
    results = results_table(claims)
    return Summary(
        claims,
        results,
        counts(results["verdict"]),
        counts(claims.loc[claims["kind"] == PAPER, "verdict"]),
        scorecard.atlas_share(folder),
        errata_count(folder),
        official_html(root, setup.profile),
        methodology(folder, [n for n in chapter_names() if n != "summary"]),
    )
