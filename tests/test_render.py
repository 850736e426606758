"""The pygame renderer (dyn4_gym/envs/render.py): what a frame shows, on every face."""

import sys

import gymnasium as gym
import numpy as np
import pytest

import dyn4_gym  # noqa: F401
from dyn4_gym.envs import Dyn4VectorEnv

pytest.importorskip("pygame")
BODY = np.array([89, 115, 77])  # the car's body colour
SHORT = dict(course={"length": 120.0})


def _car_pixels(frame):
    return np.all(frame == BODY, axis=-1)


def test_a_frame_shows_the_car_at_the_centre_and_moves_with_it():
    env = gym.make("Dyn4Humvee-v1", render_mode="rgb_array", **SHORT)
    env.reset(seed=0)
    f0 = env.render()
    assert f0.shape == (480, 480, 3) and f0.dtype == np.uint8 and f0.flags.c_contiguous
    car = np.argwhere(_car_pixels(f0))
    assert len(car) > 100  # a 2.2 m x 4.6 m body at 8 px/m
    assert np.allclose(car.mean(0), (240, 240), atol=12)  # the view follows the car
    for _ in range(10):
        env.step(np.array([0.0, 0.3], dtype=np.float32))
    f1 = env.render()
    assert not np.array_equal(f0, f1)  # the ground and the readout moved
    assert len(np.argwhere(_car_pixels(f1))) > 100
    # the corridor's edges (near-black lines) are drawn
    assert (np.abs(f1.astype(int) - 20).max(-1) < 8).sum() > 200


def test_vector_frames_equal_single_env_frames():
    venv = Dyn4VectorEnv(num_envs=2, render_mode="rgb_array", **SHORT)
    venv.reset(seed=[3, 4])
    a = np.tile(np.array([0.1, 0.4], dtype=np.float32), (2, 1))
    for _ in range(5):
        venv.step(a)
    frames = venv.render()
    assert len(frames) == 2
    env = gym.make("Dyn4Humvee-v1", render_mode="rgb_array", **SHORT)
    env.reset(seed=4)
    for _ in range(5):
        env.step(a[0])
    np.testing.assert_array_equal(frames[1], env.render())


def test_human_mode_draws_in_a_window(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    env = gym.make("Dyn4Humvee-v1", render_mode="human", **SHORT)
    env.reset(seed=0)
    env.step(np.array([0.0, 0.3], dtype=np.float32))  # human mode renders on each step
    assert env.render() is None
    env.close()


def test_new_options_redraw_with_the_new_task():
    env = gym.make("Dyn4Humvee-v1", render_mode="rgb_array", **SHORT)
    env.reset(seed=0)
    env.render()
    env.reset(options={"course": {"half_width": 5.0}})
    env.render()
    assert env.unwrapped._renderer.core is env.unwrapped.core


def test_without_pygame_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pygame", None)
    with pytest.raises(ImportError, match=r"dyn4-gym\[render\]"):
        gym.make("Dyn4Humvee-v1", render_mode="rgb_array")
    gym.make("Dyn4Humvee-v1")  # no render_mode: no pygame needed


def test_per_row_vehicles_render_on_both_engines():
    """With ``vehicle_ranges`` each row draws its own car; the Numba state's torch view carries
    the rows' parameters (unpacked), equal to the torch engine's."""
    import torch

    kw = dict(render_mode="rgb_array", dtype="float64", vehicle_ranges={"mass": [2000.0, 3000.0],
                                                                           "track_front": [1.6, 2.0]}, **SHORT)
    frames, params = {}, {}
    for engine in ("numba", "torch"):
        env = gym.make("Dyn4Humvee-v1", engine=engine, **kw)
        env.reset(seed=3)
        env.step(np.array([0.1, 0.3], np.float32))
        frames[engine] = env.render()
        params[engine] = env.unwrapped._runner.task_state().p
    for name in ("m", "x_w", "y_w", "Fz0", "k", "lf", "lr", "delta_max"):
        torch.testing.assert_close(getattr(params["numba"], name), getattr(params["torch"], name), rtol=1e-12,
                                   atol=1e-12)
    assert frames["numba"].shape == (480, 480, 3) and (np.abs(frames["numba"].astype(int) - frames["torch"]).max()
                                                      <= 1)
