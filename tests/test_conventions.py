"""Gymnasium's and SB3's conventions, compared with their own reference behaviour (issue 24):
episode limits on every face, every Box wrapper on every id, and the SB3 adapter as a complete
VecEnv against SB3's DummyVecEnv of single envs."""

import os

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import (ClipAction, FrameStackObservation, NormalizeObservation, NormalizeReward,
                                RecordEpisodeStatistics, RescaleAction, RescaleObservation, TimeAwareObservation,
                                TransformObservation, TransformReward)

import dyn4_gym
from dyn4_gym.envs import EnvConfig

IDS = [i for i in gym.registry if i.startswith("Dyn4Humvee")]
SHORT = dict(course={"length": 60.0})


# ------------------------------------------------------------------ episode limits
def test_the_registered_limit_is_the_configs():
    """Every id's registered limit is its own config's episode_steps: 800 by default, 1200 (60 s)
    for the race and eco tasks, 2400 (120 s) for the 1 km race, Race-v1."""
    assert dyn4_gym.EPISODE_STEPS == EnvConfig().episode_steps
    for env_id in IDS:
        steps = EnvConfig.from_dict(gym.spec(env_id).kwargs).episode_steps
        want = 2400 if env_id == "Dyn4HumveeRace-v1" else 1200 if env_id.startswith(("Dyn4HumveeRace-",
                                                                                          "Dyn4HumveeEco-")) else 800
        assert steps == want
        assert gym.spec(env_id).max_episode_steps == steps
        assert gym.make(env_id).spec.max_episode_steps == steps


def _run(env, n, steps, seed=0):
    rng = np.random.default_rng(1)
    env.reset(seed=seed)
    out = []
    for _ in range(steps):
        a = np.clip(rng.normal([0.0, 0.6], [0.05, 0.1], (n, 2)), -1, 1).astype(np.float32)
        o, r, te, tr, _ = env.step(a)
        out.append((o, r, te, tr))
    return out


@pytest.mark.parametrize("limit", [7, 25])
def test_make_vec_limits_agree_with_the_sync_mode(limit):
    """``max_episode_steps`` through ``make_vec``: the native vector env truncates where Gymnasium's
    sync vector env of ``gym.make`` single envs (each in ``TimeLimit``) does, through resets."""
    kw = dict(num_envs=3, max_episode_steps=limit, course={"length": 1000.0})
    native = gym.make_vec("Dyn4Humvee-v1", vectorization_mode="vector_entry_point", **kw)
    sync = gym.make_vec("Dyn4Humvee-v1", vectorization_mode="sync", **kw)
    a, b = _run(native, 3, 3 * limit + 2), _run(sync, 3, 3 * limit + 2)
    truncations = 0
    for (oa, ra, ta, ua), (ob, rb, tb, ub) in zip(a, b):
        np.testing.assert_allclose(oa, ob, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(ra, rb, rtol=1e-6, atol=1e-9)
        np.testing.assert_array_equal(ta, tb)
        # TimeLimit also flags a terminating step at the limit as truncated; the env does not
        np.testing.assert_array_equal(ua & ~ta, ub & ~tb)
        truncations += int((ua & ~ta).sum())
    assert truncations >= 3


def test_make_with_a_limit_truncates_there_and_the_default_at_800():
    env = gym.make("Dyn4HumveeFlat-v1", max_episode_steps=12, course={"length": 1000.0})
    assert env.spec.max_episode_steps == 12
    env.reset(seed=0)
    flags = [env.step(np.array([0.0, 0.1], np.float32))[3] for _ in range(12)]
    assert flags == [False] * 11 + [True]
    env = gym.make("Dyn4HumveeFlat-v1", course={"length": 10000.0}, target_speed=2.0)
    env.reset(seed=0)
    flags = [env.step(np.array([0.0, 0.0], np.float32))[3] for _ in range(800)]
    assert flags == [False] * 799 + [True]
    # past its limit Gymnasium's TimeLimit ends the episode; an explicit episode_steps stays the env's own
    env = gym.make("Dyn4HumveeFlat-v1", episode_steps=5)
    env.reset(seed=0)
    assert [env.step(np.zeros(2, np.float32))[3] for _ in range(5)] == [False] * 4 + [True]


def test_the_vector_env_takes_max_episode_steps():
    env = gym.make_vec("Dyn4Humvee-v1", num_envs=4, max_episode_steps=10)
    assert env.unwrapped.config.episode_steps == 10


# ------------------------------------------------------------------ wrappers
def _wrappers(env):
    box = env.observation_space
    return {
        "ClipAction": lambda e: ClipAction(e),
        "RescaleAction": lambda e: RescaleAction(e, np.float32(-0.5), np.float32(0.5)),
        "RescaleAction+ClipAction": lambda e: ClipAction(RescaleAction(e, np.float32(-0.5), np.float32(0.5))),
        "NormalizeObservation": lambda e: NormalizeObservation(e),
        "RescaleObservation": lambda e: RescaleObservation(e, np.full(box.shape, -1.0, np.float32),
                                                          np.full(box.shape, 1.0, np.float32)),
        "FrameStackObservation": lambda e: FrameStackObservation(e, 3),
        "TimeAwareObservation": lambda e: TimeAwareObservation(e),
        "TransformObservation": lambda e: TransformObservation(e, lambda o: o * 2.0, box),
        "NormalizeReward": lambda e: NormalizeReward(e),
        "TransformReward": lambda e: TransformReward(e, lambda r: 0.1 * r),
        "RecordEpisodeStatistics": lambda e: RecordEpisodeStatistics(e),
    }


@pytest.mark.parametrize("env_id", IDS)
def test_every_box_wrapper_runs_on_every_id(env_id):
    base = gym.make(env_id, **SHORT)
    for name, wrap in _wrappers(base).items():
        env = wrap(gym.make(env_id, **SHORT))
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs), name
        for _ in range(3):
            obs, r, te, tr, info = env.step(env.action_space.sample())
            assert env.observation_space.contains(obs) and np.isfinite(r), name


def test_clip_after_rescale_is_the_order_gymnasium_takes():
    """Gymnasium's ClipAction widens the space to (-inf, inf) by design, so RescaleAction on top of
    it refuses (as on Pendulum-v1); RescaleAction first, then ClipAction, is the recipe."""
    with pytest.raises(ValueError, match="unbounded"):
        RescaleAction(ClipAction(gym.make("Pendulum-v1")), -1.0, 1.0)
    env = ClipAction(RescaleAction(gym.make("Dyn4HumveeDriver-v1", **SHORT), np.float32(-1.0), np.float32(1.0)))
    env.reset(seed=0)
    env.step(np.array([5.0, -5.0, 0.3], np.float32))


def test_the_driver_box_rescaled_passes_sb3s_checker_without_warnings():
    import warnings

    from stable_baselines3.common.env_checker import check_env

    env = RescaleAction(gym.make("Dyn4HumveeDriver-v1", **SHORT), np.float32(-1.0), np.float32(1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", ".*is out of date", DeprecationWarning)  # an older id (issue 44)
        check_env(env)


# ------------------------------------------------------------------ the SB3 adapter, complete
sb3 = pytest.importorskip("stable_baselines3")


def _pair(n=3, **kw):
    from stable_baselines3.common.vec_env import DummyVecEnv

    from dyn4_gym.envs.sb3 import Dyn4SB3VecEnv

    kw = dict(SHORT, episode_steps=30, **kw)
    return Dyn4SB3VecEnv(n, **kw), DummyVecEnv([lambda: gym.make("Dyn4Humvee-v1", **kw)] * n)


def test_the_adapter_equals_a_dummy_vec_env_of_single_envs():
    a, b = _pair()
    assert a.seed(5) == b.seed(5)
    np.testing.assert_array_equal(a.reset(), b.reset())
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(70):
        act = rng.uniform(-1, 1, (3, 2)).astype(np.float32)
        (oa, ra, da, ia), (ob, rb, db, ib) = a.step(act), b.step(act)
        np.testing.assert_array_equal(oa, ob)
        np.testing.assert_allclose(ra, rb, rtol=1e-6)
        np.testing.assert_array_equal(da, db)
        for i in np.flatnonzero(da):
            ends += 1
            np.testing.assert_array_equal(ia[i]["terminal_observation"], ib[i]["terminal_observation"])
            assert ia[i]["TimeLimit.truncated"] == ib[i]["TimeLimit.truncated"]
            assert ia[i]["episode"]["l"] >= 1
    assert ends >= 3


def test_episode_statistics_match_vec_monitor():
    from stable_baselines3.common.vec_env import VecMonitor

    a, _ = _pair()
    m = VecMonitor(_pair()[0])
    a.seed(1)
    m.seed(1)
    a.reset()
    m.reset()
    rng = np.random.default_rng(2)
    for _ in range(70):
        act = rng.uniform(-1, 1, (3, 2)).astype(np.float32)
        (_, _, da, ia), (_, _, dm, im) = a.step(act), m.step(act)
        np.testing.assert_array_equal(da, dm)
        for i in np.flatnonzero(da):
            assert ia[i]["episode"]["l"] == im[i]["episode"]["l"]
            assert ia[i]["episode"]["r"] == pytest.approx(im[i]["episode"]["r"], rel=1e-5)


def test_rendering_video_and_attributes(tmp_path):
    pytest.importorskip("pygame")
    pytest.importorskip("moviepy")
    from stable_baselines3.common.vec_env import VecVideoRecorder

    a, b = _pair(render_mode="rgb_array")
    a.seed(0)
    a.reset()
    images = a.get_images()
    assert len(images) == 3 and images[0].shape == (480, 480, 3)
    assert a.render().shape == (960, 960, 3)  # SB3's tiling of 3 frames
    # as DummyVecEnv answers for its envs (gymnasium's get_wrapper_attr), one answer per index
    assert a.env_method("get_wrapper_attr", "render_mode", indices=[0, 2]) == ["rgb_array", "rgb_array"]
    assert len(b.env_method("get_wrapper_attr", "render_mode", indices=[0, 2])) == 2
    assert a.get_attr("num_envs", indices=[1]) == [3]
    a.set_attr("foo", 1)
    assert a.get_attr("foo") == [1, 1, 1]
    with pytest.raises(ValueError, match="share one env"):
        a.set_attr("foo", 2, indices=[0])
    v = VecVideoRecorder(a, str(tmp_path), record_video_trigger=lambda s: s == 0, video_length=5)
    v.reset()
    for _ in range(7):
        v.step(np.zeros((3, 2), np.float32))
    v.close()
    assert any(f.endswith(".mp4") for f in os.listdir(tmp_path))


# ------------------------------------------------------------------ evaluating other people's models
def test_evaluate_loads_a_sac_zip_without_run_json_and_a_zoo_model_with_its_normaliser(tmp_path):
    import warnings

    from stable_baselines3 import PPO, SAC
    from stable_baselines3.common.vec_env import VecNormalize

    from dyn4_gym.agents.evaluation import evaluate
    from dyn4_gym.agents.loading import load_fitting_policy
    from dyn4_gym.envs.sb3 import Dyn4SB3VecEnv

    kw = dict(SHORT, episode_steps=20)
    sac = SAC("MlpPolicy", Dyn4SB3VecEnv(2, **kw), learning_starts=10, buffer_size=100, seed=0)
    sac.learn(12)
    sac.save(tmp_path / "sac" / "model")
    # RL Zoo's layout: <run>/<env id>.zip with <run>/<env id>/vecnormalize.pkl
    venv = VecNormalize(Dyn4SB3VecEnv(2, **kw))
    ppo = PPO("MlpPolicy", venv, n_steps=8, batch_size=8, n_epochs=1, seed=0)
    ppo.learn(16)
    run = tmp_path / "zoo" / "Dyn4Humvee-v1_1"
    (run / "Dyn4Humvee-v1").mkdir(parents=True)
    ppo.save(run / "Dyn4Humvee-v1")
    venv.save(str(run / "Dyn4Humvee-v1" / "vecnormalize.pkl"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the Zoo's normaliser is found: no warning
        warnings.filterwarnings("ignore", ".*is out of date", DeprecationWarning)  # an older id (issue 44)
        policy, _, env_kwargs = load_fitting_policy(str(run / "Dyn4Humvee-v1.zip"), kw)
    assert np.isfinite(evaluate(policy, env_kwargs, seeds=(1,)).mean_return)
    with pytest.warns(RuntimeWarning, match="no vecnormalize.pkl"):
        policy, _, env_kwargs = load_fitting_policy(str(tmp_path / "sac" / "model.zip"), kw)
    assert np.isfinite(evaluate(policy, env_kwargs, seeds=(1,)).mean_return)


# ------------------------------------------------------------------ threads
def test_scripts_take_threads_from_one_knob(monkeypatch):
    import torch

    from dyn4_gym.threads import ENV_VAR, script_threads, set_threads

    before = torch.get_num_threads()
    try:
        monkeypatch.delenv(ENV_VAR, raising=False)
        assert script_threads() is None and torch.get_num_threads() == 1  # a script's default
        torch.set_num_threads(2)
        assert script_threads(default_torch=None) is None and torch.get_num_threads() == 2  # benchmarks
        monkeypatch.setenv(ENV_VAR, "2")
        assert script_threads() == 2 and torch.get_num_threads() == 2
        import numba

        assert numba.get_num_threads() == min(2, numba.config.NUMBA_NUM_THREADS)
        monkeypatch.setenv(ENV_VAR, "zero")
        with pytest.raises(ValueError, match=ENV_VAR):
            script_threads()
        with pytest.raises(ValueError):
            set_threads(0)
    finally:
        set_threads(before)


def test_a_bad_thread_count_stops_a_script_in_one_line():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for bad in ("-3", "99999"):  # 99999 segfaulted in torch's pool, even under --help (issue 46)
        for args in (["--seeds", "1"], ["--help"]):
            r = subprocess.run([sys.executable, str(root / "agents" / "evaluate.py"), *args], capture_output=True,
                               text=True, timeout=120, env=dict(os.environ, DYN4_GYM_THREADS=bad))
            assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "DYN4_GYM_THREADS" in r.stderr
    from dyn4_gym.threads import max_threads, set_threads

    with pytest.raises(ValueError, match="4 per core"):
        set_threads(max_threads() + 1)


# ------------------------------------------------------------------ the start pose
def test_a_reset_option_chooses_the_start_pose():
    from dyn4_gym.envs import ConfigError

    env = gym.make("Dyn4Humvee-v1", course={"length": 120.0})
    obs0, _ = env.reset(seed=2)
    obs, _ = env.reset(seed=2, options={"start_s": 80.0, "start_offset": 0.5})
    assert abs(obs[17] * 3.0 - 0.5) < 5e-3 and not np.array_equal(obs, obs0)
    steps = 0
    while True:  # the rest of the course only: 38 m, coasting down from 10 m/s (the whole is 120 m)
        _, _, te, tr, info = env.step(np.array([0.0, 0.0], np.float32))
        steps += 1
        if te or tr:
            break
    assert info["success"] and steps < 100  # from the start, 118 m take more than 118 steps
    with pytest.raises(ConfigError, match=r"options\.start_offset"):
        env.reset(options={"start_offset": 3.0})  # on the corridor's edge
    with pytest.raises(ConfigError, match=r"options\.start_s"):
        env.reset(options={"start_s": 119.0})


# ------------------------------------------------------------------ a given centre line
def test_pure_pursuit_drives_a_given_centre_line():
    from dyn4_gym.agents.evaluation import evaluate
    from dyn4_gym.agents import PurePursuit
    from dyn4_gym.envs import ConfigError

    theta = np.linspace(0.0, np.pi, 80)  # a half circle of 40 m radius, then a straight
    line = [(40.0 * np.sin(t), 40.0 - 40.0 * np.cos(t)) for t in theta] + [(-60.0, 80.0)]
    kw = {"course": {"centre_line": line}}
    res = evaluate(PurePursuit.for_env(kw), kw, seeds=(1, 2))
    assert res.finished == 1.0 and res.cross_track_rms < 0.3
    # the courses it drove are the given line
    assert np.allclose(res.courses[0, 0], [0.0, 0.0]) and np.allclose(res.courses[0, -1], [-60.0, 80.0], atol=1.0)
    with pytest.raises(ConfigError, match=r"config\.course\.centre_line"):
        gym.make("Dyn4Humvee-v1", course={"centre_line": [(0.0, 0.0), (5.0, 0.0)]})  # too short
    with pytest.raises(ConfigError, match=r"config\.course\.centre_line"):
        gym.make("Dyn4Humvee-v1", course={"centre_line": [(0.0, 0.0), (0.0, 0.0), (50.0, 0.0)]})
    with pytest.raises(ConfigError, match=r"config\.course\.centre_line"):
        gym.make("Dyn4Humvee-v1", course={"centre_line": [(0.0, float("nan")), (50.0, 0.0)]})


def test_the_goal_from_a_course_config_is_the_goal_the_engines_drive_to():
    """course.goal_arc(course config) [m], what a controller that sees no state reads (the eco
    coast policy), is TaskCore.goal of the courses both engines build, for a generated course
    whose length is not whole spacings and for a given centre line; and it is where the episode
    succeeds."""
    import torch

    from dyn4_gym.envs import Dyn4Env
    from dyn4_gym.envs.core import TaskCore
    from dyn4_gym.envs.course import course_points, goal_arc

    line = [(0.0, 0.0), (60.3, 0.0), (90.0, 2.0)]
    generated = {"length": 80.4, "spacing": 1.5, "lead_in": 20.0, "lat_accel": 0.01}  # 80.4 m: 53.6 spacings
    for course in (generated, {"centre_line": line, "spacing": 1.0}):
        cfg = EnvConfig.from_dict({"course": course, "start_speed": 12.0, "episode_steps": 400})
        core = TaskCore(cfg)
        state = core.new_state(torch.zeros(2, dtype=torch.long), torch.zeros(2, dtype=torch.long))
        assert state.course_xy.shape[1] == course_points(cfg.course)
        assert goal_arc(cfg.course) == core.goal(state)
        for engine in ("numba", "torch"):
            env = Dyn4Env(engine=engine, course=course, start_speed=12.0, episode_steps=400)
            env.reset(seed=3)
            s = []
            while True:
                _, _, te, tr, info = env.step(np.array([0.0, 0.2], dtype=np.float32))
                s.append(info["s"])
                if te or tr:
                    break
            assert info["success"] and s[-2] < goal_arc(cfg.course) <= s[-1], engine


# ------------------------------------------------------------------ domain randomisation
def test_vehicle_ranges_draw_each_rows_vehicle_from_its_seed():
    from dyn4_gym.envs import ConfigError, Dyn4VectorEnv

    ranges = {"mass": [2000.0, 3000.0], "tire_mu": [0.6, 0.9]}
    venv = Dyn4VectorEnv(num_envs=3, vehicle_ranges=ranges, **SHORT)
    venv.reset(seed=[5, 6, 7])
    single = gym.make("Dyn4Humvee-v1", vehicle_ranges=ranges, **SHORT)
    single.reset(seed=6)
    np.testing.assert_array_equal(venv.runner.state.P[1], single.unwrapped.state.P[0])  # a row is its seed's
    m0 = venv.runner.state.P[:, 0].copy()
    assert len(set(m0)) == 3
    a = np.tile(np.array([0.0, 0.3], np.float32), (3, 1))
    for _ in range(3):
        o1, *_ = venv.step(a)
        o2, *_ = single.step(a[0])
    np.testing.assert_array_equal(o1[1], o2)
    # the same stream draws the same course and ground with or without ranges: only the vehicle moves
    plain = Dyn4VectorEnv(num_envs=3, **SHORT)
    plain.reset(seed=[5, 6, 7])
    np.testing.assert_array_equal(plain.runner.state.course_xy, venv.runner.state.course_xy)
    # a new episode draws a new vehicle
    venv.reset()
    assert not np.array_equal(venv.runner.state.P[:, 0], m0)
    for bad, match in [({"drivetrain": ["4wd", "rwd"]}, "not a numeric vehicle key"),
                       ({"mass": [3000.0, 2000.0]}, "low <= high"), ({"mass": [10.0, 2000.0]}, r"mass\[0\]"),
                       ({"cg_to_front": [0.5, 3.5]}, "cg_to_front"), ({"nope": [0, 1]}, "not a numeric")]:
        with pytest.raises(ConfigError, match=match):
            Dyn4VectorEnv(num_envs=2, vehicle_ranges=bad)
    with pytest.raises(ConfigError, match="also fixed"):
        Dyn4VectorEnv(num_envs=2, vehicle={"mass": 2500.0}, vehicle_ranges={"mass": [2000.0, 3000.0]})
    venv.reset(options={"vehicle_ranges": {"mass": [2500.0, 2500.0]}})  # as a reset option
    assert (venv.runner.state.P[:, 0] == 2500.0).all()
