"""Figure 4's claims (Section 6) on hand-made trajectories and matched read-outs: the ODEs have no seeds, so each
check holds or fails exactly at its threshold, read at the stopping loss it is given and at the extreme ratios."""

import numpy as np
import pandas as pd
import pytest

from qkov_lib.chapters import fig4_mu_trajectories as fig4
from qkov_lib.theory import OrthogonalSetting, Trajectory

BASE = OrthogonalSetting()  # m = 5, n = 50: uniform attention alpha_0 = 5/55
RATIOS = (0.01, 1.0, 100.0)
STOP = 1e-3


def trajectory(ratio: float, reached: bool = True) -> Trajectory:
    """A trajectory that ran to the target loss 1e-4 (or stopped short), two read-outs long."""
    mu = np.array([0.0, 10.0])
    return Trajectory(BASE.with_ratio(ratio), np.array([0.0, 1.0]), mu, mu, 1e-4, reached, 0, lambda u: None)


def matched(alpha: dict[float, float], spread: float = 0.0) -> pd.DataFrame:
    """The matched read-out at two stopping losses: attention per ratio at ``STOP`` (0.5 at 1e-2), and alpha*mu_OV
    the same for every ratio but the largest, which is ``spread`` above."""
    return pd.DataFrame(
        [
            {"stopping_loss": loss, "ratio": r, "alpha": alpha[r] if loss == STOP else 0.5, "alpha_mu_ov": 2.0 + extra}
            for loss in (1e-2, STOP)
            for r in RATIOS
            for extra in [spread if r == RATIOS[-1] else 0.0]
        ]
    )


GOOD = {0.01: 0.1, 1.0: 0.5, 100.0: 0.95}


def claims(trajs=None, read=None) -> pd.DataFrame:
    trajs = trajs or [trajectory(r) for r in RATIOS]
    return fig4.claims(trajs, matched(GOOD) if read is None else read, BASE, STOP).set_index("id")


def test_every_check_holds_on_read_outs_built_to_pass_it():
    table = claims()
    assert (table["verdict"] == "holds").all() and len(table) == 4
    assert table.loc["alpha_near_one", "estimate"] == 0.95  # read at the largest ratio and the given loss
    assert table.loc["alpha_near_uniform", "estimate"] == 0.1  # at the smallest: 1.1 times 5/55
    assert "1.10 times uniform" in table.loc["alpha_near_uniform", "this run"]
    assert table.loc["alpha_mu_ov_matched", "estimate"] == 0.0


def test_each_check_fails_past_its_threshold():
    assert (
        claims([trajectory(0.01), trajectory(1.0, reached=False), trajectory(100.0)]).loc["loss_to_zero", "verdict"]
        == "fails"
    )
    assert claims(read=matched({**GOOD, 100.0: 0.85})).loc["alpha_near_one", "verdict"] == "fails"
    too_sharp = 1.6 * BASE.alpha0  # more than 1.5 times uniform
    assert claims(read=matched({**GOOD, 0.01: too_sharp})).loc["alpha_near_uniform", "verdict"] == "fails"
    apart = claims(read=matched(GOOD, spread=1e-3)).loc["alpha_mu_ov_matched"]
    assert apart["verdict"] == "fails" and apart["estimate"] == pytest.approx(1e-3)


def test_the_thresholds_are_inclusive_where_the_words_say_at_least_and_at_most():
    edge = claims(read=matched({0.01: 1.5 * BASE.alpha0, 1.0: 0.5, 100.0: 0.9}))
    assert edge.loc["alpha_near_one", "verdict"] == "holds" and edge.loc["alpha_near_uniform", "verdict"] == "holds"


def test_only_the_given_stopping_loss_is_read_for_attention():
    other = matched(GOOD)
    other.loc[other["stopping_loss"] != STOP, "alpha"] = 0.05  # far from 1 at the other loss: not read
    assert claims(read=other).loc["alpha_near_one", "verdict"] == "holds"
