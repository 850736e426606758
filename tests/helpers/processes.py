"""Scenarios for tests/test_processes.py, each run in a fresh interpreter: the parent steps a
batched env on the Numba engine (so its row-parallel kernel has started its threads), then the
scenario starts children that step batched envs of their own. Prints one line, ``ok <values>``.

    python tests/helpers/processes.py pool|process|async|subproc|ray
"""

import multiprocessing as mp
import sys

import numpy as np

import gymnasium as gym

import dyn4_gym  # noqa: F401

KW = dict(course={"length": 80.0}, episode_steps=20)


def batched_obs_sum(seed: int) -> float:
    import dyn4_gym  # noqa: F401, F811  (Ray ships this function by value: register the ids in its worker)

    env = gym.make_vec("Dyn4Humvee-v1", num_envs=4, **KW)
    env.reset(seed=seed)
    for _ in range(3):
        obs, *_ = env.step(np.zeros((4, 2), np.float32))
    return float(obs.sum())


def _child(q, seed):
    q.put(batched_obs_sum(seed))


def pool():
    with mp.get_context("fork").Pool(2) as p:
        return p.map_async(batched_obs_sum, [1, 2]).get(timeout=240)


def process():
    q = mp.get_context("fork").Queue()
    ps = [mp.get_context("fork").Process(target=_child, args=(q, s)) for s in (1, 2)]
    for p in ps:
        p.start()
    out = sorted(q.get(timeout=240) for _ in ps)
    for p in ps:
        p.join(timeout=60)
        assert p.exitcode == 0, p.exitcode
    return out


def _make():
    # runs in the child: a batched env there starts the kernel's threads after the fork
    assert np.isfinite(batched_obs_sum(3))
    return gym.make("Dyn4Humvee-v1", **KW)


def async_vec():
    env = gym.vector.AsyncVectorEnv([_make, _make], context="fork")
    env.reset(seed=1)
    obs, *_ = env.step(np.zeros((2, 2), np.float32))
    env.close()
    return [float(obs.sum())]


def subproc():
    from stable_baselines3.common.vec_env import SubprocVecEnv

    env = SubprocVecEnv([_make, _make], start_method="fork")
    env.seed(1)
    env.reset()
    obs, *_ = env.step(np.zeros((2, 2), np.float32))
    env.close()
    return [float(obs.sum())]


def ray_tasks():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        f = ray.remote(batched_obs_sum)
        return ray.get([f.remote(1), f.remote(2)], timeout=240)
    finally:
        ray.shutdown()


SCENARIOS = {"pool": pool, "process": process, "async": async_vec, "subproc": subproc, "ray": ray_tasks}

if __name__ == "__main__":
    parent = batched_obs_sum(0)  # the parent's batched step starts the kernel's threads
    values = SCENARIOS[sys.argv[1]]()
    assert all(np.isfinite(v) for v in values), values
    print("ok", parent, *values)
