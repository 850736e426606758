"""The aggregate figures (dyn4_gym/agents/stats.py): IQM, rliable's stratified bootstrap intervals,
paired comparisons, the finish rate and the penalised mean (issue 44)."""

import numpy as np
import pytest

from dyn4_gym.agents.stats import bootstrap_ci, finish_rate, gain, iqm, paired_ci, penalised_mean


def test_iqm_is_the_mean_of_the_middle_half():
    rng = np.random.default_rng(0)
    for n in (4, 8, 16, 40):
        x = rng.normal(size=n)
        s = np.sort(x)
        assert iqm(x) == pytest.approx(s[n // 4: 3 * n // 4].mean(), rel=1e-12)
    assert iqm([1, 2, 3, 4, 5]) == pytest.approx(3.0)  # fractional weights: 0.75, 1, 0.75
    assert iqm([7.0]) == 7.0
    assert iqm([0, 0, 0, 100]) == 0.0  # an outlier does not move it


def test_unfinished_courses_count_as_infinitely_slow():
    assert iqm([10.0, 11.0, 12.0, np.inf]) == pytest.approx(11.5)  # one in four is trimmed
    assert iqm([10.0, np.inf, np.inf, np.inf]) == np.inf
    with pytest.raises(ValueError):
        iqm([])


def test_bootstrap_interval_holds_the_iqm_and_shrinks_with_more_runs():
    rng = np.random.default_rng(1)
    small, large = rng.normal(20, 2, 8), rng.normal(20, 2, 64)
    lo_s, hi_s = bootstrap_ci(small)
    lo_l, hi_l = bootstrap_ci(large)
    assert lo_s <= iqm(small) <= hi_s and lo_l <= iqm(large) <= hi_l
    assert hi_l - lo_l < hi_s - lo_s
    assert bootstrap_ci(small, seed=3) == bootstrap_ci(small, seed=3)  # seeded


def test_a_two_dimensional_bootstrap_draws_courses_and_seeds_within_them():
    """Rows are training seeds, columns courses (rliable's stratified bootstrap with its tasks
    drawn too): an interval over a table whose seeds differ per course is wider than over one
    seed's courses, and a table holding over a quarter of infinities has an infinite IQM."""
    rng = np.random.default_rng(2)
    courses = rng.normal(20.0, 0.5, 16)
    table = courses[None, :] + rng.normal(0.0, 3.0, (6, 16))  # seeds scatter every course
    lo1, hi1 = bootstrap_ci(courses[None, :])
    lo6, hi6 = bootstrap_ci(table)
    assert lo6 <= iqm(table) <= hi6 and lo1 <= iqm(courses) <= hi1
    assert hi6 - lo6 > 2 * (hi1 - lo1)  # the seeds' spread is in it
    assert bootstrap_ci(courses) == bootstrap_ci(courses[None, :])  # 1-D: one run's courses
    late = np.where(rng.random((4, 16)) < 0.5, np.inf, 20.0)
    assert iqm(late) == np.inf and bootstrap_ci(late)[1] == np.inf
    for bad in (np.zeros((2, 2, 2)), np.zeros((0, 3)), []):
        with pytest.raises(ValueError, match="non-empty"):
            bootstrap_ci(bad)
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_ci([1.0, np.nan])


def test_the_intervals_are_rliables_own():
    """Given the same seed for numpy's global stream, rliable's get_interval_estimates (IQM,
    percentile, tasks drawn) and its StratifiedBootstrap over two tables (a paired gain) give the
    numbers bootstrap_ci and paired_ci give."""
    rly = pytest.importorskip("rliable.library")
    metrics = pytest.importorskip("rliable.metrics")
    rng = np.random.default_rng(5)
    a, b = rng.normal(17.0, 1.0, (10, 16)), rng.normal(18.0, 1.0, (10, 16))
    np.random.seed(7)
    _, ci = rly.get_interval_estimates({"a": a}, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=300,
                                       task_bootstrap=True)
    assert np.allclose(ci["a"].ravel(), bootstrap_ci(a, n_boot=300, seed=7), rtol=1e-12)
    np.random.seed(7)
    bs = rly.StratifiedBootstrap(a, b, task_bootstrap=True)
    ref = bs.conf_int(lambda x, y: np.array([1 - metrics.aggregate_iqm(x) / metrics.aggregate_iqm(y)]), reps=300,
                      method="percentile").ravel()
    assert np.allclose(ref, paired_ci(a, b, n_boot=300, seed=7)[1:], rtol=1e-12)


def test_paired_intervals_see_what_unpaired_ones_miss():
    """Two methods on the same courses, one 2 % faster on every course while the courses spread
    by 10 %: the unpaired intervals overlap, the paired gain's lies above 0 around 2 %; the same
    method against itself gains 0; a deterministic controller (one row) pairs with ten seeds."""
    rng = np.random.default_rng(3)
    courses = rng.normal(20.0, 2.0, 16)
    b = courses[None, :] + rng.normal(0.0, 0.05, (10, 16))
    a = 0.98 * b
    lo_a, hi_a = bootstrap_ci(a)
    lo_b, hi_b = bootstrap_ci(b)
    assert hi_a > lo_b  # unpaired: the intervals overlap
    g, lo, hi = paired_ci(a, b)
    assert g == pytest.approx(0.02, abs=1e-3) and 0.0 < lo < 0.02 < hi
    assert paired_ci(b, b)[0] == 0.0 and paired_ci(b, b)[1:] == (0.0, 0.0)
    g1, lo1, hi1 = paired_ci(a, courses)  # the classical's one run, repeated to ten
    assert lo1 <= g1 <= hi1
    with pytest.raises(ValueError, match="pairs courses"):
        paired_ci(a, courses[:8])
    with pytest.raises(ValueError, match="runs"):
        paired_ci(a[:3], b[:4])


def test_the_penalised_mean_and_the_finish_rate_hide_no_crash():
    """A crash on a quarter of the courses vanishes from the IQM (trimmed), not from the mean at
    the truncation time; the finish rate has its own interval; gain's conventions for infinities."""
    fast = np.array([16.0] * 12 + [np.inf] * 4)
    steady = np.array([18.0] * 16)
    assert iqm(fast) < iqm(steady)  # the IQM ranks the crashing method first
    assert penalised_mean(fast, 60.0) == pytest.approx((12 * 16 + 4 * 60) / 16)
    assert penalised_mean(fast, 60.0) > penalised_mean(steady, 60.0)
    assert finish_rate(fast) == 0.75
    lo, hi = bootstrap_ci(fast, stat=finish_rate)
    assert lo < 0.75 < hi and hi <= 1.0
    assert gain(np.inf, 10.0) == -np.inf and gain(10.0, np.inf) == 1.0 and np.isnan(gain(np.inf, np.inf))
    assert gain(9.0, 10.0) == pytest.approx(0.1)


def test_the_task_score_ranks_as_the_tasks_at_the_limits_do():
    """evaluation.task_score (what agents/tune.py's ASHA ranks with --metric task) is finite and
    orders per-course metrics as the benchmark does: a lower finite IQM is better, any finite IQM
    beats an infinite one, and among infinite ones more counted courses are better."""
    from dyn4_gym.agents.evaluation import task_score

    fast, slow = [17.0, 17.5, 18.0, 18.5], [19.0, 19.5, 20.0, 20.5]
    one_out, half_out, all_out = [17.0, 17.5, 18.0, np.inf], [17.0, 17.5, np.inf, np.inf], [np.inf] * 4
    scores = [task_score(x) for x in (fast, one_out, slow, half_out, all_out)]
    assert all(np.isfinite(scores)) and scores == sorted(scores, reverse=True)
    assert task_score(fast) == pytest.approx(1.0 + 1.0 / (1.0 + iqm(fast)))
    assert task_score(half_out) == pytest.approx(0.5) and task_score(all_out) == 0.0
    for bad in ([np.nan, 1.0], [-1.0, 2.0]):
        with pytest.raises(ValueError, match="task_score"):
            task_score(bad)


def test_the_task_metric_is_time_to_finish_or_litres_within_the_budget():
    """evaluation.task_metric: the race's arrival time per course; with a time budget, the
    litres where the car arrived in time and inf where late or never; a budget without the
    driver's fuel figures is refused."""
    from dyn4_gym.agents.evaluation import task_metric

    class Ev:
        arrival = np.array([40.0, 45.0, np.inf])
        litres = np.array([10.0, 9.0, 8.0])

    assert task_metric(Ev, None).tolist() == [40.0, 45.0, np.inf]
    assert task_metric(Ev, 44.0).tolist() == [10.0, np.inf, np.inf]
    Ev.litres = None
    with pytest.raises(ValueError, match="driver"):
        task_metric(Ev, 44.0)
