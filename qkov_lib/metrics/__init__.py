"""Attention-interpretability metrics: the DTAP histogram and the summaries AC, ACMC, MRTA (Section 4, App. D.6),
and means with confidence intervals over seeds."""

from .dtap import attention_summary, check_bins, dtap_histogram, mean_std
from .stats import mean_ci, paired_effects

__all__ = ["attention_summary", "check_bins", "dtap_histogram", "mean_ci", "mean_std", "paired_effects"]
