"""The race's oracle through the differentiable plant (issue 44; dyn4_gym/agents/oracle.py) on the
held-out courses: per course, the racing-line driver plus a per-step action residual and a
speed-profile scale, optimised by gradient through the whole episode, the best finishing run
kept. Its settings (``OracleParams``' defaults) were fixed on two shortened validation courses
before it ran here; nothing is tuned on these courses, it is run once per setting.

Writes a checkpoint after every iteration (``--checkpoint``), so a stopped run goes on where it
stopped, and the result as JSON: per course the oracle's time, the tuned racing line's own time,
every iteration's best times and seconds.

    python benchmarks/oracle.py race [--iters 30] [--out docs/race_oracle.json]
    python benchmarks/oracle.py race_v1 [--iters 10] [--out docs/race_v1_oracle.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import numpy as np
import torch

from dyn4_gym import RACE, RACE_V1, cli
from dyn4_gym.agents.evaluation import EVAL_SEEDS
from dyn4_gym.agents.oracle import OracleParams, bolder_starts, race_oracle
from dyn4_gym.agents.race import RACE_LINE_TUNED, RACE_V1_LINE_TUNED
from dyn4_gym.agents.stats import bootstrap_ci, iqm

# each race's oracle starts from its own tuned racing line, then two bolder settings of it
TASKS = {
    "race": ("Dyn4HumveeRace-v0", RACE, RACE_LINE_TUNED),
    "race_v1": ("Dyn4HumveeRace-v1", RACE_V1, RACE_V1_LINE_TUNED),
}


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task", choices=list(TASKS))
    ap.add_argument("--iters", type=int, default=OracleParams.iters, help="Adam iterations")
    ap.add_argument("--eval", type=int, default=len(EVAL_SEEDS), help="held-out courses")
    ap.add_argument("--checkpoint", type=str, default=None, help="resume from / write to (runs/oracle/<task>.pt)")
    ap.add_argument("--out", type=str, default=None)
    return ap.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    env_id, task, tuned = TASKS[args.task]
    torch.set_num_threads(1)  # one process per race: two on two cores
    starts = bolder_starts(tuned)
    params = OracleParams(iters=args.iters, starts=starts)
    seeds = EVAL_SEEDS[:args.eval]
    ckpt = args.checkpoint or os.path.join("runs", "oracle", f"{args.task}.pt")
    resume = torch.load(ckpt, weights_only=False) if os.path.exists(ckpt) else None
    if resume is not None:
        print(f"resuming {ckpt} at iteration {resume['iter']}", flush=True)
    t0 = time.perf_counter()

    def progress(it, best, seconds, state):
        os.makedirs(os.path.dirname(ckpt) or ".", exist_ok=True)
        torch.save(state, ckpt + ".tmp")
        os.replace(ckpt + ".tmp", ckpt)  # a stop mid-write leaves the last whole checkpoint
        print(f"iter {it}: {np.isfinite(best).sum()}/{len(best)} finished, IQM {iqm(best):.3f} s, "
              f"mean {np.mean(best):.3f} s ({seconds:.0f} s; {time.perf_counter() - t0:.0f} s in all)", flush=True)

    r = race_oracle(seeds, task=task, params=params, progress=progress, resume=resume)
    lo, hi = bootstrap_ci(r.time)
    out = dict(task=env_id, method="racing line + residual and profile scale by gradient through the plant",
               params=dict(dataclasses.asdict(params), starts=[dataclasses.asdict(p) for p in starts]),
               eval_seeds=list(seeds), times=r.time.tolist(), start_times=r.start_time.tolist(),
               held_out=dict(finished=float(np.isfinite(r.time).mean()), iqm=iqm(r.time), ci95=[lo, hi]),
               history=r.history)
    print(f"oracle on {len(seeds)} held-out courses: finished {out['held_out']['finished']:.2f}, IQM "
          f"{out['held_out']['iqm']:.2f} s [{lo:.2f}, {hi:.2f}]; its start (the tuned racing line) IQM "
          f"{iqm(r.start_time):.2f} s")
    if args.out:
        cli.write_json(args.out, out, indent=1)
        print(f"wrote {args.out}")
    return out


if __name__ == "__main__":
    main()
