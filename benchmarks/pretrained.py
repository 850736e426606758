"""Make the trained agents the package ships (issue 47; dyn4_gym/agents/pretrained.py): per task
id, SHAC trained with the learning benchmark's settings for that task (benchmarks/learning.py:
its budget, its schedule, its training env) from one seed, saved into
``dyn4_gym/data/pretrained/``, then evaluated once on the held-out courses (``EVAL_SEEDS``),
with its record (the command, the commit, the seed, the env steps, the packages, the figures).

    python benchmarks/pretrained.py                          # every task below not shipped yet
    python benchmarks/pretrained.py --ids Dyn4HumveeRace-v0 --force

The seed is fixed (0), never chosen by its held-out figures: an agent is shipped as it comes.
Resumable: an id whose record exists is skipped (``--force`` makes it again).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import learning as L  # noqa: E402  the benchmark's settings, one home

from dyn4_gym import provenance  # noqa: E402
from dyn4_gym.agents import SHAC  # noqa: E402
from dyn4_gym.agents.evaluation import EVAL_SEEDS, evaluate, task_figures  # noqa: E402
from dyn4_gym.agents.pretrained import PRETRAINED_DIR  # noqa: E402
from dyn4_gym.envs.ids import id_kwargs  # noqa: E402

# the ids shipped, and the learning benchmark's task whose settings train each
TASK_OF = {"Dyn4Humvee-v1": "default", "Dyn4HumveeFlat-v1": "flat", "Dyn4HumveeRace-v0": "race",
           "Dyn4HumveeEco-v1": "eco", "Dyn4HumveeEco-v2": "eco_v2", "Dyn4HumveeRace-v1": "race_v1"}
SEED = 0


def figures(policy, env_id: str) -> dict:
    """The held-out figures of ``policy`` on ``env_id`` as registered (the engine's "auto")."""
    kwargs = id_kwargs(env_id)
    ev = evaluate(policy, {k: v for k, v in kwargs.items() if k != "engine"}, seeds=EVAL_SEEDS)
    out = task_figures(ev, kwargs.get("time_budget"))
    out.update(courses=len(EVAL_SEEDS), mean_return=ev.mean_return)
    return out


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def make(env_id: str, compile: bool) -> dict:
    task = TASK_OF[env_id]
    budget = L.budget_of(task, "shac")
    torch.manual_seed(SEED)  # make_run resets dynamo's caches for each run (learning.ShacRun)
    # the benchmark's default energy weight (the tasks at the limits ignore it: their own weights)
    run = L.make_run("shac", task, SEED, L.DEFAULT_WEIGHTS["energy"], compile, budget)
    t0 = time.perf_counter()
    run.train_to(budget)
    wall = time.perf_counter() - t0
    os.makedirs(PRETRAINED_DIR, exist_ok=True)
    stem = os.path.join(PRETRAINED_DIR, f"{env_id}__shac")
    run.agent.save(stem + ".pt")
    policy, _ = SHAC.load_policy(stem + ".pt")  # what pretrained() will load, read back from the file
    rec = dict(env_id=env_id, method="shac", seed=SEED, env_steps=run.env_steps, train_wall_s=round(wall, 1),
               settings=f"benchmarks/learning.py's SHAC on its task {task!r}",
               command=f"python benchmarks/pretrained.py --ids {env_id}", commit=commit(),
               machine=provenance.machine(), figures=figures(policy, env_id))
    with open(stem + ".json", "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    return rec


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", nargs="+", choices=tuple(TASK_OF), default=list(TASK_OF))
    ap.add_argument("--force", action="store_true", help="make an id again even if it ships")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--threads", type=int, default=1)
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    for env_id in args.ids:
        if not args.force and os.path.exists(os.path.join(PRETRAINED_DIR, f"{env_id}__shac.json")):
            print(f"{env_id}: ships already (--force to make it again)")
            continue
        rec = make(env_id, args.compile)
        f = rec["figures"]
        print(f"{env_id}: {rec['env_steps']:,} env steps in {rec['train_wall_s']:.0f} s; held out: {f['counts']} "
              f"{f['counted']:.2f}, IQM {f['iqm']:.2f} {f['unit']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
