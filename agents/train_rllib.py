"""Train RLlib's PPO on Dyn4Humvee-v1 with several env runners (the ``rllib`` extra).

The env is registered for RLlib with ``ray.tune.register_env("dyn4_humvee", ...)``; each env
runner builds its own copies (numba engine). Ray 2.60's ``ray[rllib]`` pins ``gymnasium==1.2.2``,
so install it in its own environment: ``pip install torch==2.13.0 && pip install -e ".[dev,rllib]"``.

    python agents/train_rllib.py --iterations 20 --env-runners 2 --out runs/rllib
"""

from __future__ import annotations

import json
import os
import time

from dyn4_gym import cli

ENV_NAME = "dyn4_humvee"


def make_env(env_config):
    """RLlib's env creator: ``gym.make("Dyn4Humvee-v1", **env_config)``."""
    import gymnasium as gym

    import dyn4_gym  # noqa: F401

    return gym.make("Dyn4Humvee-v1", **dict(env_config))


def build(env_kwargs: dict, env_runners: int = 2, envs_per_runner: int = 2, batch: int = 4000, seed: int = 0):
    """An RLlib PPO algorithm on the env (registered under ``ENV_NAME``)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.tune import register_env

    register_env(ENV_NAME, make_env)
    config = (PPOConfig().environment(ENV_NAME, env_config=env_kwargs).framework("torch")
              .env_runners(num_env_runners=env_runners, num_envs_per_env_runner=envs_per_runner)
              .training(train_batch_size_per_learner=batch, minibatch_size=min(256, batch), num_epochs=4)
              .debugging(seed=seed))
    return config.build_algo()


def parse_args(argv=None):
    ap = cli.Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=cli.int_in(1, 10**6), default=20)
    ap.add_argument("--env-runners", type=cli.int_in(0, 1024), default=2)
    ap.add_argument("--envs-per-runner", type=cli.int_in(1, 4096), default=2)
    ap.add_argument("--batch", type=cli.int_in(1, 10**8), default=4000, help="env steps per training iteration")
    ap.add_env_kwargs()
    ap.add_argument("--address", default=None, help="a Ray cluster's address (default: start Ray here)")
    ap.add_output("--out", "runs/rllib")
    return ap.parse_args(argv)


@cli.script
def main(argv=None):
    args = parse_args(argv)
    import ray

    ray.init(address=args.address, include_dashboard=False, log_to_driver=False)
    try:
        algo = build(args.env_kwargs, args.env_runners, args.envs_per_runner, args.batch)
        t0, history = time.perf_counter(), []
        for i in range(args.iterations):
            r = algo.train()
            row = dict(iteration=i + 1, env_steps=int(r.get("num_env_steps_sampled_lifetime", 0)),
                       episode_return_mean=r.get("env_runners", {}).get("episode_return_mean"),
                       seconds=round(time.perf_counter() - t0, 1))
            history.append(row)
            print(json.dumps(row), flush=True)
        os.makedirs(args.out, exist_ok=True)
        algo.save_to_path(os.path.abspath(os.path.join(args.out, "checkpoint")))
        cli.write_json(os.path.join(args.out, "history.json"), history, indent=1)
        algo.stop()
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
