"""Sensors (issue 47, item 4): range finders to the corridor's edges and a ground patch ahead,
on both engines (equal), differentiable on torch, against geometry worked out by hand, with clear
errors for a bad config (docs/env.md, "Sensors")."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import dyn4_gym
from dyn4_gym.envs import ConfigError, EnvConfig
from dyn4_gym.envs.core import TaskCore
from dyn4_gym.envs.sensors import ground_patch, range_finder
from dyn4_gym.ground.samplers import Hills
from dyn4_gym.model.state import DYN4
from dyn4_gym.model.task import beam_angles, patch_points, sensor_names

STRAIGHT = {"centre_line": [(0.0, 0.0), (300.0, 0.0)], "half_width": 3.0}


def _sensors(obs, env):
    core = env.unwrapped.core if hasattr(env.unwrapped, "core") else env.core
    return np.asarray(obs, dtype=np.float64)[..., core.n_fixed:]


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_beams_on_a_straight_corridor_read_its_geometry(engine):
    """A car on the centre line of a straight 6 m corridor, heading along it: the beams at -90,
    -45, 0, +45, +90 deg read 3, 3 sqrt 2, max_range, 3 sqrt 2, 3 m; moved 1 m left, the right
    beam reads 4 m and the left 2 m."""
    for offset, right, left in ((0.0, 3.0, 3.0), (1.0, 4.0, 2.0)):
        env = gym.make("Dyn4Humvee-v2", engine=engine, dtype="float64", course=STRAIGHT, ground=dyn4_gym.FLAT_GROUND,
                       start_s=50.0, start_offset=offset, sensors={"beams": 5, "fan": math.pi, "max_range": 40.0})
        obs, _ = env.reset(seed=0)
        r = _sensors(obs, env) * 40.0
        want = [right, right * math.sqrt(2), 40.0, left * math.sqrt(2), left]
        # float32 observations of a car settled at rest (its yaw and lateral place move by ~1e-9)
        assert np.allclose(r, want, rtol=1e-5, atol=1e-5), (r, want)


def test_a_beam_past_the_course_end_and_a_full_circle():
    """Straight behind the start the corridor is open (no edge across the course's ends): the
    backward beam reads max_range; a full circle of 4 beams points behind, right, ahead, left."""
    assert np.allclose(beam_angles(4, 2 * math.pi), (-math.pi, -math.pi / 2, 0.0, math.pi / 2))
    assert beam_angles(1, 1.0) == (0.0,) and np.allclose(beam_angles(3, 2.0), (-1.0, 0.0, 1.0))
    env = gym.make("Dyn4Humvee-v2", dtype="float64", course=STRAIGHT, ground=dyn4_gym.FLAT_GROUND,
                   sensors={"beams": 4, "fan": 2 * math.pi, "max_range": 30.0})
    obs, _ = env.reset(seed=0)
    assert np.allclose(_sensors(obs, env) * 30.0, (30.0, 3.0, 30.0, 3.0), atol=1e-4)


def test_the_engines_agree_over_episodes_with_resets(drive_engines):
    """Random driving, 4 rows, resets included, on the default task and on the race (friction
    patches, a full circle of beams, a patch behind as well as ahead): every observation entry
    equal to float32 rounding on both engines, the episodes' ends identical."""
    race = {k: v for k, v in dyn4_gym.RACE.items() if k != "engine"}
    for fixed, kw in ((30, dict(sensors=dict(beams=9, patch_rows=3, patch_cols=3))),
                      (35, dict(race, sensors=dict(beams=7, fan=2 * math.pi, max_range=25.0, patch_rows=2, patch_cols=4,
                                       patch_start=-6.0, patch_length=12.0)))):
        (a, ea), (b, eb) = drive_engines(kw)
        assert ea.sum() >= 8 and np.array_equal(ea, eb)  # resets happened, at the same steps
        n = kw["sensors"]["beams"]
        assert a.shape[-1] == fixed + n + 2 * kw["sensors"]["patch_rows"] * kw["sensors"]["patch_cols"]
        assert np.max(np.abs(a - b) / np.maximum(np.abs(b), 1.0)) < 2e-7
        ranges = a[..., fixed:fixed + n]
        assert ranges.min() > 0.0 and (ranges < 1.0).mean() > 0.3  # the beams do see the edges


def test_the_patch_reads_a_ramp_on_both_engines():
    """A grid ground rising 0.1 m per m along +X and with friction 0.5 + 0.01 y: at heading 0 the
    patch's height over the car's is 0.1 x its body-frame x, and its friction 0.5 + 0.01 (Y + y),
    on both engines (a grid is bilinear, so a ramp is exact)."""
    xs, ys = np.arange(-20.0, 400.0, 2.0), np.arange(-30.0, 32.0, 2.0)
    ground = {"kind": "grid", "heights": (0.1 * xs[:, None] + 0.0 * ys[None, :]).tolist(),
              "mu": (0.5 + 0.01 * ys[None, :] + 0.0 * xs[:, None]).tolist(), "origin": (-20.0, -30.0),
              "spacing": 2.0}
    pts = np.array(patch_points(3, 2, 5.0, 10.0, 4.0))
    assert np.allclose(pts, [(5, -2), (5, 2), (10, -2), (10, 2), (15, -2), (15, 2)])
    for engine in ("numba", "torch"):
        env = gym.make("Dyn4Humvee-v2", engine=engine, dtype="float64", course=STRAIGHT, ground=ground,
                       start_s=50.0, sensors={"patch_rows": 3, "patch_cols": 2, "patch_start": 5.0,
                                              "patch_length": 10.0, "patch_width": 4.0})
        obs, _ = env.reset(seed=0)
        x = np.asarray(env.unwrapped.state.x)[0]
        psi, Y = float(x[DYN4.PSI]), float(x[DYN4.Y])
        assert abs(psi) < 1e-3
        c, s = math.cos(psi), math.sin(psi)
        mu, h = _sensors(obs, env).reshape(2, -1)
        wy = Y + s * pts[:, 0] + c * pts[:, 1]
        assert np.allclose(mu, 0.5 + 0.01 * wy, atol=1e-6), (engine, mu)
        assert np.allclose(h, 0.1 * (c * pts[:, 0] - s * pts[:, 1]), atol=1e-6), (engine, h)


def test_range_finder_gradients_match_central_differences():
    """d(ranges)/d(position, yaw) in float64 against central differences, on a curved course
    with the car off its centre line (several beams meet the edges at once)."""
    cfg = EnvConfig.from_dict(dict(dtype="float64", sensors=dict(beams=7, fan=2.5, max_range=30.0)))
    core = TaskCore(cfg)
    st = core.new_state(torch.arange(2), torch.zeros(2, dtype=torch.long))
    angles = torch.tensor(beam_angles(7, 2.5), dtype=torch.float64)
    pose = torch.cat((st.x[:, :2] + torch.tensor([[0.7, -0.4]], dtype=torch.float64), st.x[:, 5:6] + 0.2), -1)

    def f(p):
        return range_finder(st.course_xy, st.course_heading, st.idx, core._widths, p[:, :2], p[:, 2], angles, 30.0,
                            core._window)

    out = f(pose)
    assert ((out > 0) & (out < 30.0)).float().mean() > 0.5
    assert torch.autograd.gradcheck(f, (pose.clone().requires_grad_(True),), eps=1e-6, atol=1e-6)


def test_the_patch_is_differentiable_in_the_pose():
    """Height and friction at the patch through a hill sampler: gradients in float64 against
    central differences."""
    hills = Hills(amplitude=0.5, wavelength=25.0, seed=3, mu=0.7)
    pts = torch.tensor(patch_points(2, 3, 2.0, 8.0, 4.0), dtype=torch.float64)

    def f(p):
        return torch.cat(ground_patch(hills, p[:, :2], p[:, 2], pts), -1)

    pose = torch.tensor([[3.0, -1.0, 0.3], [10.0, 2.0, -1.2]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(f, (pose,), eps=1e-6, atol=1e-6)


def test_the_differentiable_env_carries_the_sensors_gradient():
    """Through Dyn4DiffEnv: d(sum of the ranges after a step)/d(steer) is finite and nonzero."""
    from dyn4_gym.envs import Dyn4DiffEnv

    env = Dyn4DiffEnv(num_envs=2, dtype="float64", sensors={"beams": 5})
    env.reset(seed=0)
    a = torch.tensor([[0.3, 0.5], [-0.3, 0.5]], dtype=torch.float64, requires_grad=True)
    for _ in range(3):
        obs = env.step(a)[0]
    obs[:, env.core.n_fixed:].sum().backward()
    assert torch.isfinite(a.grad).all() and a.grad[:, 0].abs().min() > 0


def test_names_spaces_and_checkers():
    """The names follow model.task.sensor_names; the observation space grows by the sensors; the
    Gymnasium and SB3 checkers pass."""
    from gymnasium.utils.env_checker import check_env

    env = gym.make("Dyn4Humvee-v2", sensors={"beams": 3, "patch_rows": 2, "patch_cols": 2})
    core = env.unwrapped.core
    assert core.obs_names[core.n_fixed:] == sensor_names(3, 2, 2) == (
        "range0", "range1", "range2", "patch0_0_mu", "patch0_1_mu", "patch1_0_mu", "patch1_1_mu",
        "patch0_0_h", "patch0_1_h", "patch1_0_h", "patch1_1_h")
    assert env.observation_space.shape == (30 + 11,)
    check_env(env.unwrapped, skip_render_check=True)
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_checker import check_env as sb3_check

    sb3_check(gym.make("Dyn4Humvee-v2", sensors={"beams": 3}).unwrapped, warn=False)


@pytest.mark.parametrize("sensors, match", [
    ({"beams": -1}, r"sensors\.beams must be an integer in \[0, 64\]"),
    ({"beams": 65}, r"sensors\.beams"),
    ({"beams": 2.0}, r"sensors\.beams must be an integer"),
    ({"beams": True}, r"sensors\.beams"),
    ({"fan": 0.0}, r"sensors\.fan"),
    ({"fan": 7.0}, r"sensors\.fan"),
    ({"max_range": float("nan")}, r"sensors\.max_range"),
    ({"max_range": 0.0}, r"sensors\.max_range"),
    ({"patch_rows": 2}, r"sensors\.patch_rows and patch_cols must both be 0"),
    ({"patch_rows": 17, "patch_cols": 1}, r"sensors\.patch_rows"),
    ({"patch_width": -1.0}, r"sensors\.patch_width"),
    ({"patch_start": float("inf")}, r"sensors\.patch_start"),
    ({"lidar": 3}, r"sensors\.lidar is not a known key"),
])
def test_bad_sensor_configs_are_refused_by_name(sensors, match):
    with pytest.raises(ConfigError, match=match):
        gym.make("Dyn4Humvee-v2", sensors=sensors)


def test_sensors_must_be_a_mapping():
    with pytest.raises(ConfigError, match=r"config\.sensors must be a mapping"):
        EnvConfig.from_dict({"sensors": 3})
