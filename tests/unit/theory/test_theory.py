"""Theorem 1 dynamics, the matched-loss read-out and Lemma 3's bounds (Section 6, Appendix C)."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from qkov_lib.theory import (
    OrthogonalSetting,
    alpha_table,
    attention_mass,
    crossing_times,
    integrate,
    integrate_many,
    lemma3_bounds,
    lemma3_tightness,
    loss,
    matched_readout,
    rhs,
    simulate_ratios,
)

RATIOS = [0.01, 0.1, 1.0, 10.0, 100.0]
BASE = OrthogonalSetting()  # m=5, n=50, b=50, M=5, eta_OV=1 (Figure 4)


@pytest.fixture(scope="module")
def trajectories():
    return [integrate(BASE.with_ratio(r), target_loss=1e-4) for r in RATIOS]


def test_alpha_at_zero_is_uniform():
    assert attention_mass(0.0, 5, 50) == pytest.approx(5 / 55, rel=1e-15)
    assert attention_mass(0.0, 3, 7) == pytest.approx(0.3, rel=1e-15)
    assert BASE.alpha0 == pytest.approx(5 / 55)


def test_alpha_is_stable_for_large_scores():
    assert attention_mass(800.0, 5, 50) == 1.0
    assert attention_mass(-800.0, 5, 50) == pytest.approx(0.0, abs=1e-300)


def test_loss_at_initialisation_is_log_M():
    assert loss(0.0, BASE.alpha0, 5) == pytest.approx(np.log(5))
    assert loss(1e4, 1.0, 5) == pytest.approx(4 * np.exp(-1e4), abs=1e-300)


def test_rhs_at_initialisation():
    d_ov, d_qk = rhs(0.0, 0.0, BASE.with_ratio(3.0))
    assert d_ov == pytest.approx(BASE.alpha0 / (50 * 5))  # eta alpha0 / (b (1 + M - 1))
    assert d_qk == 0.0  # mu_OV = 0: attention gets no signal yet


def test_loss_decreases_and_target_reached(trajectories):
    for tr in trajectories:
        assert tr.reached, f"r={tr.setting.ratio} did not reach 1e-4"
        assert tr.loss[-1] == pytest.approx(1e-4, rel=1e-6)
        assert np.all(np.diff(tr.loss) < 0)
        assert np.all(np.diff(tr.alpha) >= 0) and np.all(np.diff(tr.mu_ov) > 0)


def test_log_spaced_output(trajectories):
    t = trajectories[0].t
    assert t[0] == 0.0 and t[-1] > 1e7
    assert np.allclose(np.diff(np.log1p(t)), np.log1p(t[-1]) / (len(t) - 1))


def test_matches_independent_solver():
    """LSODA in log-time against DOP853 in plain time at tight tolerances."""
    s = BASE.with_ratio(10.0)
    tr = integrate(s, target_loss=1e-4)
    t_end = 1e5
    ref = solve_ivp(lambda t, y: rhs(y[0], y[1], s), (0, t_end), [0.0, 0.0], method="DOP853", rtol=1e-12, atol=1e-14)
    mu_ov, mu_qk = tr.at(t_end)
    assert mu_ov[0] == pytest.approx(ref.y[0, -1], rel=1e-6)
    assert mu_qk[0] == pytest.approx(ref.y[1, -1], rel=1e-6)


def test_matched_product_is_the_same_for_every_ratio(trajectories):
    thresholds = [1.0, 1e-1, 1e-2, 1e-3, 1e-4]
    df = matched_readout(trajectories, thresholds)
    for thr, group in df.groupby("stopping_loss"):
        expected = np.log((5 - 1) / np.expm1(thr))  # solve L = log(1 + (M-1) e^{-z}) for z
        assert np.allclose(group["alpha_mu_ov"], expected, rtol=1e-8), thr


def test_larger_ratio_sharper_attention_at_matched_loss(trajectories):
    df = matched_readout(trajectories, [1e-1, 1e-2, 1e-3])
    for _, group in df.groupby("stopping_loss"):
        assert np.all(np.diff(group.sort_values("ratio")["alpha"]) > 0)
    table = alpha_table(df, [1e-1, 1e-2, 1e-3])
    assert table.shape == (5, 3)
    assert table.loc[100.0].iloc[-1] > 0.9 and table.loc[0.01].iloc[-1] < 1.5 * BASE.alpha0


def test_crossing_time_is_nan_when_never_reached():
    tr = integrate(BASE.with_ratio(1.0), target_loss=1e-2)
    times = crossing_times(tr, [1e-1, 1e-2, 1e-3])
    assert np.isfinite(times[:2]).all() and np.isnan(times[2])


def test_lemma3_bounds_hold(trajectories):
    tight = lemma3_tightness(trajectories)
    tol = 1e-6  # relative: the lower bounds are tight to first order as t -> 0
    assert (tight["min mu_OV / lower"] >= 1 - tol).all() and (tight["min mu_QK / lower"] >= 1 - tol).all()
    assert (tight["max mu_OV / upper"] <= 1 + tol).all() and (tight["max mu_QK / upper"] <= 1 + tol).all()
    assert tight["min mu_OV / lower"].max() < 1 + 1e-4  # and the lower bounds are attained as t -> 0


def test_lemma3_lower_bound_fails_when_violated():
    """The check can fail: a lower bound scaled above the trajectory is caught."""
    tr = integrate(BASE.with_ratio(1.0), target_loss=1e-2)
    b = lemma3_bounds(tr.setting, tr.t[1:])
    assert not np.all(tr.mu_ov[1:] >= 2 * b["ov_lower"])


def test_simulate_ratios_tables():
    trajs, curves, matched = simulate_ratios(BASE, [0.1, 10.0], 1e-3, [1e-1, 1e-2, 1e-3])
    assert set(curves["ratio"]) == {0.1, 10.0} and len(curves) == 2 * len(trajs[0].t)
    assert {"ov_lower", "ov_upper", "qk_lower", "qk_upper"} <= set(matched.columns)
    assert (curves[curves.ratio == 0.1]["time"] == 0.1 * curves[curves.ratio == 0.1]["t"]).all()


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(m=0), "m"),
        (dict(n=-3), "n"),
        (dict(b=0), "b"),
        (dict(M=1), "M"),
        (dict(eta_ov=0.0), "eta_ov"),
        (dict(m=2.5), "m"),
    ],
)
def test_bad_setting(kwargs, name):
    with pytest.raises(ValueError, match=name):
        OrthogonalSetting(**kwargs)


@pytest.mark.parametrize("r", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_ratio(r):
    with pytest.raises(ValueError, match="ratio r"):
        BASE.with_ratio(r)


@pytest.mark.parametrize("thr", [0.0, -1e-3, np.log(5), 2.0])
def test_bad_threshold(thr):
    with pytest.raises(ValueError, match=r"target_loss must lie in \(0, log M\)"):
        integrate(BASE, target_loss=thr)


def test_stacked_integration_matches_one_at_a_time(trajectories):
    stacked = integrate_many([BASE.with_ratio(r) for r in RATIOS], target_loss=1e-4)
    for one, many in zip(trajectories, stacked):
        assert many.reached and many.t[-1] == pytest.approx(one.t[-1], rel=1e-5)
        assert many.alpha[-1] == pytest.approx(one.alpha[-1], rel=1e-6)
        mu_ov, _ = many.at(one.t[200])
        assert mu_ov[0] == pytest.approx(one.mu_ov[200], rel=1e-6)


def test_figure4_claims_can_fail():
    from qkov_lib.chapters.fig4_mu_trajectories import claims as figure4

    trajs, _, matched = simulate_ratios(BASE, [0.01, 0.1], 1e-3, [1e-1, 1e-2, 1e-3])
    claims = figure4(trajs, matched, BASE, 1e-3).set_index("id")["verdict"]
    assert claims["alpha_near_one"] == "fails"  # r = 0.1 is the largest ratio here: attention stays low
    assert claims["alpha_near_uniform"] == "holds" and claims["loss_to_zero"] == "holds"
