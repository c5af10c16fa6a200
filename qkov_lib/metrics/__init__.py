"""Attention-interpretability metrics: the DTAP histogram and the summaries AC, ACMC, MRTA (Section 4, App. D.6)."""
from .dtap import attention_summary, check_bins, dtap_histogram, mean_std

__all__ = ["attention_summary", "check_bins", "dtap_histogram", "mean_std"]
