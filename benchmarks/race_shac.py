"""A first look at a learner on the race task (issue 23), not the benchmark: SHAC with its
default settings (the main job's), a few seeds, evaluated along the way on the 16 held-out
courses in the same harness as the classical baseline (``run_race_baseline(policy=...)``: the
same courses, the same clock). Prints and writes each evaluation as it comes.

    python benchmarks/race_shac.py [--seeds 0 1] [--steps 25000 50000 75000 100000] [--out docs/race_shac.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

import dyn4_gym
from dyn4_gym.agents.evaluation import EVAL_SEEDS
from dyn4_gym.agents.race import run_race_baseline
from dyn4_gym.agents.shac import SHAC, SHACConfig
from dyn4_gym.agents.stats import iqm


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--steps", type=int, nargs="+", default=[25_000, 50_000, 75_000, 100_000])
    ap.add_argument("--eval", type=int, default=len(EVAL_SEEDS), help="held-out courses")
    ap.add_argument("--out", type=str, default=None)
    args = ap.parse_args(argv)
    kw = {k: v for k, v in dyn4_gym.RACE.items() if k != "engine"}
    rows = []
    for seed in args.seeds:
        agent = SHAC(SHACConfig(seed=seed), kw)
        wall = 0.0
        for steps in args.steps:
            t0 = time.perf_counter()
            agent.train(env_steps=steps, log=None)
            wall += time.perf_counter() - t0  # training only

            def policy(obs):
                return agent.policy(obs.to(torch.float32)).to(obs.dtype)

            r = run_race_baseline(EVAL_SEEDS[:args.eval], policy=policy)
            t = np.where(r.finished, r.time, np.inf)
            rows.append(dict(seed=seed, env_steps=agent.env_steps, wall_s=wall, finished=float(r.finished.mean()),
                             iqm_time=iqm(t), times=r.time.tolist()))
            print(f"seed {seed}, {agent.env_steps} env steps, {wall:.0f} s training: finished {r.finished.mean():.2f}, "
                  f"IQM time {iqm(t):.2f} s", flush=True)
            if args.out:
                with open(args.out, "w") as fh:
                    json.dump(dict(task="Dyn4HumveeRace-v0", method="SHAC (SHACConfig defaults)", rows=rows), fh,
                              indent=1)
    return dict(rows=rows)


if __name__ == "__main__":
    main()
