"""Environment throughput, both engines, one table: env steps per second (1 env step = 5 plant
substeps of 0.01 s), with Gymnasium's ``Pendulum-v1`` measured in the same run as the yardstick.

Rows: the single env through ``gym.make`` (its default wrappers) with random actions and resets;
the native vector env (``make_vec``) at 16, 256 and 4096 rows; the SB3 adapter at 16 rows;
``make_vec_env`` of 8 single envs (what SB3 tutorials do); the Numba kernel's plant substeps at
batch 1 and 4096; the first-call times (cold compile or Numba's disk cache); and the torch
engine's rows (eager; ``--compile`` adds torch.compile, minutes per batch size) for comparison.

    python benchmarks/env.py [--compile] [--rows 16 256 4096] [--seconds 2] [--custom-term] [--sensors]
"""

from __future__ import annotations

import os
import platform
import resource
import time

import gymnasium as gym
import numpy as np
import torch

import dyn4_gym  # noqa: F401
from dyn4_gym import cli
from dyn4_gym.envs import Dyn4DiffEnv, Dyn4VectorEnv, RewardTerm

SECONDS = 2.0
# the ids measured: the current versions (docs/env.md, "Versions"); the vector, kernel and
# differentiable rows run the same task through the id's registered keyword arguments
ENV_ID, DRIVER_ID = "Dyn4Humvee-v2", "Dyn4HumveeDriver-v2"
LIMIT_IDS = ("Dyn4HumveeRace-v1", "Dyn4HumveeEco-v2")


def id_kwargs(env_id: str = ENV_ID) -> dict:
    """The keyword arguments ``env_id`` is registered with (its task), engine left to the caller."""
    return {k: v for k, v in gym.spec(env_id).kwargs.items() if k != "engine"}


def _rate(step, n_rows, min_iter=3):
    step()
    n, t0 = 0, time.perf_counter()
    while n < min_iter or time.perf_counter() - t0 < SECONDS:
        step()
        n += 1
    return n * n_rows / (time.perf_counter() - t0)


# the sensors' rows (--sensors): 9 beams over a half circle at 40 m, then with a 4 x 4 patch too
SENSOR_ROWS = (("9 range finders", {"beams": 9}),
               ("9 range finders and a 4 x 4 ground patch", {"beams": 9, "patch_rows": 4, "patch_cols": 4}))


def bench_single(env_id=ENV_ID, **kw):
    """``gym.make`` with its default wrappers, random actions from the action space, resets."""
    env = gym.make(env_id, **kw)
    t0 = time.perf_counter()
    env.reset(seed=0)
    env.step(env.action_space.sample())
    first = time.perf_counter() - t0
    env.action_space.seed(0)
    acts = [env.action_space.sample() for _ in range(1024)]
    i = [0]

    def step():
        _, _, term, trunc, _ = env.step(acts[i[0] % 1024])
        i[0] += 1
        if term or trunc:
            env.reset()

    return _rate(step, 1), first


def bench_vector(n, env_id=ENV_ID, **kw):
    env = Dyn4VectorEnv(num_envs=n, **{**id_kwargs(env_id), **kw})
    t0 = time.perf_counter()
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    low, high = env.single_action_space.low, env.single_action_space.high
    acts = rng.uniform(low, high, (8, n, len(low))).astype(np.float32)
    env.step(acts[0])
    first = time.perf_counter() - t0
    i = [0]

    def step():
        env.step(acts[i[0] % 8])
        i[0] += 1

    return _rate(step, n), first


def bench_render(size=480):
    """Frames per second of ``render()`` (rgb_array, ``size`` x ``size``) on a single env that
    drives between frames, and the same env's steps per second without rendering."""
    env = gym.make(ENV_ID, render_mode="rgb_array")
    env.reset(seed=0)
    a = np.array([0.1, 0.4], dtype=np.float32)

    def frame():
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            env.reset()
        env.render()

    def step():
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            env.reset()

    return _rate(frame, 1), _rate(step, 1)


def _sb3_rate(env, n):
    """Env steps per second of an SB3 ``VecEnv`` of ``n`` rows, cycling 8 random action batches."""
    env.reset()
    acts = np.random.default_rng(0).uniform(-1, 1, (8, n, 2)).astype(np.float32)
    i = [0]

    def step():
        env.step(acts[i[0] % 8])
        i[0] += 1

    return _rate(step, n)


def bench_sb3(n, **kw):
    from dyn4_gym.envs.sb3 import Dyn4SB3VecEnv

    return _sb3_rate(Dyn4SB3VecEnv(num_envs=n, **{**id_kwargs(), **kw}), n)


def bench_make_vec_env(n=8, **kw):
    from stable_baselines3.common.env_util import make_vec_env

    return _sb3_rate(make_vec_env(ENV_ID, n_envs=n, seed=0, env_kwargs=kw), n)


def bench_kernel(B):
    """Plant substeps per second in the Numba kernel (books on), rows of ``ENV_ID``'s task."""
    from dyn4_gym.engine import numba_plant as npl
    from dyn4_gym.envs.engines import NumbaEngine
    from dyn4_gym.envs import TaskCore, EnvConfig

    eng = NumbaEngine(TaskCore(EnvConfig.from_dict(id_kwargs())))
    st = eng.new_state(np.arange(B), np.zeros(B, dtype=np.int64))
    u = np.zeros((B, 2))
    x = st.x.copy()
    return _rate(lambda: npl.dyn4_step_np(x, u, (eng.task.P, eng.task.grade, eng.task.passive), st.terrain,
                                          books=True), B)


def bench_diff(n=256, window=32, compile=False):
    """Env steps per second through ``Dyn4DiffEnv``, forward and backward over a window; compiled:
    the first windows (compiling, or loading Inductor's disk cache) are not timed."""
    env = Dyn4DiffEnv(num_envs=n, compile=compile, **id_kwargs())
    obs = env.reset(seed=0)
    policy = torch.nn.Sequential(torch.nn.Linear(obs.shape[1], 64), torch.nn.Tanh(), torch.nn.Linear(64, 2),
                                 torch.nn.Tanh())

    def window_step():
        o = env.detach()
        total = 0.0
        for _ in range(window):
            o, r, *_ = env.step(policy(o))
            total = total + r.sum()
        total.backward()

    t0 = time.perf_counter()
    window_step()
    first = time.perf_counter() - t0
    window_step()
    t0, k = time.perf_counter(), 0
    while k < 2 or time.perf_counter() - t0 < SECONDS:
        window_step()
        k += 1
    return k * n * window / (time.perf_counter() - t0), first


_FIRST = """
import time
t0 = time.perf_counter()
import gymnasium as gym, numpy as np, dyn4_gym
env = gym.make("{id}")
env.reset(seed=0)
env.step(env.action_space.sample())
t1 = time.perf_counter()
v = gym.make_vec("{id}", num_envs=4096)
v.reset(seed=0)
v.step(np.zeros((4096, 2), np.float32))
print(t1 - t0, time.perf_counter() - t1)
"""


def first_calls():
    """Import + make + reset + step in a new process: cold (an empty Numba cache) then warm (the
    cache the cold run wrote). Returns ``((single, vector 4096) cold, (single, vector) warm)`` [s]."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out = [tuple(float(v) for v in subprocess.run([sys.executable, "-c", _FIRST.replace("{id}", ENV_ID)], env=env, check=True,
                                                       capture_output=True, text=True).stdout.split())
               for _ in range(2)]
    return out


def bench_ppo(engine: str, steps: int = 8192, n_envs: int = 8):
    """SB3 PPO as a tutorial writes it, ``make_vec_env(ENV_ID, n_envs=8)``: env steps
    per second of ``learn`` (rollouts and updates)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env(ENV_ID, n_envs=n_envs, seed=0, env_kwargs={"engine": engine})
    model = PPO("MlpPolicy", env, n_steps=256, batch_size=256, n_epochs=4, seed=0, device="cpu", verbose=0)
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    return model.num_timesteps / (time.perf_counter() - t0)


def _lateral(ctx):
    return -ctx.cross_track.abs() * ctx.speed


def parse_args(argv=None):
    from dyn4_gym import cli

    ap = cli.Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compile", action="store_true", help="add torch.compile'd rows (minutes each)")
    ap.add_argument("--rows", type=cli.int_in(1, 2**20), nargs="+", default=[16, 256, 4096])
    ap.add_argument("--seconds", type=cli.float_in(0.0, 3600.0, lo_open=True), default=SECONDS, help="time per figure")
    ap.add_argument("--custom-term", action="store_true", help="add the single env with one custom reward term")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch engine's rows")
    ap.add_argument("--sensors", action="store_true", help="add the single env with the optional sensors (range "
                    "finders, a ground patch)")
    ap.add_argument("--driver", action="store_true", help=f"add the driver variant ({DRIVER_ID}) rows")
    ap.add_argument("--limits", action="store_true", help="add the single env of the race and eco tasks "
                                                         f"({', '.join(LIMIT_IDS)}: the benchmark's)")
    ap.add_argument("--ppo", action="store_true", help="SB3 PPO on make_vec_env(n_envs=8), both engines")
    ap.add_argument("--first-call", action="store_true", help="time a new process's first step, cold and warm cache")
    ap.add_argument("--render", action="store_true", help="add render() frames per second (rgb_array, 480 x 480)")
    ap.add_argument("--diff-only", action="store_true",
                    help="only the differentiable env's rows (eager and compiled, forward + backward)")
    return ap.parse_args(argv)


@cli.script(default_torch_threads=None)
def main(argv=None):
    global SECONDS
    args = parse_args(argv)
    SECONDS = args.seconds
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; torch {torch.__version__} "
          f"({torch.get_num_threads()} threads); env steps per second, random actions")
    if args.diff_only:
        for comp in (False, True):
            r, first = bench_diff(compile=comp)
            print(f"{'torch ' + ('compiled' if comp else 'eager') + ': differentiable env, 256 rows, fwd+bwd':48s} "
                  f"{r:12,.0f} (first window {first:5.1f} s)", flush=True)
        print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
        return
    pend, _ = bench_single("Pendulum-v1")
    rows = [("Pendulum-v1, gym.make (yardstick)", pend, None, "")]

    def add(name, rate, first=None, vs=None):
        ratio = f"{rate / pend:6.2f}x Pendulum" if vs == "pend" else ""
        rows.append((name, rate, first, ratio))
        print(f"{name:48s} {rate:12,.0f} {'' if first is None else f'(first call {first:5.1f} s)':22s} {ratio}",
              flush=True)

    print(f"{rows[0][0]:48s} {pend:12,.0f}")
    r, first = bench_single()
    add(f"numba: single env, gym.make({ENV_ID!r})", r, first, "pend")
    if args.custom_term:
        r, _ = bench_single(reward_terms=(RewardTerm("lateral", _lateral),), reward_weights={"lateral": 0.1})
        add("numba: single env + 1 custom reward term", r, None, "pend")
    if args.sensors:  # the optional observations (docs/env.md, "Sensors")
        for name, sensors in SENSOR_ROWS:
            r, first = bench_single(sensors=sensors)
            add(f"numba: single env + {name}", r, first, "pend")
        r, _ = bench_vector(max(args.rows), sensors=SENSOR_ROWS[-1][1])
        add(f"numba: make_vec, {max(args.rows)} rows + {SENSOR_ROWS[-1][0]}", r, None, "pend")
    if args.driver:
        r, first = bench_single(DRIVER_ID)
        add(f"numba: single env, {DRIVER_ID}", r, first, "pend")
    if args.limits:  # the race task also samples the friction at its five preview points
        for env_id in LIMIT_IDS:
            r, first = bench_single(env_id)
            add(f"numba: single env, {env_id}", r, first, "pend")
    for n in args.rows:
        r, first = bench_vector(n)
        add(f"numba: make_vec, {n} rows", r, first, "pend")
        if args.driver:
            r, first = bench_vector(n, DRIVER_ID)
            add(f"numba: make_vec, {n} rows, driver", r, first, "pend")
    if args.render:
        fps, steps = bench_render()
        add("numba: single env, step + render() 480 x 480", fps)
        print(f"{'':48s} {1e3 / fps - 1e3 / steps:9.2f} ms a frame ({1e3 / steps:.3f} ms a step without it)")
    single = rows[1][1]
    r = bench_sb3(16)
    add("numba: SB3 adapter, 16 rows", r)
    print(f"{'':48s} {'':12s} {'':22s} {r / single:6.2f}x the single env")
    add("numba: SB3 make_vec_env, 8 single envs", bench_make_vec_env(8))
    for B in (1, 4096):
        add(f"numba kernel: plant substeps/s, batch {B}", bench_kernel(B))
    if not args.no_torch:
        r, first = bench_single(engine="torch")
        add("torch eager: single env, gym.make", r, first, "pend")
        if args.compile:
            r, first = bench_single(engine="torch", compile=True)
            add("torch compiled: single env", r, first, "pend")
        for n in args.rows:
            r, _ = bench_vector(n, engine="torch")
            add(f"torch eager: make_vec, {n} rows", r)
        if args.compile:
            r, first = bench_vector(max(args.rows), engine="torch", compile=True)
            add(f"torch compiled: make_vec, {max(args.rows)} rows", r, first)
        add("torch eager: SB3 adapter, 16 rows", bench_sb3(16, engine="torch"))
        r, _ = bench_diff()
        add("torch eager: differentiable env, 256 rows, fwd+bwd", r)
        r, first = bench_diff(compile=True)
        add("torch compiled: differentiable env, 256 rows, fwd+bwd", r, first)
    if args.ppo:
        nb = bench_ppo("numba")
        add("PPO learn, make_vec_env(n_envs=8), numba engine", nb)
        if not args.no_torch:
            tc = bench_ppo("torch", steps=2048)
            add("PPO learn, make_vec_env(n_envs=8), torch engine", tc)
            print(f"{'':48s} {'':12s} {'':22s} {nb / tc:6.1f}x faster on numba")
    if args.first_call:
        (c1, c2), (w1, w2) = first_calls()
        print(f"first call in a new process (import, make, reset, step): single env {c1:.1f} s cold, {w1:.1f} s "
              f"warm cache; + make_vec 4096 rows {c2:.1f} s cold, {w2:.1f} s warm")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
