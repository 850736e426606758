"""The driver variant of the env (``action="driver"``, ``Dyn4HumveeDriver-v0``): both engines one
task (1e-9, float64, with the fuel term weighted), the checkers, the books, bad input."""

import warnings

import gymnasium as gym
import numpy as np
import pytest

import dyn4_gym
from dyn4_gym.envs import ConfigError, Dyn4Env, Dyn4VectorEnv

LINES = ("supplied", "dissipated", "tire", "residual", "fuel", "powertrain", "engine", "converter", "driveline",
         "drive", "brakes", "wheelspin")
TERMS = ("progress", "speed", "energy", "fuel", "action_rate", "termination")


def _drive(env, n_steps, n, seed=0):
    rng = np.random.default_rng(seed)
    out = {"obs": [], "reward": [], "term": [], "trunc": [], "books": [], "terms": []}
    obs, _ = env.reset(seed=seed)
    out["obs"].append(obs)
    for _ in range(n_steps):
        a = rng.normal([0.0, 0.55, 0.05], [0.6, 0.4, 0.2], (n, 3)).astype(np.float32)  # outside the box too
        obs, r, te, tr, info = env.step(a)
        out["obs"].append(obs)
        out["reward"].append(r)
        out["term"].append(te)
        out["trunc"].append(tr)
        books, terms = info.get("books", {}), info.get("reward_terms", {})
        out["books"].append(np.stack([books.get(k, np.zeros(n)) for k in LINES], -1))
        out["terms"].append(np.stack([terms.get(k, np.zeros(n)) for k in TERMS], -1))
    return {k: np.asarray(v) for k, v in out.items()}


@pytest.mark.parametrize("task", ["default", "flat"])
def test_driver_variant_is_the_same_on_both_engines(task):
    kw = dict(action="driver", dtype="float64", episode_steps=150, reward_weights={"fuel": 1.0})
    if task == "flat":
        kw["ground"] = dict(dyn4_gym.FLAT_GROUND)
    nb = _drive(Dyn4VectorEnv(num_envs=4, engine="numba", **kw), 600, 4)
    tc = _drive(Dyn4VectorEnv(num_envs=4, engine="torch", **kw), 600, 4)
    assert (nb["term"] | nb["trunc"]).sum() >= 4
    assert np.array_equal(nb["term"], tc["term"]) and np.array_equal(nb["trunc"], tc["trunc"])
    d = np.abs(nb["obs"].astype(np.float64) - tc["obs"]) / np.maximum(np.abs(tc["obs"].astype(np.float64)), 1.0)
    assert d.max() < 2e-7
    rel = np.abs(nb["reward"] - tc["reward"]) / np.maximum(np.abs(tc["reward"]), 1.0)
    assert rel.max() < 1e-9
    assert np.max(np.abs(nb["terms"] - tc["terms"]) / np.maximum(np.abs(tc["terms"]), 1.0)) < 1e-9
    assert np.max(np.abs(nb["books"] - tc["books"])) / 1e5 < 1e-9
    # the powertrain's books close per step: fuel - powertrain = drive; supplied = drive - brakes - wheelspin
    b = nb["books"]
    i = {k: j for j, k in enumerate(LINES)}
    flow = np.abs(b[..., i["fuel"]]) + np.abs(b[..., i["supplied"]]) + 1.0
    assert np.max(np.abs(b[..., i["fuel"]] - b[..., i["powertrain"]] - b[..., i["drive"]]) / flow) < 1e-9
    assert np.max(np.abs(b[..., i["supplied"]] - b[..., i["drive"]] + b[..., i["brakes"]] + b[..., i["wheelspin"]])
                  / flow) < 1e-9
    assert (b[..., i["fuel"]] >= 0).all() and b[..., i["fuel"]].sum() > 0
    assert (nb["terms"][..., TERMS.index("fuel")] <= 0).all()
    # observations carry the engine speed [krpm] and the gear
    assert set(np.unique(nb["obs"][..., -1]).tolist()) <= {1.0, 2.0, 3.0}
    assert (nb["obs"][..., -2] > 0.5).all()


def test_driver_id_passes_the_checkers():
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check

    env = gym.make("Dyn4HumveeDriver-v0")
    assert env.unwrapped.engine == "numba" and env.spec.kwargs["action"] == "driver"
    assert env.action_space.shape == (3,) and env.observation_space.shape == (32,)
    assert env.action_space.low.tolist() == [-1.0, 0.0, 0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)
        # the pedals' box is [0, 1] (their travel); SB3 only recommends a symmetric box, and
        # RescaleAction gives one without a warning
        warnings.filterwarnings("ignore", message="We recommend you to use a symmetric")
        sb3_check(Dyn4Env(action="driver"), warn=True)
        warnings.resetwarnings()
        warnings.simplefilter("error")
        sb3_check(gym.wrappers.RescaleAction(Dyn4Env(action="driver"), np.full(3, -1, np.float32), np.ones(3, np.float32)),
                  warn=True)
    v = gym.make_vec("Dyn4HumveeDriver-v0", num_envs=3)
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
