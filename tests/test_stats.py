"""The aggregate figures (dyn4_gym/agents/stats.py): IQM and its bootstrap interval."""

import numpy as np
import pytest

from dyn4_gym.agents.stats import bootstrap_ci, iqm


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


def test_a_two_dimensional_bootstrap_resamples_seeds_and_courses():
    """Rows are training seeds, columns courses: an interval over a table whose rows differ is
    wider than over one row's courses alone, one row gives the courses' interval exactly, and a
    table holding over a quarter of infinities has an infinite IQM."""
    rng = np.random.default_rng(2)
    courses = rng.normal(20.0, 0.5, 16)
    table = courses[None, :] + rng.normal(0.0, 3.0, (6, 1))  # seeds shift every course
    lo1, hi1 = bootstrap_ci(courses[None, :])
    lo6, hi6 = bootstrap_ci(table)
    assert lo6 <= iqm(table) <= hi6 and lo1 <= iqm(courses) <= hi1
    assert hi6 - lo6 > 3 * (hi1 - lo1)  # the seeds' spread is in it
    late = np.where(rng.random((4, 16)) < 0.5, np.inf, 20.0)
    assert iqm(late) == np.inf and bootstrap_ci(late)[1] == np.inf
    for bad in (np.zeros((2, 2, 2)), np.zeros((0, 3)), []):
        with pytest.raises(ValueError, match="1-D or 2-D"):
            bootstrap_ci(bad)


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
