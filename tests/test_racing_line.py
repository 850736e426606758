"""Issue 44: the strongest classical race driver, a minimum-curvature racing line inside the
corridor (dyn4_gym/agents/racing_line.py) with the minimum-time profile over it, tracked by pure
pursuit on the line (dyn4_gym/agents/race.py, ``RacingLine``)."""

import json
import os

import numpy as np
import pytest
import torch

import dyn4_gym
from dyn4_gym.agents.evaluation import VALIDATION_SEEDS
from dyn4_gym.agents.race import (HUMVEE_ENVELOPE, RACE_LINE_TUNED, RACE_TUNED, RacingLine, RacingLineParams,
                                  run_race_baseline, speed_profile)
from dyn4_gym.agents.racing_line import (curvature_system, line_geometry, min_curvature_offsets, normals,
                                        solve_box_qp)
from dyn4_gym.envs import EnvConfig, TaskCore

RACE = {k: v for k, v in dyn4_gym.RACE.items() if k != "engine"}


def _courses(n=3):
    core = TaskCore(EnvConfig.from_dict(dict(RACE, dtype="float64", engine="torch")))
    st = core.new_state(torch.tensor(VALIDATION_SEEDS[:n]), torch.zeros(n, dtype=torch.long))
    return core, st


def _kkt(h, f, lo, hi, x, tol=1e-7):
    """The box QP's optimality conditions at ``x``: feasible; the gradient 0 where free, <= 0 at an
    upper bound, >= 0 at a lower one (relative to the gradient's scale)."""
    g = (h @ x + f) / np.max(np.abs(f)).clip(1e-300)
    assert np.all(x >= lo - 1e-12) and np.all(x <= hi + 1e-12)
    free = (x > lo + 1e-9) & (x < hi - 1e-9)
    assert np.all(np.abs(g[free]) < tol)
    assert np.all(g[(x >= hi - 1e-9) & (lo < hi)] < tol) and np.all(g[(x <= lo + 1e-9) & (lo < hi)] > -tol)


def test_the_box_qp_meets_its_optimality_conditions_and_matches_scipy():
    rng = np.random.default_rng(0)
    for _ in range(10):
        n = int(rng.integers(5, 60))
        m = rng.normal(size=(n + 3, n))
        h, f = m.T @ m, rng.normal(size=n) * 5
        lo, hi = -rng.uniform(0.1, 1.0, n), rng.uniform(0.1, 1.0, n)
        x = solve_box_qp(h, f, lo, hi, ridge=0.0)
        _kkt(h, f, lo, hi, x)
        scipy_opt = pytest.importorskip("scipy.optimize")
        # the same problem as bounded least squares: |m x - y|^2 with m' y = -f
        y = np.linalg.lstsq(m.T, -f, rcond=None)[0]
        ref = scipy_opt.lsq_linear(m, y, bounds=(lo, hi), tol=1e-12).x
        q = lambda v: 0.5 * v @ h @ v + f @ v  # noqa: E731
        assert q(x) <= q(ref) + 1e-9 * abs(q(ref)) and np.allclose(x, ref, atol=1e-6)


def test_bad_boxes_are_refused():
    h = np.eye(3)
    with pytest.raises(ValueError, match="lo <= hi"):
        solve_box_qp(h, np.zeros(3), np.ones(3), np.zeros(3))
    with pytest.raises(ValueError, match="finite"):
        solve_box_qp(h, np.zeros(3), -np.inf, np.ones(3))
    with pytest.raises(ValueError, match="bound"):
        min_curvature_offsets(np.zeros((5, 2)), np.zeros(5), -1.0)


def test_the_line_stays_in_the_corridor_and_bends_less_than_the_centre_line():
    """On race courses: every offset inside ``|n| <= half_width - safety``, the first point on the
    centre line where the car starts, the offsets optimal (KKT), and the line's summed squared
    curvature well below the centre line's; a straight needs no offset."""
    core, st = _courses()
    bound = core.cfg.course.half_width - 1.0
    for b in range(st.course_xy.shape[0]):
        xy, hd = st.course_xy[b].numpy(), st.course_heading[b].numpy()
        n = min_curvature_offsets(xy, hd, bound)
        assert n[0] == 0.0 and np.all(np.abs(n) <= bound + 1e-12)
        h, f = curvature_system(xy, normals(hd))
        lo, hi = np.full(n.size, -bound), np.full(n.size, bound)
        lo[0] = hi[0] = 0.0
        _kkt(h + 1e-10 * np.max(np.diag(h)) * np.eye(n.size), f, lo, hi, n, tol=1e-6)
        line = xy + n[:, None] * normals(hd)
        # every line point within the corridor of the centre polyline (its distance to the nearest point)
        d = np.min(np.hypot(*(line[:, None, :] - xy[None, :, :]).transpose(2, 0, 1)), axis=1)
        assert np.all(d <= core.cfg.course.half_width - 1.0 + 1e-6)
        k_centre, k_line = line_geometry(xy)[2], line_geometry(line)[2]
        assert np.sum(k_line**2) < 0.6 * np.sum(k_centre**2)
    straight = np.stack((np.arange(50.0), np.zeros(50)), -1)
    assert np.allclose(min_curvature_offsets(straight, np.zeros(50), 3.0), 0.0, atol=1e-9)


def test_the_profile_on_the_line_never_asks_more_than_the_envelope():
    """The planned speed at each line point keeps the lateral acceleration inside ``margin`` of
    the least friction under the car's footprint there (read from the ground at the line, not the
    centre line), scaled by the load the hills' vertical curvature leaves on the tires."""
    import math

    from dyn4_gym.agents.race import FOOTPRINT, _footprint_mean, _footprint_min, _second_derivative

    core, st = _courses(2)
    agent = RacingLine(core, RacingLineParams(margin=0.9))
    v = agent.plan(st)
    mu, z = (t.numpy() for t in st.terrain(torch.as_tensor(agent.line)))
    k = int(math.ceil(FOOTPRINT / core.cfg.course.spacing))
    mu, z = _footprint_min(mu, k), _footprint_mean(z, k)
    assert np.all(mu <= st.terrain(torch.as_tensor(agent.line))[0].numpy())
    for b in range(v.shape[0]):
        _, ds, kappa = line_geometry(agent.line[b])
        load = np.maximum(1.0 + v[b] ** 2 * _second_derivative(z[b], ds) / 9.81, 0.0)
        assert np.all(v[b] ** 2 * np.abs(kappa) <= 0.9 * HUMVEE_ENVELOPE.lateral(mu[b]) * load * (1 + 1e-9))
        assert np.isclose(agent.arc[b, -1], np.sum(ds))


def test_a_crest_caps_the_speed_below_take_off():
    """Straight and level but for a crest of vertical curvature -0.01 /m: the profile stays under
    the take-off speed ``sqrt(g / 0.01)`` = 31.3 m/s there, where the level profile reaches 40."""
    n = 600
    zpp = np.zeros(n)
    zpp[400:420] = -0.01
    flat = speed_profile(np.zeros(n), np.full(n, 0.8), 1.0, 10.0, HUMVEE_ENVELOPE, 0.9)
    crest = speed_profile(np.zeros(n), np.full(n, 0.8), 1.0, 10.0, HUMVEE_ENVELOPE, 0.9, zpp=zpp)
    assert np.all(crest[400:420] <= np.sqrt(9.81 / 0.01) + 1e-9) and flat[400:420].min() > 33.0
    assert np.array_equal(crest[:300], flat[:300])  # far before the crest, the same


def test_a_corridor_without_room_for_the_line_is_refused():
    core, _ = _courses(1)
    with pytest.raises(ValueError, match="safety"):
        RacingLine(core, RacingLineParams(safety=core.cfg.course.half_width + 0.1))
    driver = TaskCore(EnvConfig.from_dict(dict(RACE, action="driver", dtype="float64", engine="torch")))
    with pytest.raises(ValueError, match="accel"):
        RacingLine(driver)


@pytest.mark.slow
def test_the_racing_line_finishes_and_beats_the_centre_line_baseline():
    """With its tuned setting, on four validation courses: every course finished, each faster than
    the centre-line baseline (``RACE_TUNED``), and the car's CG never off the corridor."""
    seeds = VALIDATION_SEEDS[:4]
    line = run_race_baseline(seeds, params=RACE_LINE_TUNED)
    centre = run_race_baseline(seeds, params=RACE_TUNED)
    assert line.finished.all() and centre.finished.all()
    assert np.all(line.time < centre.time)
    assert line.lines.shape[0] == 4


def test_the_tuned_setting_is_the_one_the_tuning_chose():
    """``RACE_LINE_TUNED`` is docs/race_line_baseline.json's choice (benchmarks/baselines.py race_line)."""
    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "race_line_baseline.json")) as fh:
        out = json.load(fh)
    assert out["chosen"] == {k: getattr(RACE_LINE_TUNED, k) for k in out["chosen"]}
    assert len(out["tuning"]) == 24 and out["held_out"]["finished"] > 0.9
