"""Soak: many random env steps on the vector env (all resets), counting non-finite states and
observations outside the observation space; prints progress as it goes and the wall time.
``--env-id`` soaks a registered task (its kwargs, e.g. Dyn4HumveeRace-v1 or Dyn4HumveeEco-v2);
actions are drawn uniformly from its action space.

    python benchmarks/soak.py [--steps 1e7] [--rows 4096] [--engine auto] [--env-id Dyn4Humvee-v2]
"""

from __future__ import annotations

import time

import numpy as np

from dyn4_gym.envs import Dyn4VectorEnv
from dyn4_gym import cli


def parse_args(argv=None):
    from dyn4_gym import cli

    ap = cli.Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=cli.float_in(1.0, 1e13), default=1e7, help="env steps in all (rows x iterations)")
    ap.add_argument("--rows", type=cli.int_in(1, 2**20), default=4096)
    ap.add_argument("--engine", default="auto", choices=["auto", "numba", "torch"])
    ap.add_argument("--seed", type=cli.seed, default=0)
    ap.add_argument("--env-id", default=None, help="a registered dyn4_gym id: soak its task (default: the default config)")
    return ap.parse_args(argv)


@cli.script(default_torch_threads=None)
def main(argv=None):
    args = parse_args(argv)
    kwargs = {}
    if args.env_id is not None:
        import gymnasium as gym

        import dyn4_gym  # noqa: F401 (registers the ids)

        kwargs = {k: v for k, v in gym.spec(args.env_id).kwargs.items() if k != "engine"}
    env = Dyn4VectorEnv(num_envs=args.rows, engine=args.engine, **kwargs)
    low, high = env.single_action_space.low, env.single_action_space.high
    obs, _ = env.reset(seed=args.seed)
    space = env.single_observation_space
    rng = np.random.default_rng(args.seed)
    iters = int(np.ceil(args.steps / args.rows))
    bad_obs = nonfinite = episodes = 0
    t0 = last = time.perf_counter()
    for k in range(iters):
        obs, r, te, tr, info = env.step(rng.uniform(low, high, (args.rows, low.size)).astype(np.float32))
        inside = np.isfinite(obs).all(-1) & (obs >= space.low).all(-1) & (obs <= space.high).all(-1)
        bad_obs += int((~inside).sum())
        nonfinite += int(info["nonfinite"].sum()) + int((~np.isfinite(r)).sum())
        episodes += int((te | tr).sum())
        if time.perf_counter() - last > 30 or k == iters - 1:
            last = time.perf_counter()
            done = (k + 1) * args.rows
            print(f"{done:12,d} steps  {done / (last - t0):9,.0f} steps/s  episodes {episodes:9,d}  "
                  f"non-finite {nonfinite}  obs outside the space {bad_obs}", flush=True)
    wall = time.perf_counter() - t0
    print(f"soak{' of ' + args.env_id if args.env_id else ''}: {iters * args.rows:,d} env steps ({args.rows} rows, engine {env.runner.engine.name}) in {wall:.0f} s; "
          f"{episodes:,d} episodes; non-finite {nonfinite}; observations outside the space {bad_obs}")
    return 0 if nonfinite == 0 and bad_obs == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
