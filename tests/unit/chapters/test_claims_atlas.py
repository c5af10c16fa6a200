"""The atlas's claims (Figure 2's, Section 4, across settings): ``claims.claims_per_setting`` pairs every multiplier
set's faster panels with the base panels of their own setting and leaves the ablation's rows out,
``claims.where_claims_hold`` counts the verdicts per claim, and ``claims.claims_per_run`` checks each ablation run
on its own rows; all on hand-made per-seed rows."""

import pandas as pd
from fake_chapters import fig2_rows

from qkov_lib.chapters.atlas import ablation, claims, grid
from qkov_lib.chapters.atlas.grid import RUN

GOOD = {"init": "identity", "init_scale": 1e-6, "lr": 0.1, "scaled_scores": False}
FAST = {**GOOD, "lr": 1.0}
SLOWER = {"e": [10, 11, 12], "f": [10, 12, 11], "g": [40, 41, 42], "h": [40, 42, 41]}  # below their base panels


def setting(values: dict, mult_sets: dict[int, pd.DataFrame], base: pd.DataFrame, capped: int = 0) -> pd.DataFrame:
    """One grid setting's rows: the base panels (a)-(d) once (multiplier set -1), each multiplier set's faster
    panels (e)-(h); the first ``capped`` rows stopped at the step cap."""
    parts = [base[base["panel"].isin(list("abcd"))].assign(mult_set=-1)]
    parts += [rows[rows["panel"].isin(list("efgh"))].assign(mult_set=j) for j, rows in mult_sets.items()]
    out = pd.concat(parts, ignore_index=True).assign(**values, hit_cap=False)
    out.loc[: capped - 1, "hit_cap"] = True
    return out


def grid_rows() -> pd.DataFrame:
    """Two settings: in the first, multiplier set 0 supports every claim and set 1 slows the faster panels; in the
    second (two models capped), the collapsed models miss the top-right."""
    good = fig2_rows()
    first = setting(GOOD, {0: good, 1: fig2_rows(acmc=SLOWER)}, good)
    second = setting(FAST, {0: good}, fig2_rows(acmc={"b": [20, 21, 22]}), capped=2)
    return pd.concat([first, second], ignore_index=True)


def test_each_setting_and_multiplier_set_is_checked_against_its_own_base_panels():
    table = claims.claims_per_setting(grid_rows())
    assert len(table) == 3 * 4  # (first, 0), (first, 1), (second, 0), four claims each
    verdict = table.set_index(["lr", "mult_set", "claim_id"])["verdict"]
    assert (verdict.loc[(0.1, 0)] == "holds").all()
    assert verdict[(0.1, 1, "faster_qk_top_right")] == "fails"  # its own faster panels, not set 0's
    assert verdict[(0.1, 1, "collapsed_ov_top_right")] == "holds"  # the same base panels as set 0
    assert verdict[(1.0, 0, "collapsed_ov_top_right")] == "fails"  # the second setting's own (b)
    assert verdict[(1.0, 0, "faster_qk_top_right")] == "holds"
    models = table.set_index(["lr", "mult_set"])[["models", "capped models"]].drop_duplicates()
    assert models.loc[(0.1, 0)].tolist() == [24, 0] and models.loc[(1.0, 0)].tolist() == [24, 2]  # 8 panels x 3


def test_the_ablations_rows_are_left_out_of_the_grid():
    rows = grid_rows()
    ablation_rows = fig2_rows(acmc={"b": [0, 1, 2]}).assign(**{RUN: "paper"}, hit_cap=False)
    mixed = pd.concat([rows.assign(**{RUN: None}), ablation_rows], ignore_index=True)
    pd.testing.assert_frame_equal(claims.claims_per_setting(mixed), claims.claims_per_setting(rows))


def test_where_claims_hold_counts_settings_per_claim():
    share = claims.where_claims_hold(claims.claims_per_setting(grid_rows())).set_index("claim_id")
    assert share.loc["collapsed_ov_top_right", ["holds", "fails", "undecided", "settings"]].tolist() == [2, 1, 0, 3]
    assert share.loc["faster_qk_top_right", ["holds", "fails", "undecided"]].tolist() == [2, 1, 0]
    assert share.loc["fafo_top_left", "holds %"] == 100.0 and share.loc["collapsed_ov_top_right", "holds %"] == 66.7
    assert claims.share_by_claim(claims.claims_per_setting(grid_rows()))["faster_qk_top_right"] == (
        "holds in 2 of 3 settings (fails in 1, undecided in 0)"
    )


def test_claims_per_run_checks_each_ablation_run_on_its_own_rows():
    runs = [r.key for r in ablation.runs(["scaling"])]
    assert runs == ["paper", "paper+scaling", "authors", "authors-scaling"]
    rows = pd.concat(
        [
            (fig2_rows(acmc=SLOWER) if key == "paper" else fig2_rows(top_left={"a": [5, 25, 45]})).assign(
                **{RUN: key}, hit_cap=key == "authors"
            )
            for key in runs
        ],
        ignore_index=True,
    )
    table = claims.claims_per_run(rows, ["scaling"])
    verdict = table.set_index([RUN, "claim_id"])["verdict"]
    assert verdict[("paper", "faster_qk_top_right")] == "fails" and verdict[("paper", "fafo_top_left")] == "holds"
    assert verdict[("paper+scaling", "faster_qk_top_right")] == "holds"
    assert verdict[("authors-scaling", "fafo_top_left")] == "undecided"  # 25 +- 49.7 against 25%
    by_run = table.drop_duplicates(RUN).set_index(RUN)
    assert by_run.loc["authors", "capped models"] == 24 and by_run.loc["paper", "capped models"] == 0
    assert by_run.loc["paper+scaling", ["start", "factor"]].tolist() == ["paper", "scaling"]
    assert claims.decided(table) == {"decided": 13, "undecided": 3, "verdicts": 16}  # 3 runs x fafo_top_left
