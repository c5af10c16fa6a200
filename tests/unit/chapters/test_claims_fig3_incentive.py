"""Figure 3's claims (Section 5) on hand-made per-epoch curves of three seeds: each claim reads the model, the
attention values and the epochs it names, holds, fails or is undecided as its 95% interval over seeds says, and
reports its numbers."""

import pandas as pd
import pytest
from fake_chapters import HALF_3

from qkov_lib.chapters import fig3_incentive

ALPHAS = (0.2, 0.4, 0.6, 0.8, 1.0)
EPOCHS = (1, 2, 3, 4)
CHECK = 2  # the epoch the incentive claims read; the last epoch is 4


def curves() -> pd.DataFrame:
    """Curves on which every claim holds: the factorised loss ends at 0.01-0.03 and the collapsed loss lies a/2 +
    0.01 seed above it; the factorised incentive is 1 + 0.1 seed at 0.2 and 0.1 + 0.01 seed beyond (faded); the
    collapsed incentive is 0.6 + 0.1 seed (0.45 + 0.05 seed at 0.8), high at three or four values against one; at
    attention 1 the incentive is NaN."""
    rows = []
    for seed in range(3):
        for epoch in EPOCHS:
            for a in ALPHAS:
                loss = (0.01 + 0.01 * seed) * (1 + EPOCHS[-1] - epoch)
                incentive = 1.0 + 0.1 * seed if a == 0.2 else 0.1 + 0.01 * seed
                high = 0.45 + 0.05 * seed if a == 0.8 else 0.6 + 0.1 * seed
                if a == 1.0:  # no attention above 1 to compare with: the incentive is NaN, as the runs give it
                    incentive = high = float("nan")
                rows.append((seed, epoch, "factorised", a, loss, incentive))
                rows.append((seed, epoch, "collapsed", a, loss + a / 2 + 0.01 * seed, high))
    return pd.DataFrame(rows, columns=["seed", "epoch", "model", "alpha", "train_loss", "incentive_per_delta"])


def changed(table: pd.DataFrame, model: str, alpha: float, column: str, per_seed, epochs=EPOCHS) -> pd.DataFrame:
    """``table`` with ``column`` of ``model`` at ``alpha`` set to ``per_seed[seed]`` in ``epochs``."""
    out = table.copy()
    where = (out["model"] == model) & (out["alpha"] == alpha) & out["epoch"].isin(epochs)
    out.loc[where, column] = out.loc[where, "seed"].map(dict(enumerate(per_seed)))
    return out


def claims(table: pd.DataFrame) -> pd.DataFrame:
    return fig3_incentive.claims(table, CHECK).set_index("id")


def test_every_claim_holds_on_curves_built_to_support_it_with_its_numbers():
    table = claims(curves())
    assert (table["verdict"] == "holds").all() and len(table) == 5
    final = table.loc["factorised_loss_near_zero"]  # 0.01, 0.02, 0.03 at the last epoch
    assert final[["estimate", "low", "high"]].tolist() == pytest.approx(
        [0.02, 0.02 - 0.01 * HALF_3, 0.02 + 0.01 * HALF_3]
    )
    assert "(epoch 4)" in final["this run"]
    assert table.loc["factorised_incentive_positive", "estimate"] == pytest.approx(1.1)
    assert table.loc["factorised_incentive_fades", "estimate"] == pytest.approx(-0.165)  # 0.11 - 0.25 x 1.1
    assert table.loc["collapsed_loss_slower", "estimate"] == pytest.approx(0.11)  # the weakest, at 0.2: 0.1 + 0.01
    assert table.loc["collapsed_incentive_high", "estimate"] == pytest.approx(8 / 3)  # 3, 4, 4 values less 1 each


def test_each_claim_fails_when_its_interval_lies_on_the_wrong_side():
    base = curves()
    loss = changed(base, "factorised", 0.2, "train_loss", [0.5, 0.6, 0.7], [4])
    assert claims(loss).loc["factorised_loss_near_zero", "verdict"] == "fails"
    negative = changed(base, "factorised", 0.2, "incentive_per_delta", [-1.0, -1.1, -1.2], [1])
    assert claims(negative).loc["factorised_incentive_positive", "verdict"] == "fails"
    kept = changed(base, "factorised", 0.6, "incentive_per_delta", [0.9, 1.0, 1.1], [CHECK])  # not faded at 0.6
    assert claims(kept).loc["factorised_incentive_fades", "verdict"] == "fails"
    faster = changed(base, "factorised", 0.6, "train_loss", [1.0, 1.1, 1.2], [CHECK])  # above collapsed at 0.6
    verdicts = claims(faster)["verdict"]
    assert verdicts["collapsed_loss_slower"] == "fails" and verdicts["factorised_loss_near_zero"] == "holds"
    low = base.copy()
    low.loc[(low["model"] == "collapsed") & (low["epoch"] == 4), "incentive_per_delta"] = 0.1
    assert claims(low).loc["collapsed_incentive_high", "verdict"] == "fails"  # 0 against 1 high value


def test_only_the_epochs_up_to_the_check_count_for_the_positive_incentive():
    late = changed(curves(), "factorised", 0.2, "incentive_per_delta", [-1.0, -1.1, -1.2], [3])
    assert claims(late).loc["factorised_incentive_positive", "verdict"] == "holds"


def test_an_interval_that_straddles_the_threshold_is_undecided():
    base = curves()
    loss = changed(base, "factorised", 0.2, "train_loss", [0.0, 0.05, 0.1], [4])  # 0.05 +- 0.12
    assert claims(loss).loc["factorised_loss_near_zero", "verdict"] == "undecided"
    mixed = changed(base, "factorised", 0.2, "incentive_per_delta", [-1.0, 0.5, 2.0], [1])
    assert claims(mixed).loc["factorised_incentive_positive", "verdict"] == "undecided"
    one = base[base["seed"] == 0]
    assert set(claims(one)["verdict"]) == {"undecided"}


def test_the_high_incentive_count_reads_every_attention_value_below_1_whatever_the_last_one():
    """A run with attention values short of 1 (the notebook's own example override, alphas [0.2, 0.4]) counts its
    last value too: (collapsed) 0.2 and 0.4 high against (factorised) 0.2 alone."""
    base = curves()
    table = claims(base[base["alpha"] < 1]).loc["collapsed_incentive_high"]
    assert table["estimate"] == pytest.approx(8 / 3)  # as with the value 1, which has no incentive to count
    short = claims(base[base["alpha"].isin([0.2, 0.4])]).loc["collapsed_incentive_high"]
    assert short["verdict"] == "holds" and short["estimate"] == pytest.approx(1)
