"""Batched envs in processes (issue 20, item 4): after the parent stepped a batched env on the
Numba engine, forked workers (multiprocessing Pool and Process, Gymnasium's AsyncVectorEnv,
SB3's SubprocVecEnv) and Ray tasks step batched envs of their own and return, never hang.
Each scenario runs in a fresh interpreter under a timeout, so a hang fails instead of blocking."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import gymnasium as gym

import dyn4_gym  # noqa: F401

HELPER = Path(__file__).parent / "helpers" / "processes.py"


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["pool", "process", "async", "subproc", "ray"])
def test_forked_and_remote_workers_step_batched_envs(scenario):
    if scenario == "subproc":
        pytest.importorskip("stable_baselines3")
    if scenario == "ray":
        pytest.importorskip("ray")
    out = subprocess.run([sys.executable, str(HELPER), scenario], capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-2000:]
    line = out.stdout.strip().splitlines()[-1].split()
    assert line[0] == "ok" and len(line) >= 3
    values = [float(v) for v in line[1:]]
    assert all(np.isfinite(values))
    if scenario in ("pool", "process", "ray"):  # the children's batches are the ones seeds 1 and 2 give here
        np.testing.assert_allclose(sorted(values[1:]), sorted(_helper().batched_obs_sum(s) for s in (1, 2)),
                                   rtol=1e-6)


def _helper():
    import importlib.util

    spec = importlib.util.spec_from_file_location("processes_helper", HELPER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_batched_step_leaves_torch_threads_alone():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        env = gym.make_vec("Dyn4Humvee-v1", num_envs=4, course={"length": 80.0})
        env.reset(seed=0)
        for _ in range(2):
            env.step(np.zeros((4, 2), np.float32))
        assert env.unwrapped.runner.engine.name == "numba"
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_the_kernels_run_on_a_fork_safe_threading_layer():
    import numba

    env = gym.make_vec("Dyn4Humvee-v1", num_envs=4, course={"length": 80.0})
    env.reset(seed=0)
    env.step(np.zeros((4, 2), np.float32))
    assert numba.threading_layer() in ("tbb", "workqueue")
