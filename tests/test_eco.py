"""Issue 23: the eco task (``Dyn4HumveeEco-v0``) and its classical baseline, pure pursuit on the
pedals at the constant speed the time budget needs (dyn4_gym/agents/eco.py)."""

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


@pytest.mark.slow
def test_the_baseline_is_measured_by_the_evaluation_every_learner_gets():
    """``run_eco_baseline`` is ``evaluate`` (the Numba engine) with the eco task's clock: its
    per-course arrival and litres are the evaluation's, and the torch engine's float64 run of the
    same policy agrees to 1e-9."""
    import torch

    from dyn4_gym import ECO
    from dyn4_gym.agents.eco import constant_speed_policy
    from dyn4_gym.envs import EnvConfig, TaskCore

    seeds = (20_000, 20_001)
    r = run_eco_baseline(seeds, speed_scale=0.95)
    kw = {k: v for k, v in ECO.items() if k != "engine"} | {"dtype": "float64", "engine": "torch"}
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
