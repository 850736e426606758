"""Make the trained agents the package ships (issue 47; dyn4_gym/agents/pretrained.py): per task
id and method (SHAC; PPO with ``--methods ppo``), trained with the learning benchmark's settings
for that task (benchmarks/learning.py: its budget, its schedule, its training env) from one
seed, saved into
``dyn4_gym/data/pretrained/``, then evaluated once on the held-out courses (``EVAL_SEEDS``),
with its record (the command, the commit, the seed, the env steps, the packages, the figures).

    python benchmarks/pretrained.py                          # every task below not shipped yet
    python benchmarks/pretrained.py --ids Dyn4HumveeRace-v0 --force
    python benchmarks/pretrained.py --methods ppo --ids Dyn4HumveeRace-v0

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
from dyn4_gym.agents.evaluation import EVAL_SEEDS, evaluate, task_figures  # noqa: E402
from dyn4_gym.agents.pretrained import METHODS, PRETRAINED_DIR, load_files  # noqa: E402
from dyn4_gym.agents.trainers import DEFAULT_TRAINER, TRAINERS  # noqa: E402
from dyn4_gym.envs.ids import id_kwargs  # noqa: E402

# the ids shipped, and the learning benchmark's task whose settings train each
TASK_OF = {"Dyn4Humvee-v1": "default", "Dyn4HumveeFlat-v1": "flat", "Dyn4HumveeRace-v0": "race",
           "Dyn4HumveeEco-v1": "eco", "Dyn4HumveeEco-v2": "eco_v2", "Dyn4HumveeRace-v1": "race_v1"}
# the current versions of the tracking task, which the benchmark does not train on: its default
# task's settings (budget, SHAC's and PPO's settings, energy weight) on the id's own env
TASK_OF.update({"Dyn4Humvee-v2": "default", "Dyn4HumveeDriver-v2": "default"})
OWN_ENV = ("Dyn4Humvee-v2", "Dyn4HumveeDriver-v2")
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


def make(env_id: str, compile: bool, method: str = DEFAULT_TRAINER) -> dict:
    task = TASK_OF[env_id]
    budget = L.budget_of(task, method)
    torch.manual_seed(SEED)  # a SHAC run resets dynamo's caches (dyn4_gym.agents.trainers)
    # the benchmark's default energy weight (the tasks at the limits ignore it: their own weights)
    weight = L.DEFAULT_WEIGHTS["energy"]
    if env_id in OWN_ENV:
        kwargs = {k: v for k, v in id_kwargs(env_id).items() if k != "engine"}
        kwargs["reward_weights"] = {**kwargs.get("reward_weights", {}), "energy": weight}  # env_kwargs_of's
        run = TRAINERS[method].make_run(kwargs, SEED, L.settings_of(method, task, env_id=env_id), compile)
    else:
        run = L.make_run(method, task, SEED, weight, compile, budget)
    t0 = time.perf_counter()
    run.train_to(budget)
    wall = time.perf_counter() - t0
    os.makedirs(PRETRAINED_DIR, exist_ok=True)
    stem = os.path.join(PRETRAINED_DIR, f"{env_id}__{method}")
    run.save(stem)  # SHAC's checkpoint; SB3's own files: the model, its observation normaliser beside it
    policy = load_files(stem, method)  # what pretrained() will load, read back from the files
    rec = dict(env_id=env_id, method=method, seed=SEED, env_steps=run.env_steps, train_wall_s=round(wall, 1),
               settings=f"benchmarks/learning.py's {method.upper()} on its task {task!r}"
                        + (f", on {env_id}'s own env" if env_id in OWN_ENV else ""),
               command=f"python benchmarks/pretrained.py --ids {env_id} --methods {method}", commit=commit(),
               machine=provenance.machine(), figures=figures(policy, env_id))
    with open(stem + ".json", "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    return rec


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", nargs="+", choices=tuple(TASK_OF), default=list(TASK_OF))
    ap.add_argument("--methods", nargs="+", choices=tuple(METHODS), default=[DEFAULT_TRAINER])
    ap.add_argument("--force", action="store_true", help="make an id again even if it ships")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--threads", type=int, default=1)
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    for method in args.methods:
        for env_id in args.ids:
            if not args.force and os.path.exists(os.path.join(PRETRAINED_DIR, f"{env_id}__{method}.json")):
                print(f"{env_id} ({method}): ships already (--force to make it again)")
                continue
            rec = make(env_id, args.compile, method)
            f = rec["figures"]
            print(f"{env_id} ({method}): {rec['env_steps']:,} env steps in {rec['train_wall_s']:.0f} s; held out: "
                  f"{f['counts']} {f['counted']:.2f}, IQM {f['iqm']:.2f} {f['unit']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
