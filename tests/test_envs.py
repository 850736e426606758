"""The Gymnasium, vector, SB3 and differentiable faces of Dyn4Humvee-v1."""

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

import dyn4_gym  # noqa: F401  (registers the ids)
from dyn4_gym.envs import ConfigError, Dyn4DiffEnv, Dyn4Env, Dyn4VectorEnv, EnvConfig, TaskCore, policy_rollout

IDS = ["Dyn4Humvee-v1", "Dyn4HumveeFlat-v1"]


@pytest.mark.parametrize("env_id", IDS)
def test_gymnasium_and_sb3_checkers_pass_without_warnings(env_id):
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(env_id)
    assert env.unwrapped.engine == "numba"  # the checkers run on the fast engine, the default
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
        sb3_check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []


def test_registration_is_idempotent_and_module_form_works():
    import importlib

    importlib.reload(dyn4_gym)
    env = gym.make("dyn4_gym:Dyn4Humvee-v1")
    assert isinstance(env.unwrapped, Dyn4Env)
    assert gym.spec("Dyn4Humvee-v1").vector_entry_point == "dyn4_gym.envs.vector:Dyn4VectorEnv"


def _run(env, seed, actions):
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for a in actions:
        obs, r, term, trunc, _ = env.step(a)
        out.append(np.append(obs, r))
        if term or trunc:
            break
    return out


def test_seeded_determinism_bit_for_bit():
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (40, 2)).astype(np.float32)
    a = _run(gym.make("Dyn4Humvee-v1"), 7, actions)
    b = _run(gym.make("Dyn4Humvee-v1"), 7, actions)
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
    c = _run(gym.make("Dyn4Humvee-v1"), 8, actions)
    assert not np.array_equal(a[5], c[5])


def test_reset_without_seed_moves_to_the_next_episode():
    env = gym.make("Dyn4Humvee-v1")
    env.reset(seed=3)
    pts1 = np.array(env.unwrapped.state.course_xy)
    env.reset()
    pts2 = np.array(env.unwrapped.state.course_xy)
    env.reset(seed=3)
    assert not np.array_equal(pts1, pts2) and np.array_equal(pts1, np.array(env.unwrapped.state.course_xy))


@pytest.mark.slow
def test_long_random_rollouts_stay_in_the_observation_space_and_finite():
    """10,240 random steps (64 rows x 160 steps, with autoresets): every observation contained."""
    venv = gym.make_vec("Dyn4Humvee-v1", num_envs=64, episode_steps=60)
    space = venv.unwrapped.single_observation_space
    obs, _ = venv.reset(seed=0)
    rng = np.random.default_rng(1)
    resets = 0
    for _ in range(160):
        obs, r, term, trunc, info = venv.step(rng.uniform(-1.2, 1.2, (64, 2)).astype(np.float32))
        assert np.isfinite(obs).all() and np.isfinite(r).all()
        assert all(space.contains(o) for o in obs)
        assert not info["nonfinite"].any()
        resets += int((term | trunc).sum())
    assert resets > 64


@pytest.mark.parametrize("mode", ["next", "same"])
def test_vector_rows_equal_single_env_runs(mode):
    n, steps = 3, 40
    kw = dict(episode_steps=12)
    rng = np.random.default_rng(2)
    actions = rng.uniform(-0.3, 1.0, (steps, n, 2)).astype(np.float32)
    am = AutoresetMode.NEXT_STEP if mode == "next" else AutoresetMode.SAME_STEP
    venv = Dyn4VectorEnv(num_envs=n, autoreset_mode=am, **kw)
    vobs, _ = venv.reset(seed=100)
    vtraj = [vobs]
    vrew = []
    for k in range(steps):
        o, r, te, tr, info = venv.step(actions[k])
        vtraj.append(o)
        vrew.append(r)
    for i in range(n):
        env = Dyn4Env(**kw)
        obs, _ = env.reset(seed=100 + i)
        assert np.array_equal(obs, vtraj[0][i])
        pending = False
        for k in range(steps):
            if pending and mode == "next":
                obs, _ = env.reset()
                r = 0.0
                pending = False
            else:
                obs, r, te, tr, _ = env.step(actions[k, i])
                if te or tr:
                    if mode == "same":
                        obs, _ = env.reset()
                    else:
                        pending = True
            assert np.array_equal(obs, vtraj[k + 1][i]), (i, k)
            assert r == pytest.approx(vrew[k][i], rel=1e-6, abs=1e-6)


def test_autoreset_modes():
    kw = dict(episode_steps=3)
    zeros = np.zeros((2, 2), np.float32)
    v = Dyn4VectorEnv(num_envs=2, autoreset_mode=AutoresetMode.NEXT_STEP, **kw)
    assert v.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    obs0, _ = v.reset(seed=0)
    for _ in range(3):
        o, r, te, tr, _ = v.step(zeros)
    assert tr.all()
    o, r, te, tr, _ = v.step(zeros)
    assert np.array_equal(o, obs0 * 0 + o) and (r == 0).all() and not (te | tr).any()
    assert int(v.runner.state.episode[0]) == 1 and int(v.runner.state.t[0]) == 0
    v = Dyn4VectorEnv(num_envs=2, autoreset_mode=AutoresetMode.SAME_STEP, **kw)
    v.reset(seed=0)
    for _ in range(3):
        o, r, te, tr, info = v.step(zeros)
    assert tr.all() and info["_final_obs"].all() and info["final_obs"][0].shape == (30,)
    assert int(v.runner.state.t[0]) == 0 and not np.array_equal(o[0], info["final_obs"][0])
    v = Dyn4VectorEnv(num_envs=2, autoreset_mode=AutoresetMode.DISABLED, **kw)
    v.reset(seed=0)
    for _ in range(3):
        v.step(zeros)
    with pytest.raises(RuntimeError, match="reset_mask"):
        v.step(zeros)
    v.reset(options={"reset_mask": np.array([True, True])})
    v.step(zeros)
    with pytest.raises(ValueError, match="reset_mask"):
        v.reset(options={"reset_mask": np.array([1, 0])})


def test_make_vec_uses_the_native_vector_env():
    v = gym.make_vec("Dyn4Humvee-v1", num_envs=5, vectorization_mode="vector_entry_point")
    assert isinstance(v.unwrapped, Dyn4VectorEnv)
    obs, _ = v.reset(seed=1)
    assert obs.shape == (5, 30) and obs.dtype == np.float32


def test_sb3_adapter_semantics_at_episode_ends():
    from stable_baselines3.common.vec_env import VecCheckNan

    from dyn4_gym.envs.sb3 import Dyn4SB3VecEnv

    env = Dyn4SB3VecEnv(num_envs=3, episode_steps=4)
    env.seed(5)
    obs = env.reset()
    assert obs.shape == (3, 30)
    act = np.zeros((3, 2), np.float32)
    act[2] = [1.0, 1.0]  # full lock: leaves the corridor before the time limit? not in 4 steps
    for k in range(4):
        obs, rew, done, infos = env.step(act)
    assert done.all()
    for i in range(3):
        assert infos[i]["TimeLimit.truncated"] is True
        assert infos[i]["terminal_observation"].shape == (30,)
        assert not np.array_equal(infos[i]["terminal_observation"], obs[i])  # obs is the new episode's
    # termination (not truncation) is reported as such
    env = Dyn4SB3VecEnv(num_envs=2, episode_steps=200, course={"half_width": 0.5})
    env.reset()
    for _ in range(200):
        obs, rew, done, infos = env.step(np.array([[1.0, 1.0], [1.0, 1.0]], np.float32))
        if done.any():
            break
    ended = np.flatnonzero(done)
    assert len(ended) > 0 and all(infos[i]["TimeLimit.truncated"] is False for i in ended)
    assert all(infos[i]["out_of_corridor"] and "terminal_observation" in infos[i] for i in ended)
    checked = VecCheckNan(Dyn4SB3VecEnv(num_envs=2), raise_exception=True)
    checked.reset()
    for _ in range(5):
        checked.step(np.random.default_rng(0).uniform(-1, 1, (2, 2)).astype(np.float32))


@pytest.mark.slow
def test_ppo_trains_on_the_batched_adapter():
    from stable_baselines3 import PPO

    from dyn4_gym.envs.sb3 import Dyn4SB3VecEnv

    model = PPO("MlpPolicy", Dyn4SB3VecEnv(num_envs=8, ground={"hills_amplitude": 0.0}), n_steps=32, batch_size=64,
                n_epochs=1, verbose=0, seed=0, device="cpu")
    model.learn(total_timesteps=512)
    assert model.num_timesteps >= 512


def test_bad_actions_raise_and_leave_the_state_untouched():
    env = Dyn4Env()
    env.reset(seed=0)
    before = np.array(env.state.x)
    for bad in (np.array([np.nan, 0.0]), np.array([0.0, np.inf]), np.zeros(3), np.zeros((1, 2)),
                np.array(["a", "b"]), [[0.0], [1.0]]):
        with pytest.raises(ValueError):
            env.step(bad)
        assert np.array_equal(np.array(env.state.x), before)
    v = Dyn4VectorEnv(num_envs=2)
    v.reset(seed=0)
    s = np.array(v.runner.state.x)
    with pytest.raises(ValueError, match="shape"):
        v.step(np.zeros((3, 2)))
    assert np.array_equal(np.array(v.runner.state.x), s)


def test_actions_outside_the_box_are_clipped():
    a, b = Dyn4Env(), Dyn4Env()
    a.reset(seed=1)
    b.reset(seed=1)
    oa = a.step(np.array([5.0, -7.0]))[0]
    ob = b.step(np.array([1.0, -1.0]))[0]
    assert np.array_equal(oa, ob)


@pytest.mark.parametrize("kwargs,match", [
    (dict(no_such_key=1), r"config\.no_such_key"),
    (dict(course={"lenght": 100}), r"config\.course\.lenght"),
    (dict(course={"half_width": -1.0}), r"config\.course\.half_width"),
    (dict(target_speed="fast"), r"config\.target_speed"),
    (dict(reward_weights={"energy": -1.0}), r"config\.reward_weights\.energy"),
    (dict(reward_weights={"enrgy": 1.0}), r"config\.reward_weights\.enrgy"),
    (dict(episode_steps=2.5), r"config\.episode_steps"),
    (dict(control_dt=0.033), r"config\.control_dt"),
    (dict(ground={"n_bumps": True}), r"config\.ground\.n_bumps"),
    (dict(vehicle={"mass": -5.0}), r"mass"),
])
def test_bad_configs_fail_at_construction_with_the_key_path(kwargs, match):
    with pytest.raises((ConfigError, ValueError, TypeError), match=match):
        gym.make("Dyn4Humvee-v1", **kwargs)


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_nonfinite_plant_state_terminates_with_a_flag(engine):
    env = Dyn4Env(engine=engine)
    env.reset(seed=0)
    env.state.x[0, 4] = float("nan")  # both engines' states are writable arrays
    obs, r, term, trunc, info = env.step(np.zeros(2))
    assert term and info["nonfinite"]
    assert np.isfinite(obs).all()


def test_pickles_and_resumes_identically():
    env = gym.make("Dyn4Humvee-v1")
    env.reset(seed=4)
    env.step(np.array([0.1, 0.5]))
    clone = pickle.loads(pickle.dumps(env))
    a = env.step(np.array([0.2, 0.3]))
    b = clone.step(np.array([0.2, 0.3]))
    assert np.array_equal(a[0], b[0]) and a[1] == b[1]


def test_spec_kwargs_record_the_run_and_options_change_the_next_episode():
    env = gym.make("Dyn4Humvee-v1", target_speed=8.0, reward_weights={"energy": 0.5})
    assert env.spec.kwargs["target_speed"] == 8.0 and env.spec.kwargs["reward_weights"] == {"energy": 0.5}
    assert env.unwrapped.core.weights["energy"] == 0.5
    env.reset(seed=0, options={"reward_weights": {"energy": 3.0}, "course": {"half_width": 4.0}})
    assert env.unwrapped.core.weights["energy"] == 3.0
    assert env.unwrapped.config.course.half_width == 4.0
    with pytest.raises(ConfigError, match=r"options\.course\.nope"):
        env.reset(options={"course": {"nope": 1}})


def test_render_rgb_array():
    pytest.importorskip("pygame")
    env = gym.make("Dyn4Humvee-v1", render_mode="rgb_array")
    env.reset(seed=0)
    env.step(np.array([0.1, 0.2]))
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    assert frame.std() > 5  # something is drawn
    env.close()


def test_detach_rows_cuts_the_graph_of_those_rows_alone():
    """``Dyn4DiffEnv.detach_rows``: the masked rows' next steps no longer depend on the actions
    before the cut, the others' still do; a bad mask is refused and changes nothing."""
    denv = Dyn4DiffEnv(num_envs=3, dtype="float64")
    denv.reset(seed=0)
    a0 = torch.tensor([[0.05, 0.4]] * 3, dtype=torch.float64, requires_grad=True)
    denv.step(a0)
    x_before = denv.state.x.detach().clone()
    for bad in (torch.tensor([True, False]), torch.tensor([1, 0, 0]), [True, False, True]):
        with pytest.raises(ValueError, match="rows"):
            denv.detach_rows(bad)
    obs = denv.detach_rows(torch.tensor([True, False, False]))
    assert torch.equal(denv.state.x.detach(), x_before)  # values unchanged
    assert obs.shape == (3, denv.obs_dim)
    for _ in range(3):
        obs, r, *_ = denv.step(torch.tensor([[0.05, 0.4]] * 3, dtype=torch.float64))
    (g,) = torch.autograd.grad(denv.state.x[:, :6].sum(), a0)
    assert g[0].abs().sum() == 0 and (g[1:].abs().sum(-1) > 0).all()


def test_differentiable_env_and_rollout_carry_gradients():
    denv = Dyn4DiffEnv(num_envs=4, dtype="float64")
    obs = denv.reset(seed=0)
    w = torch.zeros(30, 2, dtype=torch.float64, requires_grad=True)
    total = 0
    for _ in range(4):
        obs, r, *_ = denv.step(torch.tanh(obs @ w + torch.tensor([0.05, 0.3], dtype=torch.float64)))
        total = total + r.sum()
    (g,) = torch.autograd.grad(total, w)
    assert torch.isfinite(g).all() and g.abs().sum() > 0
    obs = denv.detach()
    assert not obs.requires_grad and not denv.state.x.requires_grad
    core = TaskCore(EnvConfig.from_dict(dict(dtype="float64")))
    state = core.new_state(torch.arange(2), torch.zeros(2, dtype=torch.long))
    res = policy_rollout(lambda o: torch.tanh(o @ w + 0.2), core, state, 8)
    (g2,) = torch.autograd.grad(res["reward"].sum(), w)
    assert res["obs"].shape == (9, 2, 30) and torch.isfinite(g2).all()
