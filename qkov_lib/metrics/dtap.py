"""DTAP (Distinct Token Attention-Prediction) heatmaps and their summaries (Section 4; Appendix D.6).

x = fraction of attention on the relevant (distinct) tokens, y = predicted probability of the correct class.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def check_bins(edges: Sequence[float], name: str = "bins") -> np.ndarray:
    """Bin edges must be strictly increasing, inside [0, 1], with at least two edges."""
    e = np.asarray(edges, dtype=float)
    if e.ndim != 1 or len(e) < 2:
        raise ValueError(f"{name} must be a list of at least two edges (got {list(edges)!r})")
    if not np.all(np.isfinite(e)) or e[0] < 0 or e[-1] > 1:
        raise ValueError(f"{name} must lie in [0, 1] (got {e.tolist()})")
    if not np.all(np.diff(e) > 0):
        raise ValueError(f"{name} must be strictly increasing (got {e.tolist()})")
    return e


def dtap_histogram(
    attention: np.ndarray,
    prob: np.ndarray,
    x_bins: Sequence[float] = DEFAULT_BINS,
    y_bins: Sequence[float] = DEFAULT_BINS,
) -> np.ndarray:
    """Percent of examples per cell, shape [len(y_bins)-1, len(x_bins)-1]; row 0 is the LOWEST probability bin.

    Bins are closed on the left, and the last bin also holds its right edge (so 1.0 falls in the top bin).
    Examples outside the edges are counted in no cell (the cells then sum to less than 100).
    """
    xe, ye = check_bins(x_bins, "x_bins"), check_bins(y_bins, "y_bins")
    attention, prob = np.asarray(attention, float).ravel(), np.asarray(prob, float).ravel()
    if attention.shape != prob.shape or attention.size == 0:
        raise ValueError(
            f"attention and prob must be non-empty and of the same length (got {attention.size} and {prob.size})"
        )
    hist, _, _ = np.histogram2d(prob, attention, bins=[ye, xe])
    return 100.0 * hist / attention.size


def attention_summary(
    attention: np.ndarray,
    prob: np.ndarray,
    correct: np.ndarray,
    threshold: float = 0.5,
    confidence: float = 0.5,
    top_right: tuple[float, float] = (0.8, 0.8),
) -> dict[str, float]:
    """MRTA (mean attention on relevant tokens, %), AC (% with attention > threshold), ACMC (% with attention >
    threshold and correct-class probability > confidence), top-left (% with attention <= threshold and probability >
    confidence), top-right cell (% with attention >= top_right[0] and probability >= top_right[1]) and accuracy."""
    a, p = np.asarray(attention, float), np.asarray(prob, float)
    return {
        "MRTA": 100 * float(a.mean()),
        "AC": 100 * float(np.mean(a > threshold)),
        "ACMC": 100 * float(np.mean((a > threshold) & (p > confidence))),
        "top_left": 100 * float(np.mean((a <= threshold) & (p > confidence))),
        "top_right_cell": 100 * float(np.mean((a >= top_right[0]) & (p >= top_right[1]))),
        "accuracy": 100 * float(np.mean(correct)),
    }


def mean_std(histograms: Sequence[np.ndarray] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation (ddof=1 when there are several) over seeds of per-seed heatmaps."""
    h = np.stack(list(histograms))  # an array: its seeds along the first axis
    return h.mean(0), h.std(0, ddof=1 if len(h) > 1 else 0)
