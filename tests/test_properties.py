"""Property tests with hypothesis: random configs, options, seeds, actions and checkpoint bytes.

Each case either works or raises the documented error (``ConfigError`` for configs and options,
``ValueError`` for seeds and actions, ``CheckpointError`` for files), and a rejected call leaves
the env unchanged. Runs derandomized (the same cases every run), so CI is reproducible; the case
counts per test are in ``max_examples`` (600 in all; the 60 in-bounds configs all built an env and stepped it
when written).
"""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dyn4_gym.agents import SHAC, CheckpointError
from dyn4_gym.envs import ConfigError, Dyn4Env, EnvConfig, TaskCore
from dyn4_gym.envs.vehicle import VEHICLE_KEYS

SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

# values of every type a YAML file, a JSON string or a careless caller might give
ANY = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.integers(10**18, 10**400),
                st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e3, 1e3), st.text(max_size=5),
                st.lists(st.floats(0, 100), max_size=6), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
TOP = ["target_speed", "start_speed", "control_dt", "hdt", "episode_steps", "roll_limit", "dtype", "device",
       "compile", "not_a_key"]
COURSE = ["length", "spacing", "half_width", "lat_accel", "n_waves", "wavelength_min", "wavelength_max", "lead_in",
          "goal_margin", "preview", "bogus"]
GROUND = ["kind", "base_mu", "hills_amplitude", "n_hills", "n_patches", "n_bumps", "bump_radius", "patch_mu_min",
          "bump_height_max"]
WEIGHTS = ["progress", "speed", "energy", "termination", "nope"]


def _maybe_near(v):
    """Half the values are plausible numbers, so the valid side gets exercised too."""
    return st.one_of(ANY, st.floats(0.01, 50.0), st.integers(0, 20))


configs = st.fixed_dictionaries({}, optional={
    **{k: _maybe_near(None) for k in TOP},
    "course": st.dictionaries(st.sampled_from(COURSE), _maybe_near(None), max_size=3),
    "ground": st.dictionaries(st.sampled_from(GROUND), _maybe_near(None), max_size=3),
    "vehicle": st.dictionaries(st.sampled_from(sorted(VEHICLE_KEYS) + ["wings"]), _maybe_near(None), max_size=3),
    "reward_weights": st.dictionaries(st.sampled_from(WEIGHTS), _maybe_near(None), max_size=3),
})


# configs inside the documented bounds (some still violate a cross-check, e.g. a course too short)
F = st.floats
plausible = st.fixed_dictionaries({}, optional={
    "target_speed": F(0.5, 40.0), "start_speed": F(0.0, 40.0), "roll_limit": F(0.05, 1.5),
    "course": st.fixed_dictionaries({}, optional={"half_width": F(0.5, 300.0), "length": F(40.0, 400.0),
                                                 "lat_accel": F(0.2, 15.0), "n_waves": st.integers(1, 6)}),
    "ground": st.fixed_dictionaries({}, optional={"base_mu": F(0.05, 3.0), "hills_amplitude": F(0.0, 3.0),
                                                 "n_hills": st.integers(0, 6), "n_bumps": st.integers(0, 8),
                                                 "bump_radius": F(0.05, 5.0), "n_patches": st.integers(0, 6)}),
    "vehicle": st.fixed_dictionaries({}, optional={"mass": F(300.0, 30000.0), "tire_mu": F(0.1, 2.0),
                                                  "damper": st.sampled_from(["passive", "skyhook"]),
                                                  "cg_height": F(0.2, 1.5), "max_power": F(1e4, 1e6)}),
    "reward_weights": st.dictionaries(st.sampled_from(WEIGHTS[:4]), F(0.0, 1e4), max_size=3),
})


@settings(max_examples=300, **SETTINGS)
@given(configs)
def test_random_configs_validate_or_raise_config_error(kw):
    try:
        cfg = EnvConfig.from_dict(kw)
    except ConfigError as exc:
        assert str(exc).startswith("config")
        return
    TaskCore(cfg)  # a config that validates builds (or raises ConfigError, caught by the test runner as a failure)


@settings(max_examples=60, **SETTINGS)
@given(plausible, st.lists(st.tuples(st.floats(-5, 5), st.floats(-5, 5)), min_size=1, max_size=6))
def test_valid_random_configs_give_finite_steps(kw, actions):
    try:
        env = Dyn4Env(**kw)
    except ConfigError:
        return
    obs, _ = env.reset(seed=0)
    for a in actions:
        obs, r, term, trunc, info = env.step(np.array(a, dtype=np.float32))
        assert math.isfinite(r) and env.observation_space.contains(obs)
        assert info["progress"] <= info["distance"] + 1e-6
        if term or trunc:
            break


@pytest.fixture(scope="module")
def live_env():
    env = Dyn4Env(course={"length": 80.0}, episode_steps=40)
    env.reset(seed=5)
    return env


@settings(max_examples=80, **SETTINGS)
@given(st.fixed_dictionaries({}, optional={k: _maybe_near(None) for k in ("target_speed", "hdt", "roll_limit")} | {
    "reward_weights": st.dictionaries(st.sampled_from(WEIGHTS), _maybe_near(None), max_size=2),
    "vehicle": st.dictionaries(st.sampled_from(["mass", "tire_mu", "damper", "wings"]), _maybe_near(None), max_size=2),
    "course": st.dictionaries(st.sampled_from(["half_width", "length", "bogus"]), _maybe_near(None), max_size=2)}),
    st.one_of(st.none(), st.integers(-5, 2**65)))
def test_rejected_options_and_seeds_change_nothing(live_env, options, seed):
    env = live_env
    runner = env._runner
    before = (env.config, runner.keys.copy(), runner.episodes, np.array(env.state.x), env.np_random.bit_generator.state)
    try:
        env.reset(seed=seed, options=options)
    except (ConfigError, ValueError) as exc:
        assert isinstance(exc, ConfigError) == (str(exc).startswith("options")) or "seed" in str(exc)
        after = (env.config, runner.keys, runner.episodes, np.array(env.state.x), env.np_random.bit_generator.state)
        assert after[0] == before[0] and np.array_equal(after[1], before[1]) and np.array_equal(after[2], before[2])
        assert np.array_equal(after[3], before[3]) and after[4] == before[4]
        return
    obs, r, *_ = env.step(np.zeros(2, dtype=np.float32))
    assert math.isfinite(r)
    env.reset(seed=5, options={"target_speed": 10.0, "hdt": 0.01, "roll_limit": 0.6})


ACTIONS = st.one_of(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=4),
    st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=2),
    st.lists(st.integers(-3, 3), min_size=2, max_size=2),
    st.lists(st.lists(st.floats(-2, 2), min_size=2, max_size=2), min_size=1, max_size=2),
    st.text(max_size=3), st.none())


@settings(max_examples=100, **SETTINGS)
@given(ACTIONS)
def test_random_actions_step_or_raise_and_change_nothing(live_env, action):
    env = live_env
    x0 = np.array(env.state.x)
    try:
        obs, r, term, trunc, info = env.step(action)
    except ValueError:
        assert np.array_equal(np.array(env.state.x), x0)
        return
    assert math.isfinite(r) and env.observation_space.contains(obs)
    if term or trunc:
        env.reset(seed=5)


@settings(max_examples=60, **SETTINGS)
@given(st.binary(max_size=2000))
def test_random_checkpoint_bytes_raise_checkpoint_error(tmp_path_factory, blob):
    path = tmp_path_factory.mktemp("ckpt") / "model.pt"
    path.write_bytes(blob)
    with pytest.raises(CheckpointError):
        SHAC.load(str(path))
