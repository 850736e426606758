"""Evaluate a saved policy or the classical controller on the held-out seeds; print the figures
and write a plot of the trajectories and the energy lines.

    python agents/evaluate.py --policy classical
    python agents/evaluate.py --policy runs/diff/model.pt --out runs/eval
"""

import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from dyn4_gym.agents import CheckpointError
from dyn4_gym.agents.loading import load_policy
from dyn4_gym.envs import ConfigError
from dyn4_gym.agents.evaluation import EVAL_SEEDS, evaluate

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="classical",
                    help="'classical', a differentiable-trainer model (.pt) or an SB3 model (.zip from train_sb3.py)")
    ap.add_argument("--env-kwargs", default="{}", help="JSON of Dyn4Humvee-v1 keyword arguments")
    ap.add_argument("--seeds", type=_seed_count, default=len(EVAL_SEEDS),
                    help=f"how many held-out seeds, 1 to {len(EVAL_SEEDS)}")
    ap.add_argument("--out", default="runs/eval")
    args = ap.parse_args(argv)
    try:
        env_kwargs = json.loads(args.env_kwargs)
        if not isinstance(env_kwargs, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        ap.error(f"--env-kwargs must be a JSON object: {exc}")
    try:
        policy, name, env_kwargs = load_policy(args.policy, env_kwargs)
        res = evaluate(policy, env_kwargs, seeds=EVAL_SEEDS[: args.seeds])
    except (CheckpointError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    _report(args, name, res)


def _seed_count(text: str) -> int:
    n = int(text)
    if not 1 <= n <= len(EVAL_SEEDS):
        raise argparse.ArgumentTypeError(f"must be 1 to {len(EVAL_SEEDS)}, got {n}")
    return n


def _report(args, name, res):
    print(f"{name} on {args.seeds} held-out seeds")
    for k, v in res.row().items():
        print(f"  {k:16s} {v:10.3f}")

    os.makedirs(args.out, exist_ok=True)
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    for i in range(res.traces.shape[1]):
        ax[0].plot(res.courses[i, :, 0], res.courses[i, :, 1], color="0.8", lw=0.8)
        ax[0].plot(res.traces[:, i, 0], res.traces[:, i, 1], lw=1.0)
        ax[1].plot(res.energy[:, i], lw=1.0)
    ax[0].set(title=f"{name}: trajectories", xlabel="X [m]", ylabel="Y [m]")
    ax[0].axis("equal")
    ax[1].set(title="cumulative positive drive work", xlabel="step", ylabel="kJ")
    fig.tight_layout()
    path = os.path.join(args.out, "evaluation.png")
    fig.savefig(path, dpi=110)
    with open(os.path.join(args.out, "evaluation.json"), "w") as fh:
        row = {k: (v if math.isfinite(v) else None) for k, v in res.row().items()}  # strict JSON
        json.dump(dict(policy=name, **row), fh, indent=1, allow_nan=False)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
