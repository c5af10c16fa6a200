"""What the scorecard decides: it makes no claims of its own but gathers every chapter's claim table from one
profile's results (``gather``: in book order, Figure 2's claims with how they fare across the atlas, and why a
chapter contributes none) and counts the verdicts of each kind (``tally``); on results saved in ``tmp_path``."""

import json
import os

import pandas as pd
from fake_chapters import fig2_rows

from qkov_lib.chapters import fig2_dtap, scorecard
from qkov_lib.chapters.atlas import VERDICTS
from qkov_lib.chapters.atlas import claims as atlas_claims
from qkov_lib.core.contents import GATHERERS, chapter_names
from qkov_lib.core.results import BY_HAND, PUBLISHED, UNAVAILABLE, Sources, save
from qkov_lib.metrics.verdicts import CHECK, REVIEW, Claim, claim_table


def claims(*words: tuple[str, str, str]) -> pd.DataFrame:
    """A claim table of (id, kind, verdict) rows."""
    return claim_table(Claim(i, f"claim {i}", "measured", v, "rule", kind=k) for i, k, v in words)


def results(folder) -> None:
    """Figure 2 (every claim holds), the atlas (two settings, the collapsed claim failing in one), Theorem 1 (a
    check that fails), the reviewers' falsifier (undecided), SVA without its data, HateXplain edited by hand."""
    save(folder, "fig2_dtap", {"claims": fig2_dtap.claims(fig2_rows())}, {})
    one, two = (fig2_rows(**kw).assign(mult_set=m) for kw, m in (({}, -1), ({}, 0)))
    first = pd.concat([one[one["panel"] <= "d"], two[two["panel"] > "d"]]).assign(lr=0.1)
    second = first.assign(lr=1.0, ACMC=lambda t: t["ACMC"].where(t["panel"] != "b", 20.0))
    rows = pd.concat([first, second]).assign(init="identity", init_scale=1e-6, scaled_scores=False, hit_cap=False)
    save(folder, "atlas", {VERDICTS: atlas_claims.claims_per_setting(rows)}, {})
    save(folder, "theorem1", {"claims": claims(("exact_instances", "paper", "holds"), ("reduce", CHECK, "fails"))}, {})
    save(folder, "factorised_dynamics", {"claims": claims(("falsifier", REVIEW, "undecided"))}, {})
    save(folder, "sva", {"claims": claims(("x", "paper", "holds"))}, {"status": UNAVAILABLE})
    save(folder, "hatexplain", {"claims": claims(("x", "paper", "holds"))}, {})
    meta = folder / "hatexplain.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "profile": "edited"}))


def test_gather_collects_every_chapters_claims_in_book_order_and_says_why_one_has_none(tmp_path):
    results(tmp_path)
    table, missing = scorecard.gather(tmp_path)
    assert list(dict.fromkeys(table["page"])) == ["fig2_dtap", "theorem1", "factorised_dynamics"]
    assert len(table) == 4 + 2 + 1 and table.loc[table["page"] == "theorem1", "chapter"].nunique() == 1
    fig2 = table[table["page"] == "fig2_dtap"].set_index("id")["across the atlas"]
    assert fig2["collapsed_ov_top_right"] == "holds in 1 of 2 settings (fails in 1, undecided in 0)"
    assert fig2["fafo_top_left"] == "holds in 2 of 2 settings (fails in 0, undecided in 0)"
    assert (table.loc[table["page"] != "fig2_dtap", "across the atlas"] == "").all()
    assert missing["sva"] == "its data was not available where the book was built"
    assert missing["hatexplain"].startswith("its results are unusable (") and "seal" in missing["hatexplain"]
    assert missing["squad"] == "not run under this profile" and "scorecard" not in missing


def test_tally_counts_each_kinds_verdicts(tmp_path):
    results(tmp_path)
    counts = scorecard.tally(scorecard.gather(tmp_path)[0])
    assert counts.loc["The paper's claims", ["holds", "fails", "undecided", "not evidence"]].tolist() == [5, 0, 0, 0]
    assert counts.loc["This companion's own checks of the derivations", "fails"] == 1
    assert counts.loc["The reviewers' tests and the paper's untested corollaries", "undecided"] == 1
    assert counts.to_numpy().sum() == 7


def test_no_results_at_all_gives_an_empty_table_and_a_reason_per_chapter(tmp_path):
    table, missing = scorecard.gather(tmp_path)
    assert table.empty and set(missing.values()) == {"not run under this profile"}
    assert set(missing) == set(chapter_names()) - set(GATHERERS)


def test_run_by_hand_a_gathering_page_reads_the_newer_hand_runs_and_says_which(tmp_path):
    published, by_hand = tmp_path / "smoke", tmp_path / "interactive" / "smoke"
    results(published)
    save(by_hand, "theorem1", {"claims": claims(("exact_instances", "paper", "fails"))}, {})
    save(by_hand, "factorised_dynamics", {"claims": claims(("falsifier", REVIEW, "holds"))}, {})
    older = (published / "factorised_dynamics.json").stat().st_mtime - 60
    os.utime(by_hand / "factorised_dynamics.json", (older, older))  # a hand run older than the published one
    table, _ = scorecard.gather(Sources(published, by_hand))
    origin = table.groupby("page")["results"].first()
    assert origin.to_dict() == {"factorised_dynamics": PUBLISHED, "fig2_dtap": PUBLISHED, "theorem1": BY_HAND}
    assert table.loc[table["page"] == "theorem1", "verdict"].tolist() == ["fails"]
    assert "Theorem 1" in scorecard.by_hand_note(table) and "Figure 2" not in scorecard.by_hand_note(table)
    assert scorecard.by_hand_note(scorecard.gather(Sources(published))[0]) == ""  # the runner reads no hand run
