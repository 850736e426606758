"""The oracle through the differentiable plant (issue 44; dyn4_gym/agents/oracle.py) on the
held-out courses. On a race: per course, the racing-line driver plus a per-step action residual
and a speed-profile scale, optimised by gradient through the whole episode, the best finishing
run kept. On Eco-v2: the tracked DP speed plan plus a per-step pedal residual and a per-station
speed scale, the least fuel among the runs within the budget kept. Their settings
(``OracleParams``' and ``EcoOracleParams``' defaults) were fixed on two shortened validation
courses before they ran here; nothing is tuned on these courses, each is run once per setting.

Writes a checkpoint after every iteration (``--checkpoint``), so a stopped run goes on where it
stopped, and the result as JSON: per course the oracle's figure (``times`` [s] on a race,
``litres`` [L/100 km] on eco), its start's own (the tuned classical driver's), every
iteration's best figures and seconds.

    python benchmarks/oracle.py race [--iters 30] [--out docs/race_oracle.json]
    python benchmarks/oracle.py race_v1 [--iters 10] [--out docs/race_v1_oracle.json]
    python benchmarks/oracle.py eco_v2 [--iters 10] [--out docs/eco_v2_oracle.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import numpy as np
import torch

from dyn4_gym import ECO_V2, RACE, RACE_V1, cli
from dyn4_gym.agents.evaluation import EVAL_SEEDS
from dyn4_gym.agents.oracle import EcoOracleParams, OracleParams, bolder_starts, eco_oracle, race_oracle
from dyn4_gym.agents.race import RACE_LINE_TUNED, RACE_V1_LINE_TUNED
from dyn4_gym.agents.stats import bootstrap_ci, iqm

# each race's oracle starts from its own tuned racing line, then two bolder settings of it
TASKS = {
    "race": ("Dyn4HumveeRace-v0", RACE, RACE_LINE_TUNED),
    "race_v1": ("Dyn4HumveeRace-v1", RACE_V1, RACE_V1_LINE_TUNED),
}
# the eco oracle starts from the tuned DP speed plan (EcoOracleParams.starts)
ECO_TASKS = {"eco_v2": ("Dyn4HumveeEco-v2", ECO_V2)}


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task", choices=list(TASKS) + list(ECO_TASKS))
    ap.add_argument("--iters", type=int, default=None,
                    help=f"Adam iterations (default: {OracleParams.iters} on a race, {EcoOracleParams.iters} on eco)")
    ap.add_argument("--eval", type=int, default=len(EVAL_SEEDS), help="held-out courses")
    ap.add_argument("--checkpoint", type=str, default=None, help="resume from / write to (runs/oracle/<task>.pt)")
    ap.add_argument("--out", type=str, default=None)
    return ap.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    eco = args.task in ECO_TASKS
    env_id, task = ECO_TASKS[args.task] if eco else TASKS[args.task][:2]
    torch.set_num_threads(1)  # one process per task: two on two cores
    if eco:
        params = EcoOracleParams(**({} if args.iters is None else dict(iters=args.iters)))
        starts = params.starts
    else:
        starts = bolder_starts(TASKS[args.task][2])
        params = OracleParams(iters=OracleParams.iters if args.iters is None else args.iters, starts=starts)
    seeds = EVAL_SEEDS[:args.eval]
    ckpt = args.checkpoint or os.path.join("runs", "oracle", f"{args.task}.pt")
    resume = torch.load(ckpt, weights_only=False) if os.path.exists(ckpt) else None
    if resume is not None:
        print(f"resuming {ckpt} at iteration {resume['iter']}", flush=True)
    t0 = time.perf_counter()
    unit, what = ("L/100 km", "in budget") if eco else ("s", "finished")

    def progress(it, best, seconds, state):
        os.makedirs(os.path.dirname(ckpt) or ".", exist_ok=True)
        torch.save(state, ckpt + ".tmp")
        os.replace(ckpt + ".tmp", ckpt)  # a stop mid-write leaves the last whole checkpoint
        print(f"iter {it}: {np.isfinite(best).sum()}/{len(best)} {what}, IQM {iqm(best):.3f} {unit}, "
              f"mean {np.mean(best):.3f} {unit} ({seconds:.0f} s; {time.perf_counter() - t0:.0f} s in all)", flush=True)

    if eco:
        r = eco_oracle(seeds, task=task, params=params, progress=progress, resume=resume)
        figures, start, key = r.litres, r.start_litres, "litres"
        method = "DP speed plan + pedal residual and speed scale by gradient through the plant"
    else:
        r = race_oracle(seeds, task=task, params=params, progress=progress, resume=resume)
        figures, start, key = r.time, r.start_time, "times"
        method = "racing line + residual and profile scale by gradient through the plant"
    lo, hi = bootstrap_ci(figures)
    out = dict(task=env_id, method=method,
               params=dict(dataclasses.asdict(params), starts=[dataclasses.asdict(p) for p in starts]),
               eval_seeds=list(seeds), **{key: figures.tolist(), f"start_{key}": start.tolist()},
               held_out=dict(finished=float(np.isfinite(figures).mean()), iqm=iqm(figures), ci95=[lo, hi]),
               history=r.history)
    print(f"oracle on {len(seeds)} held-out courses: {what} {out['held_out']['finished']:.2f}, IQM "
          f"{out['held_out']['iqm']:.2f} {unit} [{lo:.2f}, {hi:.2f}]; its start (the tuned classical driver) IQM "
          f"{iqm(start):.2f} {unit}")
    if args.out:
        cli.write_json(args.out, out, indent=1)
        print(f"wrote {args.out}")
    return out


if __name__ == "__main__":
    main()
