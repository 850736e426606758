"""The driver variant of the env (``action="driver"``, ``Dyn4HumveeDriver-v1``): the checkers, the
books in the evaluation, bad input. Both engines' equality on it is in tests/test_engine_env.py."""

import warnings

import gymnasium as gym
import numpy as np
import pytest

import dyn4_gym  # noqa: F401  (registers the ids)
from dyn4_gym.envs import ConfigError, Dyn4Env

def test_driver_id_passes_the_checkers():
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check

    env = gym.make("Dyn4HumveeDriver-v1")
    assert env.unwrapped.engine == "numba" and env.spec.kwargs["action"] == "driver"
    assert env.action_space.shape == (3,) and env.observation_space.shape == (32,)
    assert env.action_space.low.tolist() == [-1.0, 0.0, 0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", ".*is out of date", DeprecationWarning)  # an older id (issue 44)
        check_env(env.unwrapped, skip_render_check=True)
        # the pedals' box is [0, 1] (their travel); SB3 only recommends a symmetric box, and
        # RescaleAction gives one without a warning
        warnings.filterwarnings("ignore", message="We recommend you to use a symmetric")
        sb3_check(Dyn4Env(action="driver"), warn=True)
        warnings.resetwarnings()
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", ".*is out of date", DeprecationWarning)  # an older id (issue 44)
        sb3_check(gym.wrappers.RescaleAction(Dyn4Env(action="driver"), np.full(3, -1, np.float32), np.ones(3, np.float32)),
                  warn=True)
    v = gym.make_vec("Dyn4HumveeDriver-v1", num_envs=3)
    obs, _ = v.reset(seed=1)
    obs, r, te, tr, info = v.step(v.action_space.sample())
    assert obs.shape == (3, 32) and {"fuel", "powertrain", "brakes", "wheelspin"} <= set(info["books"])


def test_driver_env_bad_input():
    env = Dyn4Env(action="driver")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(2))
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.array([0.0, np.nan, 0.0]))
    with pytest.raises(ConfigError, match="action"):
        env.reset(options={"action": "accel"})
    with pytest.raises(ConfigError, match="action"):
        Dyn4Env(action="pedals")
    # an accel env's default weights never charge fuel, and it has no powertrain books
    a = Dyn4Env()
    a.reset(seed=0)
    *_, info = a.step(np.array([0.0, 0.5]))
    assert info["reward_terms"]["fuel"] == 0.0 and "fuel" not in info["books"]


def test_evaluation_reports_litres_per_100km_for_the_driver():
    from dyn4_gym.agents.evaluation import evaluate
    from dyn4_gym.agents.loading import load_policy

    policy, _, kw = load_policy("classical", {"action": "driver"})
    res = evaluate(policy, kw, seeds=(10_000, 10_001), max_steps=200)
    assert 5.0 < res.row()["litres_per_100km"] < 30.0
    assert res.books["fuel"] > res.books["powertrain"] > 0 and res.books["drive"] > 0
    acc, _, kw = load_policy("classical", {})
    assert "litres_per_100km" not in evaluate(acc, kw, seeds=(10_000,), max_steps=20).row()
