"""Aggregate figures the way RL papers must report them (Agarwal et al., "Deep Reinforcement
Learning at the Edge of the Statistical Precipice", NeurIPS 2021): the interquartile mean over
runs and its percentile bootstrap confidence interval."""

from __future__ import annotations

import numpy as np

__all__ = ["iqm", "bootstrap_ci"]


def iqm(x) -> float:
    """The interquartile mean: the mean of the middle half of the sorted values (for ``n`` values,
    a quarter of them, fractionally weighted, trimmed off each end). Infinite values (a course not
    finished) sort last and count as such: an IQM is infinite when more than a quarter are."""
    v = np.sort(np.asarray(x, dtype=np.float64).ravel())
    n = v.size
    if n == 0:
        raise ValueError("iqm needs at least one value")
    lo, hi = 0.25 * n, 0.75 * n
    # each value covers [i, i + 1) of the sorted axis; weight it by its overlap with [lo, hi)
    i = np.arange(n)
    w = np.clip(np.minimum(i + 1, hi) - np.maximum(i, lo), 0.0, 1.0)
    keep = w > 0
    if np.isinf(v[keep]).any():
        return float(np.inf)
    return float((w[keep] * v[keep]).sum() / w[keep].sum())


def bootstrap_ci(x, stat=iqm, level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of ``stat`` over the values ``x``, resampled with
    replacement. A 2-D ``x`` is (runs, courses), a training seed's evaluation per row: each
    resample draws the rows and the columns independently, so the interval holds both the seeds'
    spread and the courses' (one row: the courses' alone, a deterministic controller's)."""
    v = np.asarray(x, dtype=np.float64)
    if v.ndim not in (1, 2) or v.size == 0:
        raise ValueError(f"bootstrap_ci takes a non-empty 1-D or 2-D array, got shape {v.shape}")
    rng = np.random.default_rng(seed)
    if v.ndim == 1:
        stats = np.array([stat(v[rng.integers(0, v.size, v.size)]) for _ in range(n_boot)])
    else:
        n, m = v.shape
        stats = np.array([stat(v[np.ix_(rng.integers(0, n, n), rng.integers(0, m, m))]) for _ in range(n_boot)])
    a = (1.0 - level) / 2.0
    # no interpolation between resamples: an infinite IQM (too many unfinished courses) stays one
    return float(np.quantile(stats, a, method="inverted_cdf")), float(np.quantile(stats, 1.0 - a, method="inverted_cdf"))
