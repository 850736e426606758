"""Environment throughput: env steps per second (each is control_dt / hdt = 5 plant substeps).

Single env with random actions, the native vector env at 16, 256 and 4096 rows, the SB3
adapter at 16 rows, and the differentiable env forward plus backward at 256 rows over a 32-step
window. ``--compile`` adds the torch.compile'd step for the single env and the 4096-row vector
env (compiling takes minutes per batch size on a 2-core CPU).

    python benchmarks/env.py [--compile] [--rows 16 256 4096]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import torch

import dyn4_gym  # noqa: F401
import gymnasium as gym
from dyn4_gym.envs import Dyn4DiffEnv, Dyn4VectorEnv


def _rate(step, n_rows, min_time=2.0, min_iter=3):
    step()
    n, t0 = 0, time.perf_counter()
    while n < min_iter or time.perf_counter() - t0 < min_time:
        step()
        n += 1
    return n * n_rows / (time.perf_counter() - t0)


def bench_single(compile_: bool):
    env = gym.make("Dyn4Humvee-v0", compile=compile_)
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def step():
        _, _, term, trunc, _ = env.step(rng.uniform(-1, 1, 2).astype(np.float32))
        if term or trunc:
            env.reset()

    t0 = time.perf_counter()
    step()
    warm = time.perf_counter() - t0
    return _rate(step, 1), warm


def bench_vector(n, compile_: bool):
    env = Dyn4VectorEnv(num_envs=n, compile=compile_)
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def step():
        env.step(rng.uniform(-1, 1, (n, 2)).astype(np.float32))

    t0 = time.perf_counter()
    step()
    warm = time.perf_counter() - t0
    return _rate(step, n), warm


def bench_sb3(n):
    from dyn4_gym.envs.sb3 import Dyn4SB3VecEnv

    env = Dyn4SB3VecEnv(num_envs=n)
    env.reset()
    rng = np.random.default_rng(0)
    return _rate(lambda: env.step(rng.uniform(-1, 1, (n, 2)).astype(np.float32)), n)


def bench_diff(n=256, window=32):
    env = Dyn4DiffEnv(num_envs=n)
    obs = env.reset(seed=0)
    policy = torch.nn.Sequential(torch.nn.Linear(obs.shape[1], 64), torch.nn.Tanh(), torch.nn.Linear(64, 2), torch.nn.Tanh())

    def window_step():
        o = env.detach()
        total = 0.0
        for _ in range(window):
            o, r, *_ = env.step(policy(o))
            total = total + r.sum()
        total.backward()

    t0 = time.perf_counter()
    window_step()
    dt = time.perf_counter() - t0
    return n * window / dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--rows", type=int, nargs="+", default=[16, 256, 4096])
    args = ap.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, float32; env steps per second "
          f"(1 env step = 5 substeps of 0.01 s)")
    rate, _ = bench_single(False)
    print(f"{'single env (eager)':40s} {rate:12,.0f}", flush=True)
    if args.compile:
        rate, warm = bench_single(True)
        print(f"{'single env (compiled)':40s} {rate:12,.0f}   (compile {warm:.0f} s)", flush=True)
    for n in args.rows:
        rate, _ = bench_vector(n, False)
        print(f"{f'vector env, {n} rows (eager)':40s} {rate:12,.0f}", flush=True)
    if args.compile:
        n = max(args.rows)
        rate, warm = bench_vector(n, True)
        print(f"{f'vector env, {n} rows (compiled)':40s} {rate:12,.0f}   (compile {warm:.0f} s)", flush=True)
    print(f"{'SB3 adapter, 16 rows (eager)':40s} {bench_sb3(16):12,.0f}", flush=True)
    print(f"{'differentiable env, 256 rows, fwd+bwd, 32-step window':40s} {bench_diff():12,.0f}", flush=True)
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
