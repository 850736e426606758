"""Aggregate figures the way RL papers must report them (Agarwal et al., "Deep Reinforcement
Learning at the Edge of the Statistical Precipice", NeurIPS 2021): the interquartile mean over
runs; rliable's stratified bootstrap intervals, paired where two methods ran on the same
courses; the finish rate and a mean that trims no failure, beside the IQM (issue 44)."""

from __future__ import annotations

import numpy as np

__all__ = ["iqm", "bootstrap_ci", "paired_ci", "gain", "finish_rate", "penalised_mean"]


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


def _quantile(values: np.ndarray, q: float) -> float:
    """numpy's (and arch's, so rliable's) linear-interpolation quantile, where an infinite value
    at either neighbour makes the end infinite instead of NaN."""
    v = np.sort(values)
    h = (v.size - 1) * q
    i = int(np.floor(h))
    w = h - i
    if w == 0.0 or i + 1 >= v.size:
        return float(v[i])
    if np.isinf(v[i]) or np.isinf(v[i + 1]):
        return float(v[i + 1]) if np.isinf(v[i + 1]) else float(v[i])
    return float(v[i] + w * (v[i + 1] - v[i]))


def _table(x, name: str) -> np.ndarray:
    v = np.asarray(x, dtype=np.float64)
    if v.ndim == 1:
        v = v[None, :]
    if v.ndim != 2 or v.size == 0:
        raise ValueError(f"{name} takes a non-empty (runs, courses) or (courses,) array, got shape {v.shape}")
    if np.isnan(v).any():
        raise ValueError(f"{name}: NaN in the scores (an unfinished course is inf, not NaN)")
    return v


def _stratified(tables: list[np.ndarray], stat, compare, n_boot: int, level: float, seed: int,
                task_bootstrap: bool) -> tuple[float, float]:
    """The percentile interval of ``compare(stat(t1), stat(t2), ...)`` over stratified resamples
    that draw the same indices for every table (so two tables on the same courses are paired)."""
    n, m = tables[0].shape
    rs = np.random.RandomState(seed)  # the legacy stream, in rliable's order (tests/test_stats.py)
    out = np.empty(n_boot)
    for k in range(n_boot):
        runs = rs.choice(n, (n, m), replace=True)  # seeds, drawn within each course
        tasks = rs.choice(m, (1, m), replace=True) if task_bootstrap else np.arange(m)[None, :]
        out[k] = compare(*(stat(t[runs, tasks]) for t in tables))
    a = (1.0 - level) / 2.0
    return _quantile(out, a), _quantile(out, 1.0 - a)


def bootstrap_ci(x, stat=iqm, level: float = 0.95, n_boot: int = 2000, seed: int = 0,
                 task_bootstrap: bool = True) -> tuple[float, float]:
    """rliable's stratified bootstrap interval (Agarwal et al. 2021; ``rliable.library.
    StratifiedBootstrap``) of ``stat`` over the scores ``x``: a 2-D ``x`` is (runs, courses), a
    training seed's evaluation per row; a 1-D ``x`` is one run's courses (a deterministic
    controller's). Each resample draws the courses with replacement (``task_bootstrap``, rliable's
    option for tasks drawn from a larger population, as held-out courses are) and, within each
    course drawn, the runs with replacement; the interval is the percentiles of ``stat`` over the
    resamples, interpolated as numpy's and rliable's are. Given ``np.random.seed(seed)`` rliable's
    own ``get_interval_estimates(..., task_bootstrap=True, method="percentile")`` gives the same
    numbers (tests/test_stats.py checks it where rliable is installed). An infinite statistic
    (too many unfinished courses for an IQM) stays infinite at its end of the interval."""
    return _stratified([_table(x, "bootstrap_ci")], stat, lambda v: v, n_boot, level, seed, task_bootstrap)


def gain(a: float, b: float) -> float:
    """How much lower ``a`` is than ``b``, as a share of ``b`` (time or fuel: lower is better):
    ``1 - a / b``. ``-inf`` where ``a`` is infinite and ``b`` finite; NaN where both are."""
    if np.isinf(a) and np.isinf(b):
        return float("nan")
    if np.isinf(a):
        return float("-inf")
    if np.isinf(b):
        return 1.0
    return float(1.0 - a / b)


def paired_ci(a, b, stat=iqm, compare=gain, level: float = 0.95, n_boot: int = 2000, seed: int = 0,
              task_bootstrap: bool = True) -> tuple[float, float, float]:
    """The point figure and stratified bootstrap interval of ``compare(stat(a), stat(b))`` for two
    methods on the **same courses** (columns): each resample draws one set of courses for both,
    and within each course the runs (rliable's ``StratifiedBootstrap`` with both arrays as its
    positional data). A one-run table (a deterministic controller) is repeated to the other's
    run count, which leaves it unchanged under resampling. With :func:`gain`, an interval above
    0 says ``a`` is lower (faster, thirstier-less) than ``b`` on these courses."""
    ta, tb = _table(a, "paired_ci"), _table(b, "paired_ci")
    if ta.shape[1] != tb.shape[1]:
        raise ValueError(f"paired_ci pairs courses: {ta.shape[1]} against {tb.shape[1]} columns")
    if ta.shape[0] != tb.shape[0]:
        if 1 not in (ta.shape[0], tb.shape[0]):
            raise ValueError(f"paired_ci: {ta.shape[0]} runs against {tb.shape[0]}; one table must have one run "
                             "or both the same count")
        n = max(ta.shape[0], tb.shape[0])
        ta, tb = np.repeat(ta, n // ta.shape[0], axis=0), np.repeat(tb, n // tb.shape[0], axis=0)
    lo, hi = _stratified([ta, tb], stat, compare, n_boot, level, seed, task_bootstrap)
    return float(compare(stat(ta), stat(tb))), lo, hi


def finish_rate(x) -> float:
    """The share of the scores that count (finite: finished, or in the budget)."""
    return float(np.isfinite(np.asarray(x, dtype=np.float64)).mean())


def penalised_mean(x, cap: float) -> float:
    """The plain mean with every uncounted score (infinite) at ``cap`` (for the race, the
    truncation time): unlike the IQM it trims nothing, so each crash costs its share."""
    v = np.asarray(x, dtype=np.float64)
    return float(np.where(np.isfinite(v), np.minimum(v, cap), cap).mean())
