"""The classical baselines of the tasks at the limits (issue 23), tuned on the validation courses
and measured on the held-out ones.

- ``race`` (dyn4_gym/agents/race.py): the minimum-time speed profile tracked by pure pursuit; a
  grid over the profile's share of the envelope (``margin``) and the speed loop's look-ahead
  (``lead``). Metric: time to finish [s] (an unfinished course counts as infinitely slow).
- ``race_line`` (dyn4_gym/agents/race.py, ``RacingLine``; issue 44): the strongest classical race
  driver here, the minimum-curvature line inside the corridor with the same speed profile over
  its curvature and the friction under it, tracked by pure pursuit on the line; a grid over the
  profile's share of the envelope, the line's distance from the corridor's edge (``safety``) and
  the lookahead's gain. The same metric.
- ``race_v1_line``: the same driver and grid on ``Dyn4HumveeRace-v1`` (issue 44).
- ``eco`` (dyn4_gym/agents/eco.py): pure pursuit on the pedals at a constant speed reference; a
  grid over its scale of the target speed. Metric: litres per 100 km at arrival within the time
  budget (a course not finished in time counts as infinitely thirsty). The eco target's bar.
- ``eco_coast``: the same, coasting the course's last metres; a grid over the speed's scale and
  the distance coasted. The same metric.
- ``eco_plan`` (dyn4_gym/agents/eco_plan.py; issue 44): the strongest classical eco driver here,
  a least-fuel speed plan per course by dynamic programming over the course's heights and the
  powertrain's steady fuel map, tracked on the observation; a grid over the plan's margin on the
  budget, the speed loop's gain and its look-ahead. The same metric.
- ``eco_v2_coast``, ``eco_v2_plan``: the same two drivers and grids on ``Dyn4HumveeEco-v2`` (the
  grade force on: climbing costs the drive).

Each setting drives ``VALIDATION_SEEDS``; the one that finishes most courses, then has the
lowest IQM metric, wins. Then that setting alone drives ``EVAL_SEEDS``, which tuning never saw.
Prints the metric (IQM with its 95 % bootstrap interval) and writes everything as JSON.

    python benchmarks/baselines.py race [--out docs/race_baseline.json]
    python benchmarks/baselines.py race_line [--out docs/race_line_baseline.json]
    python benchmarks/baselines.py race_v1_line [--out docs/race_v1_line_baseline.json]
    python benchmarks/baselines.py eco [--out docs/eco_baseline.json]
    python benchmarks/baselines.py eco_coast [--out docs/eco_coast_baseline.json]
    python benchmarks/baselines.py eco_plan [--out docs/eco_plan_baseline.json]
    python benchmarks/baselines.py eco_v2_coast [--out docs/eco_v2_coast_baseline.json]
    python benchmarks/baselines.py eco_v2_plan [--out docs/eco_v2_plan_baseline.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import json
import time

import numpy as np

from dyn4_gym import ECO_CLOCK, ECO_V2, GRADE_FORCE, RACE, RACE_V1, cli
from dyn4_gym.agents.eco import run_eco_baseline
from dyn4_gym.agents.eco_plan import EcoPlanParams, run_eco_plan
from dyn4_gym.agents.evaluation import EVAL_SEEDS, VALIDATION_SEEDS
from dyn4_gym.agents.race import RaceProfileParams, RacingLineParams, run_race_baseline
from dyn4_gym.agents.stats import bootstrap_ci, iqm


def _race(seeds, margin, lead):
    r = run_race_baseline(seeds, params=RaceProfileParams(margin=margin, lead=lead))
    return r.finished, r.time, dict(times=r.time.tolist(), returns=r.returns.tolist())  # time: inf if not finished


def _race_lines(seeds, settings, task):
    """Every setting of the racing line's grid in one batch on the race ``task`` (a row per setting
    and course: the torch harness's cost is per step, not per row), each setting's (finished,
    time, extra)."""
    n = len(seeds)
    r = run_race_baseline(list(seeds) * len(settings), params=[RacingLineParams(**st) for st in settings for _ in seeds],
                          task=task)
    return [(r.finished[i * n:(i + 1) * n], r.time[i * n:(i + 1) * n],
             dict(times=r.time[i * n:(i + 1) * n].tolist(), returns=r.returns[i * n:(i + 1) * n].tolist()))
            for i in range(len(settings))]


def _eco_extra(r) -> tuple:
    return r.in_budget, r.counted, dict(arrival=r.arrival.tolist(), litres_per_100km=r.litres_per_100km.tolist())


def _eco_plans(seeds, settings, task):
    """Every setting of the eco plan's grid in one batch on the eco ``task`` (a row per setting
    and course), each setting's (in budget, counted litres, extra)."""
    n = len(seeds)
    r, _ = run_eco_plan(list(seeds) * len(settings), params=[EcoPlanParams(**st) for st in settings for _ in seeds],
                        task=task)
    rows = [slice(i * n, (i + 1) * n) for i in range(len(settings))]
    return [_eco_extra(dataclasses.replace(r, arrival=r.arrival[i], litres_per_100km=r.litres_per_100km[i],
                                           returns=r.returns[i])) for i in rows]


# the tasks whose grids run as one batch (the torch harness's cost is per step, not per row), and
# the task each runs on
LINE_TASKS = {"race_line": RACE, "race_v1_line": RACE_V1}
PLAN_TASKS = {"eco_plan": ECO_CLOCK, "eco_v2_plan": ECO_V2}
GRID_RUNNERS = {**{name: functools.partial(_race_lines, task=race) for name, race in LINE_TASKS.items()},
                **{name: functools.partial(_eco_plans, task=eco) for name, eco in PLAN_TASKS.items()}}


def _one_setting(name: str):
    """A one-setting runner for the batched task ``name``."""
    return lambda seeds, **setting: GRID_RUNNERS[name](seeds, [setting])[0]


def _eco(seeds, speed_scale, coast_m=None, env_kwargs=None):
    return _eco_extra(run_eco_baseline(seeds, speed_scale=speed_scale, coast_m=coast_m, env_kwargs=env_kwargs))


COAST_GRID = {"speed_scale": (0.95, 1.0, 1.05, 1.1), "coast_m": (25.0, 50.0, 75.0, 100.0)}
# the eco plan's grid, 16 settings as cruise-and-coast's, written down before it ran
PLAN_GRID = {"margin": (0.5, 1.0, 1.5, 2.0), "speed_gain": (0.15, 0.3), "lead": (0.5, 1.0)}


# task -> (id, method, metric name, its unit, runner, the settings' grid as {name: values})
TASKS = {
    "race": ("Dyn4HumveeRace-v0", "min-time speed profile + pure pursuit", "time", "s", _race,
             {"margin": (0.7, 0.75, 0.8, 0.85), "lead": (0.2, 0.4)}),
    # the strongest classical race driver (issue 44): 24 settings, six times each learner's
    # equal-budget sweep (docs/sweeps.md: 4 each), written down before it ran
    "race_line": ("Dyn4HumveeRace-v0", "min-curvature racing line + min-time profile + pure pursuit", "time", "s",
                  _one_setting("race_line"), {"margin": (0.8, 0.85, 0.9, 0.95), "safety": (0.75, 1.25, 1.75),
                               "lookahead_gain": (0.4, 0.7)}),
    # the same driver and grid on the race where cornering decides (issue 44)
    "race_v1_line": ("Dyn4HumveeRace-v1", "min-curvature racing line + min-time profile + pure pursuit", "time", "s",
                     _one_setting("race_v1_line"), {"margin": (0.8, 0.85, 0.9, 0.95), "safety": (0.75, 1.25, 1.75),
                                     "lookahead_gain": (0.4, 0.7)}),
    "eco": ("Dyn4HumveeEco-v1", "constant-speed pure pursuit (pedals)", "litres_per_100km", "L/100 km", _eco,
            {"speed_scale": (0.9, 0.95, 1.0)}),
    "eco_coast": ("Dyn4HumveeEco-v1", "cruise-and-coast pure pursuit (pedals)", "litres_per_100km", "L/100 km", _eco,
                  COAST_GRID),
    "eco_plan": ("Dyn4HumveeEco-v1", "least-fuel DP speed plan + tracker (pedals)", "litres_per_100km", "L/100 km",
                 _one_setting("eco_plan"), PLAN_GRID),
    "eco_v2_coast": ("Dyn4HumveeEco-v2", "cruise-and-coast pure pursuit (pedals)", "litres_per_100km", "L/100 km",
                     functools.partial(_eco, env_kwargs=GRADE_FORCE), COAST_GRID),
    "eco_v2_plan": ("Dyn4HumveeEco-v2", "least-fuel DP speed plan + tracker (pedals)", "litres_per_100km", "L/100 km",
                    _one_setting("eco_v2_plan"), PLAN_GRID),
}


def _summary(run, seeds, setting: dict, result=None) -> dict:
    done, metric, extra = run(seeds, **setting) if result is None else result
    lo, hi = bootstrap_ci(metric)
    return dict(setting, finished=float(np.mean(done)), iqm=iqm(metric), ci95=[lo, hi], **extra)


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task", choices=list(TASKS))
    ap.add_argument("--validation", type=int, default=len(VALIDATION_SEEDS), help="validation courses to tune on")
    ap.add_argument("--eval", type=int, default=len(EVAL_SEEDS), help="held-out courses to measure on")
    ap.add_argument("--grid", type=str, default=None, help="a JSON grid instead of the task's, {name: [values]}")
    ap.add_argument("--out", type=str, default=None)
    return ap.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    env_id, method, metric, unit, run, grid = TASKS[args.task]
    grid = grid if args.grid is None else {k: tuple(v) for k, v in json.loads(args.grid).items()}
    eval_seeds = EVAL_SEEDS[:args.eval]
    t0 = time.perf_counter()
    tuning = []
    settings = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    batch = GRID_RUNNERS[args.task](VALIDATION_SEEDS[:args.validation], settings) \
        if args.task in GRID_RUNNERS else [None] * len(settings)
    for setting, result in zip(settings, batch):
        s = _summary(run, VALIDATION_SEEDS[:args.validation], setting, result)
        tuning.append(s)
        print(f"validation  {setting}: finished {s['finished']:.2f}, IQM {metric} {s['iqm']:.2f} {unit} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    best = min(tuning, key=lambda r: (-r["finished"], r["iqm"]))
    chosen = {k: best[k] for k in grid}
    held_out = _summary(run, eval_seeds, chosen)
    print(f"held out ({len(eval_seeds)} courses) with {chosen}: finished {held_out['finished']:.2f}, IQM {metric} "
          f"{held_out['iqm']:.2f} {unit}, 95 % CI [{held_out['ci95'][0]:.2f}, {held_out['ci95'][1]:.2f}] "
          f"({time.perf_counter() - t0:.0f} s in all)")
    out = dict(task=env_id, method=method, metric=metric, unit=unit, chosen=chosen, tuning=tuning,
               held_out=held_out, eval_seeds=list(eval_seeds))
    if args.task in LINE_TASKS:  # the floored straight-line reference (issue 44's gate)
        from dyn4_gym.agents.race import straight_line_time

        out["straight_line_time"] = straight_line_time(task=LINE_TASKS[args.task])
        print(f"floored straight line over the course's length: {out['straight_line_time']:.2f} s")
    if args.out:
        cli.write_json(args.out, out, indent=1)  # strict JSON: an inf figure (nothing counted) is null
        print(f"wrote {args.out}")
    return out


if __name__ == "__main__":
    main()
