"""Whether the race oracle's receding-horizon form is fast enough to be a controller (issue 44,
item 3: "if its receding-horizon form runs at <= 1 s per control step on this machine, add it as
a gradient-MPC baseline").

The receding-horizon form of the oracle (dyn4_gym/agents/oracle.py) re-solves, at every control
step, the oracle's problem over the next ``H`` steps from the car's current state: ``k`` Adam
iterations, each a rollout of ``H`` env steps through the torch plant in float64 and its backward,
for the one car being driven. This script measures what one iteration costs, with the oracle's
own code: ``race_oracle`` on one validation course, one start (the tuned racing line), its
episode cut at ``H`` steps, so that its horizon is ``H`` (nothing finishes) and each iteration is
exactly one receding-horizon iteration from the course's start. A control step then costs ``k``
times that (the re-planning of the line is not counted, so this is a lower bound).

The horizon a braking plan needs on Race-v1: braking from 30 m/s to the 10 m/s corner speed on
mu 0.4 takes 102 m (dyn4_gym.RACE_V1's note), about 5 s at the mean speed, 100 steps at 20 Hz;
``H = 40`` (2 s) is shown as a floor below which the plan cannot see a braking zone at all.
The rule, written before it ran: the baseline is added if some ``H >= 80`` with ``k >= 1``
runs at <= 1 s per control step (``k = 1`` is already a weak optimiser: the oracle took 8).

    python benchmarks/gradient_mpc.py [--horizons 40 80 120] [--iters 4]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from dyn4_gym import RACE_V1, cli
from dyn4_gym.agents.evaluation import VALIDATION_SEEDS
from dyn4_gym.agents.oracle import OracleParams, race_oracle
from dyn4_gym.agents.race import RACE_V1_LINE_TUNED
from dyn4_gym.envs import EnvConfig

ORACLE_ITERS = 8  # the Race-v1 oracle's Adam iterations (docs/race_v1_oracle.json)


def measure(horizon: int, iters: int, seed: int) -> dict:
    """Seconds per iteration (rollout and backward) at ``horizon`` steps, one car: the median past
    the first iteration."""
    r = race_oracle([seed], task=RACE_V1, env_kwargs={"episode_steps": horizon},
                    params=OracleParams(iters=iters, starts=(RACE_V1_LINE_TUNED,)))
    per = [h["seconds"] for h in r.history[:-1]]  # the last iteration only measures (no backward)
    return dict(horizon=horizon, median=float(np.median(per[1:] or per)))


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizons", nargs="+", type=cli.int_in(1, 2400), default=[40, 80, 120])
    ap.add_argument("--iters", type=cli.int_in(1, 100), default=4, help="iterations timed per horizon")
    ap.add_argument("--seed", type=int, default=VALIDATION_SEEDS[0])
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread; Race-v1 validation course {args.seed}, one car")
    print("| horizon [steps] | s per iteration (median) | control step at k = 1 | at k = 8 (the oracle's) |")
    print("|---|---|---|---|")
    rows = []
    for h in args.horizons:
        m = measure(h, args.iters, args.seed)
        rows.append(m)
        print(f"| {h} ({h * EnvConfig.control_dt:.0f} s) | {m['median']:.2f} | {m['median']:.2f} s "
              f"| {m['median'] * ORACLE_ITERS:.1f} s |", flush=True)
    ok = [m for m in rows if m["horizon"] >= 80 and m["median"] <= 1.0]
    print(f"\nthe rule (some H >= 80 at k = 1 within 1 s a control step): {'met' if ok else 'not met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
