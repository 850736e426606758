"""Issue 23: the eco task (``Dyn4HumveeEco-v0``) and its classical baseline, pure pursuit on the
pedals at the constant speed the time budget needs (dyn4_gym/agents/eco.py)."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

import dyn4_gym
from dyn4_gym.agents.eco import litres_per_100km, run_eco_baseline
from dyn4_gym.envs import ConfigError, EnvConfig, TaskCore

ECO = {k: v for k, v in dyn4_gym.ECO.items() if k != "engine"}


def test_the_eco_task_is_registered_and_passes_gymnasiums_checker():
    from gymnasium.utils.env_checker import check_env

    env = gym.make("Dyn4HumveeEco-v0")
    assert env.spec.max_episode_steps == 1200
    assert env.observation_space.shape == (32,) and env.action_space.shape == (3,)
    check_env(env.unwrapped, skip_render_check=True)
    assert env.unwrapped._runner.core.cfg.time_budget == 44.0


def test_late_steps_cost_the_time_terms_distance():
    """Past the budget every step costs target speed x control_dt (0.5 m); before it, nothing."""
    core = TaskCore(EnvConfig.from_dict(dict(ECO, dtype="float64", engine="torch", time_budget=0.2)))
    st = core.new_state(torch.arange(2), torch.zeros(2, dtype=torch.long))
    a = torch.tensor([[0.0, 0.3, 0.0]] * 2, dtype=torch.float64)
    late = []
    for _ in range(6):
        st, _, r, _, _, info = core.step(st, a)
        late.append(float(info["reward_terms"]["late"][0]))
        # the return is the fuel (in metres of lift), half the progress and the lateness
        t = info["reward_terms"]
        expect = t["fuel"] + 0.5 * t["progress"] + t["late"]
        assert torch.allclose(r, expect)
    assert late == [0.0, 0.0, 0.0, 0.0, -0.5, -0.5]  # 0.25 s > 0.2 s from the fifth step


def test_time_budget_is_checked():
    with pytest.raises(ConfigError, match="time_budget"):
        EnvConfig.from_dict({"time_budget": -1.0})
    with pytest.raises(ConfigError, match="time_budget"):
        EnvConfig.from_dict({"time_budget": "soon"})


def test_litres_per_100km():
    # 1 L of diesel is 0.832 kg x 42.8 MJ/kg; burned over 10 km that is 10 L/100 km
    assert litres_per_100km(0.832 * 42.8e6, 10_000.0) == pytest.approx(10.0)


@pytest.mark.slow
def test_the_constant_speed_baseline_arrives_within_the_budget():
    from dyn4_gym.agents.evaluation import VALIDATION_SEEDS

    r = run_eco_baseline(VALIDATION_SEEDS[:4], speed_scale=0.95)
    print(f"eco baseline: arrival {np.round(r.arrival, 1)} s, {np.round(r.litres_per_100km, 2)} L/100 km")
    assert r.in_budget.all()
    assert (r.litres_per_100km > 5.0).all() and (r.litres_per_100km < 30.0).all()  # measured 11.3-11.8
    # a finisher's return is half the course less its fuel in metres of lift (nothing late or failed)
    assert (r.returns < 200.0).all() and (r.returns > 100.0).all()


def test_the_tuned_scale_is_the_one_the_tuning_chose():
    import json
    import os

    from dyn4_gym.agents.eco import ECO_TUNED_SCALE

    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "eco_baseline.json")) as fh:
        assert json.load(fh)["chosen"] == {"speed_scale": ECO_TUNED_SCALE}


def test_the_coast_setting_is_the_one_the_tuning_chose():
    import json
    import os

    from dyn4_gym.agents.eco import ECO_COAST_TUNED

    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "eco_coast_baseline.json")) as fh:
        assert json.load(fh)["chosen"] == ECO_COAST_TUNED


def test_cruise_and_coast_releases_the_pedals_over_the_last_metres():
    """On both engines: the coasting policy drives as the constant-speed one until the car is
    within ``coast_m`` of the goal (by the env's own arc length), then releases both pedals and
    keeps steering; it needs the observed clock."""
    from dyn4_gym import ECO_CLOCK
    from dyn4_gym.agents.eco import coast_policy, constant_speed_policy
    from dyn4_gym.envs import EnvConfig

    coast_m = 60.0
    for engine in ("torch", "numba"):
        env = gym.make("Dyn4HumveeEco-v1", dtype="float64", engine=engine)
        cfg = env.unwrapped.config
        coast, cruise = coast_policy(cfg, 1.0, coast_m), constant_speed_policy(cfg, 1.0)
        obs, _ = env.reset(seed=20_003)
        goal = cfg.course.length - cfg.course.goal_margin
        s, released = float(env.unwrapped._runner.core.start_index()[2]), 0
        for _ in range(1200):
            o = torch.as_tensor(obs[None], dtype=torch.float32)
            a, b = coast(o)[0].numpy(), cruise(o)[0].numpy()
            assert a[0] == b[0]  # steering is the cruise policy's throughout
            if goal - s < coast_m - 0.5:
                assert (a[1:] == 0.0).all()
                released += 1
            elif goal - s > coast_m + 0.5:
                assert (a == b).all()
            obs, _, term, trunc, info = env.step(a)
            s = float(info["s"])
            if term or trunc:
                break
        assert info["success"] and released > 100  # about 7 s of coasting
    with pytest.raises(ValueError, match="observe_clock"):
        coast_policy(EnvConfig.from_dict({k: v for k, v in ECO_CLOCK.items() if k != "observe_clock"}), 1.0, 50.0)
    with pytest.raises(ValueError, match="coast_m"):
        coast_policy(EnvConfig.from_dict(ECO_CLOCK), 1.0, float("nan"))


@pytest.mark.slow
def test_cruise_and_coast_burns_less_than_constant_speed_in_the_budget():
    """The stronger classical bar (docs/env.md, "The eco task"): coasting the last 75 m at the
    target speed arrives within the budget on less fuel than the tuned constant speed."""
    from dyn4_gym.agents.eco import ECO_COAST_TUNED, ECO_TUNED_SCALE
    from dyn4_gym.agents.evaluation import VALIDATION_SEEDS

    seeds = VALIDATION_SEEDS[:4]
    coast = run_eco_baseline(seeds, **ECO_COAST_TUNED)
    const = run_eco_baseline(seeds, speed_scale=ECO_TUNED_SCALE)
    print(f"cruise and coast: arrival {np.round(coast.arrival, 2)} s, {np.round(coast.counted, 2)} L/100 km; "
          f"constant speed {np.round(const.counted, 2)}")
    assert coast.in_budget.all() and const.in_budget.all()
    assert (coast.counted < 0.92 * const.counted).all()  # measured 9.7-9.8 against 11.3-11.4


@pytest.mark.slow
def test_the_baseline_is_measured_by_the_evaluation_every_learner_gets():
    """``run_eco_baseline`` is ``evaluate`` (the Numba engine) with the eco task's clock: its
    per-course arrival and litres are the evaluation's, and the torch engine's float64 run of the
    same policy agrees to 1e-9."""
    import torch

    from dyn4_gym import ECO_CLOCK
    from dyn4_gym.agents.eco import constant_speed_policy
    from dyn4_gym.envs import EnvConfig, TaskCore

    seeds = (20_000, 20_001)
    r = run_eco_baseline(seeds, speed_scale=0.95)
    kw = {k: v for k, v in ECO_CLOCK.items() if k != "engine"} | {"dtype": "float64", "engine": "torch"}
    core = TaskCore(EnvConfig.from_dict(kw))
    policy = constant_speed_policy(core.cfg, 0.95)
    st = core.new_state(torch.tensor(seeds), torch.zeros(2, dtype=torch.long))
    obs, fuel, dist, arrival = core.observe(st), np.zeros(2), np.zeros(2), np.full(2, np.inf)
    for t in range(core.cfg.episode_steps):
        st, obs, _, term, trunc, info = core.step(st, policy(obs.float()).double())
        live = np.isinf(arrival)
        fuel += info["books"]["fuel"].numpy() * live
        dist += info["progress"].numpy() * live
        arrival[info["success"].numpy() & live] = (t + 1) * core.cfg.control_dt
        if np.isfinite(arrival).all():
            break
    assert r.arrival == pytest.approx(arrival, abs=1e-9) and r.in_budget.all()
    assert r.litres_per_100km == pytest.approx(litres_per_100km(fuel, dist), rel=1e-6)


# a nearly straight 60 m course (no steering needed) with a 5 s budget, coasting from 5 m/s: the
# car falls behind the schedule's pace from the start and arrives about 7 s late
_LATE = dict(ECO, dtype="float64", course={"length": 60.0, "lead_in": 55.0}, start_speed=5.0, time_budget=5.0,
             ground={"hills_amplitude": 0.0, "n_bumps": 0}, reward_weights={"late": 0.0, "schedule": 1.0})


def _coast(engine: str, env_id: str = "Dyn4HumveeEco-v0", **kw):
    """The schedule and late terms of each step of one coasting episode on ``engine`` (with the
    config's ``kw``), the final arc length and time, and the observations (the first the reset's)
    and arc lengths."""
    env = gym.make(env_id, **dict(_LATE, engine=engine, **kw))
    obs, _ = env.reset(seed=3)
    sched, late, seen, s = [], [], [obs], [float(env.unwrapped._runner.core.start_index()[2])]
    for t in range(1200):
        obs, _, term, trunc, info = env.step(np.array([0.0, 0.0, 0.0]))
        sched.append(info["reward_terms"]["schedule"])
        late.append(info["reward_terms"]["late"])
        seen.append(obs)
        s.append(float(info["s"]))
        if term or trunc:
            break
    assert info["success"], "the coasting car must reach the end"
    return np.array(sched), np.array(late), float(info["s"]), (t + 1) * 0.05, np.array(seen), np.array(s)


def test_the_schedule_term_is_late_paid_as_the_car_falls_behind():
    """``schedule`` telescopes: its steps sum to minus the target speed times the lateness at
    arrival behind the uniform pace (rewards.behind), which is the late term's sum to within one
    step; it is paid from the first step the car is behind, not only after the budget; and both
    engines compute it alike."""
    from dyn4_gym.envs.rewards import behind

    sched, late, s_end, t_end, _, _ = _coast("numba")
    goal = 60.0 - 2.0
    t_end, s_end = torch.tensor(t_end, dtype=torch.float64), torch.tensor(s_end, dtype=torch.float64)
    expect = -10.0 * float(behind(t_end, s_end, 5.0, goal))
    assert sched.sum() == pytest.approx(expect, abs=1e-9)
    assert late.sum() < -10.0  # arrived late, so it is not a vacuous check
    assert abs(sched.sum() - late.sum()) <= 0.5 + 1e-9  # one step's time at the target speed
    first_late = int(np.argmax(late < 0))
    assert (sched[:first_late] < 0).any()  # paid before the budget runs out
    assert (sched <= 1e-12).all()  # coasting never gains on the pace
    torch_sched, torch_late, _, _, _, _ = _coast("torch")
    np.testing.assert_allclose(torch_sched, sched, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(torch_late, late)


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_eco_v1_observes_the_clock_the_schedule_term_pays_on(engine):
    """``Dyn4HumveeEco-v1`` (``observe_clock``) observes the time left to the budget and the lead
    over the uniform pace, which is minus the schedule term's ``behind`` when behind: so each
    step's schedule cost is the target speed times the fall of the observed lead (float32
    rounding), and the observation is the same as -v0's otherwise."""
    sched, _, _, t_end, obs, s = _coast(engine, "Dyn4HumveeEco-v1")
    names = gym.make("Dyn4HumveeEco-v1").unwrapped._runner.core.obs_names
    assert names[:-2] == gym.make("Dyn4HumveeEco-v0").unwrapped._runner.core.obs_names
    t = np.arange(len(obs)) * 0.05
    time_left, lead = obs[:, names.index("time_left")] * 10.0, obs[:, names.index("lead")] * 5.0
    np.testing.assert_allclose(time_left, 5.0 - t, atol=1e-5)
    np.testing.assert_allclose(lead, s * (5.0 / 58.0) - t, atol=1e-5)
    assert lead[-1] < -5.0 and time_left[-1] < 0  # late at arrival, past the budget: not clipped
    lag = np.maximum(-lead.astype(np.float64), 0.0)
    np.testing.assert_allclose(sched, -10.0 * np.diff(lag), atol=1e-4)
    v0 = _coast(engine)[4]
    np.testing.assert_array_equal(v0, obs[:, :-2])


def test_a_schedule_margin_moves_the_schedule_pace_and_nothing_else():
    """``schedule_margin`` [s]: the schedule term's pace reaches the goal that long before the
    budget, so its steps sum to minus the target speed times the lateness against budget less
    margin; the late term and the observed clock stay on the budget itself; both engines alike."""
    from dyn4_gym.envs.rewards import behind

    base = _coast("numba", "Dyn4HumveeEco-v1")
    got = {engine: _coast(engine, "Dyn4HumveeEco-v1", schedule_margin=1.5) for engine in ("numba", "torch")}
    sched, late, s_end, t_end, obs, _ = got["numba"]
    t_end, s_end = torch.tensor(t_end, dtype=torch.float64), torch.tensor(s_end, dtype=torch.float64)
    assert sched.sum() == pytest.approx(-10.0 * float(behind(t_end, s_end, 5.0 - 1.5, 58.0)), abs=1e-9)
    assert sched.sum() < base[0].sum() - 10.0  # 1.5 s more behind: 15 m more, less what the pace shift moves
    np.testing.assert_array_equal(late, base[1])
    np.testing.assert_array_equal(obs, base[4])
    np.testing.assert_allclose(got["torch"][0], sched, rtol=0, atol=1e-9)
    for bad, match in ((dict(time_budget=None), "less than a time_budget"), (dict(schedule_margin=44.0), "less than"),
                       (dict(schedule_margin=-1.0), "schedule_margin")):
        with pytest.raises(ConfigError, match=match):
            EnvConfig.from_dict({**ECO, "schedule_margin": 1.0, **bad})


def test_the_clock_needs_a_budget():
    with pytest.raises(ConfigError, match="observe_clock needs a time_budget"):
        EnvConfig.from_dict(dict(ECO, time_budget=None, observe_clock=True))
    with pytest.raises(ConfigError, match="observe_clock has the wrong type"):
        EnvConfig.from_dict(dict(ECO, observe_clock=1))
    with pytest.raises(ConfigError, match="observe_clock must be true or false"):  # a config built directly
        dataclasses.replace(EnvConfig.from_dict(ECO), observe_clock=1).validate()


def test_the_schedule_term_has_a_gradient_to_drive_when_behind():
    """Behind the pace, more throttle now is less lateness: the term's gradient through the plant
    (torch engine, float64) is positive in the throttle and matches central differences."""
    core = TaskCore(EnvConfig.from_dict(dict(_LATE, engine="torch")))

    def total(throttle):
        st = core.new_state(torch.tensor([3]), torch.zeros(1, dtype=torch.long))
        out = 0.0
        for _ in range(8):
            a = torch.stack((torch.zeros(()), throttle, torch.zeros(()))).to(torch.float64)[None]
            st, _, _, _, _, info = core.step(st, a)
            out = out + info["reward_terms"]["schedule"][0]
        return out

    th = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(total(th), th)
    h = 1e-5
    with torch.no_grad():
        fd = (total(th + h) - total(th - h)) / (2 * h)
    assert float(g) > 0.0
    assert float(g) == pytest.approx(float(fd), rel=1e-5)
    # no budget, no schedule
    core = TaskCore(EnvConfig.from_dict(dict(_LATE, engine="torch", time_budget=None)))
    st = core.new_state(torch.tensor([3]), torch.zeros(1, dtype=torch.long))
    st, _, _, _, _, info = core.step(st, torch.zeros(1, 3, dtype=torch.float64))
    assert float(info["reward_terms"]["schedule"][0]) == 0.0
