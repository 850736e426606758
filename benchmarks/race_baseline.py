"""The race task's classical baseline (dyn4_gym/agents/race.py), tuned on the validation
courses and measured on the held-out ones (issue 23).

Tuning: a grid over the profile's share of the envelope (``margin``) and the speed loop's
look-ahead (``lead``), each setting driven over ``VALIDATION_SEEDS``; the setting that finishes
most courses, then has the lowest IQM time, wins. Then that setting alone drives
``EVAL_SEEDS``, which tuning never saw. Prints the times (IQM with its 95 % bootstrap interval)
and writes them as JSON.

    python benchmarks/race_baseline.py [--margins 0.7 0.75 0.8 0.85] [--leads 0.2 0.4] [--out docs/race_baseline.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time


from dyn4_gym.agents.evaluation import EVAL_SEEDS, VALIDATION_SEEDS
from dyn4_gym.agents.race import RaceProfileParams, run_race_baseline
from dyn4_gym.agents.stats import bootstrap_ci, iqm


def _summary(r) -> dict:
    lo, hi = bootstrap_ci(r.time)
    return dict(finished=float(r.finished.mean()), iqm_time=iqm(r.time), ci95=[lo, hi],
                times=[float(t) for t in r.time], mean_return=float(r.returns.mean()))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--margins", type=float, nargs="+", default=[0.7, 0.75, 0.8, 0.85])
    ap.add_argument("--leads", type=float, nargs="+", default=[0.2, 0.4])
    ap.add_argument("--validation", type=int, default=len(VALIDATION_SEEDS), help="validation courses to tune on")
    ap.add_argument("--out", type=str, default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    tuning = []
    for margin, lead in itertools.product(args.margins, args.leads):
        prm = RaceProfileParams(margin=margin, lead=lead)
        s = _summary(run_race_baseline(VALIDATION_SEEDS[:args.validation], params=prm))
        tuning.append(dict(margin=margin, lead=lead, **s))
        print(f"validation  margin {margin:.2f} lead {lead:.1f}: finished {s['finished']:.2f}, IQM time "
              f"{s['iqm_time']:.2f} s ({time.perf_counter() - t0:.0f} s)", flush=True)
    best = min(tuning, key=lambda r: (-r["finished"], r["iqm_time"]))
    prm = RaceProfileParams(margin=best["margin"], lead=best["lead"])
    held_out = _summary(run_race_baseline(EVAL_SEEDS, params=prm))
    print(f"held out ({len(EVAL_SEEDS)} courses) with margin {prm.margin:.2f}, lead {prm.lead:.1f}: finished "
          f"{held_out['finished']:.2f}, IQM time {held_out['iqm_time']:.2f} s, 95 % CI "
          f"[{held_out['ci95'][0]:.2f}, {held_out['ci95'][1]:.2f}] s ({time.perf_counter() - t0:.0f} s in all)")
    out = dict(task="Dyn4HumveeRace-v0", method="min-time speed profile + pure pursuit",
               chosen=dict(margin=prm.margin, lead=prm.lead), tuning=tuning, held_out=held_out,
               eval_seeds=list(EVAL_SEEDS))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)
        print(f"wrote {args.out}")
    return out


if __name__ == "__main__":
    main()
