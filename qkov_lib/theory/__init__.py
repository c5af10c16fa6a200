"""Theory of Section 6 and Appendices B-D: Theorem 1 dynamics, Lemma 3 bounds, matched-loss read-outs."""

from .bounds import bound_ratios, lemma3_bounds, lemma3_tightness, log2_regime_end, log2_share
from .dynamics import (
    OrthogonalSetting,
    Trajectory,
    attention_mass,
    check_loss_threshold,
    integrate,
    integrate_many,
    loss,
    normalised_time,
    rhs,
)
from .matched import RatioSweep, alpha_table, crossing_times, matched_readout, simulate_ratios

__all__ = [
    "OrthogonalSetting",
    "RatioSweep",
    "Trajectory",
    "alpha_table",
    "attention_mass",
    "bound_ratios",
    "check_loss_threshold",
    "crossing_times",
    "integrate",
    "integrate_many",
    "lemma3_bounds",
    "lemma3_tightness",
    "log2_regime_end",
    "log2_share",
    "loss",
    "matched_readout",
    "normalised_time",
    "rhs",
    "simulate_ratios",
]
