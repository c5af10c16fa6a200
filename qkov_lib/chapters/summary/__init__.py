"""The reproducibility summary, the book's first page: the paper's headline claims, what the authors' notebooks stored
for them, what this build measured, each verdict with the reason, what this companion adds, and how the build ran.
Everything on it is read from the build's results."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import torch

from ...core.contents import chapter_names, title
from ...core.results import (
    PUBLISHED,
    UNAVAILABLE,
    ResultsError,
    Sources,
    folder_of,
    load,
    read_meta,
    results_root,
    sources,
)
from ...metrics.verdicts import NOT_EVIDENCE, PAPER, UNDECIDED, counts, every, reason
from .. import scorecard
from .beside import code_mark, official_html

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

    def label(self, claim_id: str) -> str:
        """The label of one part ('' where the headline labels none)."""
        return dict(zip(self.ids, self.labels)).get(claim_id, "")


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
        ("2_layers_ACMC_rises", "4_layers_ACMC_rises", "2_layers_sufficiency_falls", "4_layers_sufficiency_falls"),
        "With two and four layers, faster query-key learning still puts attention on the rationales, and the "
        "rationales alone carry more of the prediction: sufficiency falls, as the paper says of all settings "
        "(Table 5).",
        ("2 layers, ACMC", "4 layers, ACMC", "2 layers, sufficiency", "4 layers, sufficiency"),
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
    so), the authors' stored numbers, this build's numbers, and the reason (after the label of the part that
    decides it) with a link to the chapter's section. ``claims`` is the scorecard's table (``scorecard.gather``)."""
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
                    "reason": NOT_HERE,
                    "page": h.page,
                    "results": PUBLISHED,
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
                "reason": _labelled(h, decisive["id"], _why(decisive), verdicts),
                "page": h.page,
                "results": parts["results"].iloc[0] if "results" in parts else PUBLISHED,
            }
        )
    return pd.DataFrame(rows)


def _why(claim: pd.Series) -> str:
    """A claim's reason: its own where it has one (a compound claim names the parts that decide it,
    ``metrics.compound.each``), else the clause of its rule that gave its verdict."""
    why = claim.get("why")
    return why if isinstance(why, str) and why else reason(claim["verdict"], claim["rule"])


NOT_HERE = "not in this build's results"  # a headline whose chapter gave this build no claims


def not_computed(results: pd.DataFrame, where: Path | Sources) -> str:
    """The sentence the summary says before its marks when some central claims were not computed in this build
    (``results_table``'s rows ``NOT_HERE``): how many, and for each chapter why (its data was not available where
    it ran, or it has not run); '' when every one was computed."""
    missing = results[results["reason"] == NOT_HERE]
    if missing.empty:
        return ""
    why = {}
    for page in dict.fromkeys(missing["page"]):
        try:
            stopped = read_meta(folder_of(where, page), page).get("status") == UNAVAILABLE
        except ResultsError:
            stopped = False
        why[page] = "its data was not available where it ran" if stopped else "it has not run in this build"
    each = "; ".join(f"{title(page)}: {w}" for page, w in why.items())
    return (
        f"{len(missing)} of the {len(results)} central claims {'was' if len(missing) == 1 else 'were'} not computed "
        f"in this build, so {'it reads' if len(missing) == 1 else 'they read'} undecided ({each})."
    )


def _labelled(h: Headline, claim_id: str, text: str, verdicts: list[str]) -> str:
    """``text`` after the label of the part it is about ('4 layers: ...'), where the headline labels its parts and
    they differ in verdict (one part decides the headline)."""
    label = h.label(claim_id)
    return f"{label}: {text}" if label and len(set(verdicts)) > 1 else text


def _joined(parts: pd.DataFrame, column: str, h: Headline) -> str:
    """A column's texts of a headline's parts on one line: each after its label ('ACMC: ...'), where the headline
    labels its parts, else joined by semicolons."""
    texts = [(h.label(i), t) for i, t in zip(parts["id"], parts[column].fillna("")) if t]
    if h.labels:
        return ". ".join(f"{label}: {t}" for label, t in texts)
    return "; ".join(t for _, t in texts)


def methodology(where: Path | Sources, pages: list[str]) -> pd.DataFrame:
    """How each chapter of this build ran, from its unit's metadata: device, commit, date and the page's wall time,
    then the computation behind it: its stored runs, how many this build read from the store, and the CPU time they
    took when they were computed (a page made from the store in seconds may stand on hours); one row per chapter,
    indexed by its title."""
    rows = []
    for page in pages:
        try:
            meta = read_meta(folder_of(where, page), page)
        except ResultsError:
            continue
        wall = meta.get("runner_wall_time_s") or meta.get("wall_time_s")
        runs = meta.get("stored_runs") if isinstance(meta.get("stored_runs"), dict) else {}
        rows.append(
            {
                "chapter": title(page),
                "device": f"{meta.get('device', '?')} ({meta.get('device_name', '?')})",
                "commit": str(meta.get("git_commit") or "?")[:12],
                "date": meta.get("date", "?"),
                "page (min)": round(wall / 60, 1) if isinstance(wall, (int, float)) else None,
                "stored runs (from the store)": f"{runs['runs']} ({runs.get('from_store', 0)})" if runs else "",
                "their compute (CPU min)": round(float(runs.get("compute_s", 0)) / 60, 1) if runs else None,
            }
        )
    return pd.DataFrame(rows, columns=["chapter", "device", "commit", "date", *METHOD_COLUMNS]).set_index("chapter")


METHOD_COLUMNS = ["page (min)", "stored runs (from the store)", "their compute (CPU min)"]


def errata_count(where: Path | Sources) -> int | None:
    """How many formulas the errata chapter lists (None when it has not run)."""
    try:
        return len(load(folder_of(where, "errata"), "errata")[0]["main"])
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


class Summary(NamedTuple):
    """What the summary shows: every chapter's claims (the scorecard's table), the headlines (``results_table``)
    and how many have each verdict, the same count over the paper's claims, Figure 2's claims across the atlas
    (``scorecard.atlas_share``), how many errata there are (None: not run), the official comparisons
    (``official_html``), how each chapter ran (``methodology``), the mark under the authors' code with its
    count (``code_mark``) and which central claims this build did not compute (``not_computed``)."""

    claims: pd.DataFrame
    results: pd.DataFrame
    tally: dict[str, int]
    paper: dict[str, int]
    atlas_share: dict[str, str]
    n_errata: int | None
    official: str
    methodology: pd.DataFrame
    code_mark: tuple[str | None, str]
    not_computed: str


def run(setup: Setup, *, device: torch.device | None = None, progress: bool = True) -> Summary:
    """Everything the summary shows, read from the results of the profile it runs under. It computes nothing:
    ``device`` and ``progress`` are unused here."""
    root, where = results_root(), sources(setup.profile)
    claims = scorecard.gather(where)[0]
    results = results_table(claims)
    return Summary(
        claims,
        results,
        counts(results["verdict"]),
        counts(claims.loc[claims["kind"] == PAPER, "verdict"]),
        scorecard.atlas_share(where),
        errata_count(where),
        official_html(root, setup.profile),
        methodology(where, [n for n in chapter_names() if n != "summary"]),
        code_mark(root, setup.profile),
        not_computed(results, where),
    )
