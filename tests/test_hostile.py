"""Hostile input: each failure an outside adversarial pass found, pinned by a test (numbered as
found). Every bad call raises the documented error and leaves the env exactly as it was."""

import copy
import json
import pickle
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import dyn4_gym  # noqa: F401
from dyn4_gym import _rng
from dyn4_gym.agents import SHAC, CheckpointError, SHACConfig
from dyn4_gym.envs import ConfigError, Dyn4DiffEnv, Dyn4Env, Dyn4VectorEnv, EnvConfig, RewardTerm, TaskCore
from dyn4_gym.envs.env import seed_to_key
from dyn4_gym.plant import DYN4

ROOT = Path(__file__).resolve().parents[1]
SHORT = dict(course={"length": 80.0}, episode_steps=50)
ACT = np.array([0.1, 0.3], dtype=np.float32)


def _twin_steps(env, n=5):
    return [env.step(ACT)[:2] for _ in range(n)]


def _same(a, b):
    for (oa, ra), (ob, rb) in zip(a, b):
        np.testing.assert_array_equal(oa, ob)
        assert ra == rb


# 1 ------------------------------------------------------------------ rejected options are not kept
@pytest.mark.parametrize("bad", [{"reward_weights": {"energy": -1.0}}, {"target_speed": 1e39},
                                 {"vehicle": {"mass": -5.0}}, {"course": {"half_width": 1e-300}}])
def test_a_rejected_reset_leaves_the_env_as_it_was(bad):
    env, twin = Dyn4Env(**SHORT), Dyn4Env(**SHORT)
    env.reset(seed=7)
    twin.reset(seed=7)
    cfg = env.config
    with pytest.raises(ConfigError, match=r"^options\."):
        env.reset(options=bad)
    assert env.config == cfg
    _same(_twin_steps(env), _twin_steps(twin))  # same state, same core
    env.reset()  # a plain reset works, and moves on exactly like the twin's
    twin.reset()
    _same(_twin_steps(env), _twin_steps(twin))
    env.reset(options={"reward_weights": {"energy": 1.0}})  # a later good option works


def test_a_rejected_vector_reset_leaves_the_env_as_it_was():
    env, twin = Dyn4VectorEnv(num_envs=2, **SHORT), Dyn4VectorEnv(num_envs=2, **SHORT)
    env.reset(seed=3)
    twin.reset(seed=3)
    with pytest.raises(ConfigError, match=r"options\.vehicle\.mass"):
        env.reset(options={"vehicle": {"mass": -5.0}})
    a = np.tile(ACT, (2, 1))
    for _ in range(4):
        o1, r1, *_ = env.step(a)
        o2, r2, *_ = twin.step(a)
        np.testing.assert_array_equal(o1, o2)
        np.testing.assert_array_equal(r1, r2)


# 2 ------------------------------------------------------------------ reset_mask with options
def test_options_with_a_partial_reset_mask_are_refused_and_corrupt_nothing():
    env, twin = Dyn4VectorEnv(num_envs=2, **SHORT), Dyn4VectorEnv(num_envs=2, **SHORT)
    env.reset(seed=0)
    twin.reset(seed=0)
    with pytest.raises(ValueError, match="every row"):
        env.reset(options={"reset_mask": np.array([True, False]), "course": {"length": 200.0}})
    a = np.tile(ACT, (2, 1))
    for _ in range(60):  # through autoresets
        o1, r1, t1, u1, _ = env.step(a)
        o2, r2, t2, u2, _ = twin.step(a)
        np.testing.assert_array_equal(o1, o2)
        np.testing.assert_array_equal(r1, r2)
    # a full reset applies them
    env.reset(options={"course": {"length": 200.0}})
    assert env.config.course.length == 200.0


# 3 ------------------------------------------------------------------ finite rewards
@pytest.mark.parametrize("engine", ["numba", "torch"])
@pytest.mark.parametrize("entry", [DYN4.X, DYN4.Y, DYN4.PSI, DYN4.VX, DYN4.R, DYN4.ZD])
def test_a_non_finite_state_ends_with_a_finite_penalty(entry, engine):
    env = Dyn4Env(engine=engine)
    env.reset(seed=0)
    env.state.x[0, entry] = float("nan")
    obs, r, term, trunc, info = env.step(ACT)
    assert np.isfinite(r) and r == -env.core.weights["termination"]
    assert term and not trunc and info["nonfinite"]
    assert np.isfinite(obs).all() and all(np.isfinite(v) for v in info["reward_terms"].values())
    assert all(np.isfinite(v) for v in info["books"].values())


@pytest.mark.parametrize("kw,path", [
    (dict(vehicle={"m": float("nan")}), "config.vehicle.m"),
    (dict(target_speed=1e-300), "config.target_speed"),
    (dict(course={"half_width": 1e-300}), "config.course.half_width"),
    (dict(vehicle={"gravity": 0.0}), "config.vehicle.gravity"),
])
def test_configs_that_gave_nan_rewards_are_refused(kw, path):
    with pytest.raises(ConfigError, match=path.replace(".", r"\.")):
        EnvConfig.from_dict(kw)


# 4 ------------------------------------------------------------------ vehicle validation
@pytest.mark.parametrize("vehicle,key", [({"mass": -5.0}, "mass"), ({"mass": True}, "mass"),
                                         ({"direct_drive": "no"}, "direct_drive"), ({"wheels": 6}, "wheels"),
                                         ({"tire_mu": 1e39}, "tire_mu"), ({"damper": "magic"}, "damper"),
                                         ({"cg_to_front": 3.5}, "cg_to_front"), ({"mass": 10**400}, "mass")])
def test_vehicle_overrides_are_typed_and_bounded(vehicle, key):
    with pytest.raises(ConfigError, match=rf"config\.vehicle\.{key}"):
        gym.make("Dyn4Humvee-v1", vehicle=vehicle)


def test_good_vehicle_overrides_work():
    env = gym.make("Dyn4Humvee-v1", vehicle={"mass": 3000, "direct_drive": True, "damper": "skyhook",
                                             "inertia_yaw": None})
    env.reset(seed=0)
    assert float(env.unwrapped.core.p.m) == 3000.0 and env.unwrapped.core.p.damper == "skyhook"


# 5 ------------------------------------------------------------------ values that crashed or hung
@pytest.mark.parametrize("kw,path", [
    (dict(target_speed=1e39), "target_speed"), (dict(start_speed=1e39), "start_speed"),
    (dict(ground={"base_mu": 1e39}), "ground.base_mu"), (dict(ground={"bump_radius": 1e39}), "ground.bump_radius"),
    (dict(target_speed=10**400), "target_speed"), (dict(episode_steps=10**400), "episode_steps"),
    (dict(hdt=1e-300), "hdt"), (dict(control_dt=1e39), "control_dt"),
    (dict(reward_weights={"energy": 1e300}), "reward_weights.energy"), (dict(device="cuda:7"), "device"),
    (dict(device="tpu"), "device"), (dict(ground={"n_hills": 10**6}), "ground.n_hills"),
    (dict(course={"length": 1e12}), "course.length"), (dict(compile="yes"), "compile"),
])
def test_out_of_range_values_are_refused_with_their_path(kw, path):
    with pytest.raises(ConfigError, match=r"config\." + path.replace(".", r"\.")):
        EnvConfig.from_dict(kw)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message where CUDA is missing")
def test_cuda_without_cuda_says_so():
    with pytest.raises(ConfigError, match="CUDA is not available"):
        EnvConfig.from_dict(dict(device="cuda"))


# 6 ------------------------------------------------------------------ dict options merge
def test_dict_options_merge_into_the_current_ones():
    env = Dyn4Env(reward_weights={"speed": 0.7}, vehicle={"mass": 2800.0})
    env.reset(seed=0, options={"reward_weights": {"energy": 3.0}, "vehicle": {"drag_area": 3.0}})
    assert env.core.weights["energy"] == 3.0 and env.core.weights["speed"] == 0.7
    assert env.config.vehicle == {"mass": 2800.0, "drag_area": 3.0}


# 7 ------------------------------------------------------------------ 64-bit seeds
def _course_u(seed, episode):
    return _rng.uniform(seed_to_key([seed]), torch.tensor([episode]), 9)[0]


@pytest.mark.parametrize("a,b", [((0, 0), (2**32, 0)), ((1, 0), (1 + 2**40, 0)), ((0, 1), (2236906589, 0)),
                                 ((5, 0), (5 + 2**63, 0)), ((0, 0), (0, 2**32))])
def test_seeds_that_collided_differ(a, b):
    assert not torch.equal(_course_u(*a), _course_u(*b))


def test_ten_thousand_seed_episode_pairs_give_ten_thousand_courses():
    seeds = torch.tensor([_rng.key_of_seed(s) for s in range(2500)] * 4)
    episodes = torch.arange(4).repeat_interleave(2500)
    u = _rng.uniform(seeds, episodes, 9)
    assert len({tuple(row) for row in u.tolist()}) == 10_000
    # and through the env: distinct courses
    core = TaskCore(EnvConfig())
    st = core.new_state(seeds[:1000], episodes[:1000])
    assert len({tuple(np.round(c[-1].tolist(), 9)) for c in st.course_xy}) == 1000


def test_numpy_seeds_and_big_seeds_are_taken():
    env = Dyn4Env()
    o1, _ = env.reset(seed=np.int64(12))
    o2, _ = env.reset(seed=12)
    np.testing.assert_array_equal(o1, o2)
    env.reset(seed=2**64 - 1)
    for bad in (-1, 2**64, 1.5, True, "3"):
        with pytest.raises(ValueError, match="seed"):
            env.reset(seed=bad)


# 8 ------------------------------------------------------------------ progress is never more than distance
@pytest.mark.parametrize("half_width", [3.0, 30.0, 100.0])
def test_progress_never_exceeds_the_distance_driven(half_width):
    env = Dyn4Env(course={"half_width": half_width}, episode_steps=300)
    env.reset(seed=1)
    total_p = total_d = 0.0
    for _ in range(300):
        _, _, term, trunc, info = env.step(np.array([0.0, 1.0], dtype=np.float32))  # straight, full throttle
        assert info["progress"] <= info["distance"] + 1e-9
        total_p += info["progress"]
        total_d += info["distance"]
        if term or trunc:
            break
    assert total_p <= total_d + 1e-6


# 9 ------------------------------------------------------------------ vector rows against single envs
@pytest.mark.parametrize("dtype,tol", [("float64", 0.0), ("float32", 1e-4)])
def test_vector_rows_equal_single_envs(dtype, tol):
    """float64: bit for bit at any batch size; float32: within rounding (torch's vectorised
    kernels round differently on a batch of 48 than on one row)."""
    n, rows = 48, (0, 31, 47)
    venv = Dyn4VectorEnv(num_envs=n, dtype=dtype)
    venv.reset(seed=100)
    singles = [Dyn4Env(dtype=dtype) for _ in rows]
    for e, i in zip(singles, rows):
        e.reset(seed=100 + i)
    acts = np.random.default_rng(0).uniform(-1, 1, (25, n, 2)).astype(np.float32)
    for t in range(25):
        ov, rv, *_ = venv.step(acts[t])
        for e, i in zip(singles, rows):
            o, r, *_ = e.step(acts[t, i])
            assert np.abs(o - ov[i]).max() <= tol and abs(r - rv[i]) <= tol * max(1.0, abs(r))


# 10 ------------------------------------------------------------------ checkpoints
class _Boom:
    def __reduce__(self):
        return (Path.touch, (Path("/tmp/dyn4_gym_pwned"),))


def _bad_files(tmp_path):
    agent = SHAC(SHACConfig(num_envs=2, horizon=2), SHORT)
    good = tmp_path / "good.pt"
    agent.save(str(good))
    raw = good.read_bytes()
    files = {"empty": b"", "text": b"hello", "json": json.dumps({"a": 1}).encode(), "truncated": raw[: len(raw) // 2],
             "pickle_code": pickle.dumps(_Boom())}
    crafted = tmp_path / "crafted.pt"
    torch.save({"format": "dyn4-gym-shac-1", "x": _Boom()}, crafted)
    out = {"crafted_torch": crafted}
    for k, v in files.items():
        p = tmp_path / f"{k}.pt"
        p.write_bytes(v)
        out[k] = p
    wrong = dict(torch.load(good, weights_only=True))
    wrong["config"] = {"num_envs": "many"}
    torch.save(wrong, tmp_path / "wrong.pt")
    out["wrong_fields"] = tmp_path / "wrong.pt"
    out["missing"] = tmp_path / "nothing_here.pt"
    return good, out


def test_bad_checkpoints_give_one_clear_error_and_run_no_code(tmp_path):
    marker = Path("/tmp/dyn4_gym_pwned")
    marker.unlink(missing_ok=True)
    good, bad = _bad_files(tmp_path)
    assert SHAC.load(str(good)).iterations == 0
    for name, path in bad.items():
        with pytest.raises(CheckpointError, match=str(path.name)):
            SHAC.load(str(path))
    assert not marker.exists()  # the crafted files' code never ran


def test_evaluate_script_turns_bad_files_and_seed_counts_into_errors(tmp_path):
    _, bad = _bad_files(tmp_path)
    script = str(ROOT / "agents" / "evaluate.py")
    for path in (bad["truncated"], bad["missing"]):
        r = subprocess.run([sys.executable, script, "--policy", str(path), "--seeds", "1"], capture_output=True,
                           text=True, cwd=ROOT)
        assert r.returncode == 2 and "Traceback" not in r.stderr and "error:" in r.stderr
    for n in ("0", "-15", "17"):
        r = subprocess.run([sys.executable, script, "--seeds", n], capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 2 and "--seeds" in r.stderr


# 11 ------------------------------------------------------------------ NaN gradients stay in their rows
@pytest.mark.parametrize("how", ["nan_state", "blow_up"])
def test_non_finite_rows_leave_the_finite_rows_gradient_finite(how):
    env = Dyn4DiffEnv(num_envs=3, dtype="float64", **SHORT)
    obs = env.reset(seed=0)
    st = env.state
    x = st.x.clone()
    if how == "nan_state":
        x[1, DYN4.VY] = float("nan")
    else:
        x[1, DYN4.VX] = 1e200  # finite, but the step overflows
    env.state = type(st)(**{**st.__dict__, "x": x})
    w = torch.zeros(obs.shape[1], 2, dtype=torch.float64, requires_grad=True)
    total = 0.0
    for _ in range(3):
        action = torch.tanh(env.core.observe(env.state) @ w + 0.1)
        _, r, term, trunc, info = env.step(action)
        assert bool(torch.isfinite(r).all())
        total = total + r.sum()
    (g,) = torch.autograd.grad(total, w)
    assert bool(torch.isfinite(g).all()) and float(g.abs().sum()) > 0


# 12 ------------------------------------------------------------------ smaller ones
def test_a_rejected_reset_with_a_seed_does_not_reseed():
    env, twin = Dyn4Env(**SHORT), Dyn4Env(**SHORT)
    env.reset(seed=1)
    twin.reset(seed=1)
    state = env.np_random.bit_generator.state
    with pytest.raises(ConfigError):
        env.reset(seed=123, options={"target_speed": -1.0})
    assert env.np_random.bit_generator.state == state
    o1, _ = env.reset()
    o2, _ = twin.reset()
    np.testing.assert_array_equal(o1, o2)


def test_small_faces_say_what_is_wrong():
    from dyn4_gym.envs.sb3 import Dyn4SB3VecEnv

    for n in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="num_envs"):
            Dyn4SB3VecEnv(n)
    denv = Dyn4DiffEnv(num_envs=2)
    denv.reset(seed=0)
    with pytest.raises(TypeError, match="torch tensor"):
        denv.step(np.zeros((2, 2)))
    with pytest.raises(ConfigError, match="progress"):
        Dyn4Env(reward_terms=(RewardTerm("progress", lambda c: c.progress * 0),))
    with pytest.raises(ValueError, match="options must be a dict"):
        Dyn4Env().reset(options=[("target_speed", 5.0)])


def test_the_diff_env_deep_copies_mid_window():
    env = Dyn4DiffEnv(num_envs=2, dtype="float64", **SHORT)
    env.reset(seed=0)
    a = torch.zeros(2, 2, dtype=torch.float64, requires_grad=True)
    env.step(a)
    twin = copy.deepcopy(env)  # a new window: no graph in the copy
    assert not twin.state.x.requires_grad and env.state.x.requires_grad
    r1 = env.step(a.detach())[1]
    r2 = twin.step(a.detach())[1]
    assert torch.equal(r1.detach(), r2)


def test_a_differentiable_step_reads_no_tensor_value(monkeypatch):
    """Issue 49: TaskCore.step with gradients on makes no host sync (no tensor is turned into a
    Python bool or number), on a batch where a row blows up inside the step; its gradient still
    reaches the finite rows finite (the gate, not a rerun, keeps the NaNs in their row)."""
    core = Dyn4DiffEnv(num_envs=3, dtype="float64", **SHORT).core
    st = core.new_state(torch.arange(3), torch.zeros(3, dtype=torch.long))
    x = st.x.clone()
    x[1, DYN4.VX] = 1e200  # finite, but the step overflows
    st = type(st)(**{**st.__dict__, "x": x})
    a = torch.full((3, 2), 0.2, dtype=torch.float64, requires_grad=True)
    reads = []
    for name in ("__bool__", "item", "tolist", "__int__", "__float__"):
        orig = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name, lambda self, *args, _o=orig, _n=name: (reads.append(_n), _o(self, *args))[1])
    _, _, r, term, _, info = core.step(st, a)
    monkeypatch.undo()
    assert reads == []
    assert bool(info["nonfinite"][1]) and not bool(info["nonfinite"][0]) and bool(term[1])
    (g,) = torch.autograd.grad(r.sum(), a)
    assert bool(torch.isfinite(g).all()) and float(g[0].abs().sum()) > 0 and float(g[1].abs().sum()) == 0.0
