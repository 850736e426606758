"""SHAC's ablation on a task at the limits (issue 44, item 5): what each addition to the gradient
buys, on the validation courses (``VALIDATION_SEEDS``; the held-out ones are the learning
benchmark's, looked at once per final setting).

    python benchmarks/shac_ablation.py                         # Race-v1, every variant, seeds 0-2
    python benchmarks/shac_ablation.py --variants base edge10 --seeds 5
    python benchmarks/shac_ablation.py --report-only

Each variant is SHAC as the learning benchmark trains it on the task (benchmarks/learning.py:
the paper's schedule over the budget, the task's ``LIMIT_SHAC`` settings, the task's training
env) with the variant's ``SHACConfig`` fields on top (and its ``env`` fields over the training env's;
the evaluation is always the task's). Every run is evaluated on the validation
courses at each of ``--evals`` points; each evaluation is a row of ``<out>/ablation.csv``, written
as it comes, and a rerun with the same ``--out`` skips the finished runs (resumable). The table
gives, per variant and point, the finish rate over seeds x courses with its stratified 95 %
interval, the IQM of the task's metric (an unfinished course counts as infinitely slow), the
penalised mean (unfinished at the truncation time), against ``base`` the paired finish-rate
difference with its interval, and where the runs fail (``ablation_diag.csv``): the mean speed and
the shares of courses crashed and still driving at the truncation.

The variants (written down before any ran; their weights from the reward's scale: a step at
20 m/s earns ~1 m of progress, a crash costs 100): ``edgeW``, the corridor barrier
(:mod:`dyn4_gym.agents.barriers`) at weight W per m^2 from 1 m inside the edge, so that a step at
the edge costs W; ``edge10+roll``, with the roll barrier too (500 per rad^2 from 0.8 of the roll
limit: 7 at the limit).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import learning as L  # noqa: E402  the benchmark's own settings, one home

from dyn4_gym import cli  # noqa: E402
from dyn4_gym.agents import shac_published  # noqa: E402
from dyn4_gym.agents.evaluation import VALIDATION_SEEDS, evaluate  # noqa: E402
from dyn4_gym.agents.stats import finish_rate, paired_ci  # noqa: E402
from dyn4_gym.agents.trainers import TRAINERS  # noqa: E402

VARIANTS = {"base": {},
            "edge3": {"edge_barrier": 3.0},
            "edge10": {"edge_barrier": 10.0},
            "edge30": {"edge_barrier": 30.0},
            "edge10+roll": {"edge_barrier": 10.0, "roll_barrier": 500.0},
            # the second batch, after the first: every variant above drove its deterministic
            # policy at a crawl (2.5 m/s on the validation courses, base seed 0 at 100k), not into
            # the edge; Race-v1's crash costs 100 against Race-v0's 20 at the same 0.5 m a step of
            # time, so the training reward's crash at Race-v0's weight (the evaluation keeps 100),
            # alone and with the barrier giving the gradient the flag lacks
            "term20": {"env": {"reward_weights": {"termination": 20.0}}},
            "edge10+term20": {"edge_barrier": 10.0, "env": {"reward_weights": {"termination": 20.0}}},
            # the third batch, written down before the second finished: the exploration noise.
            # SHACConfig's initial log-std -1 puts a std of 0.37 on the pre-tanh steer, +-0.2 rad
            # at the wheel, in a 4 m corridor at 10-20 m/s; eco's -2 (LIMIT_SHAC) is the
            # benchmark's other setting
            "std2": {"init_log_std": -2.0},
            "std2+edge10": {"init_log_std": -2.0, "edge_barrier": 10.0},
            # the fourth batch (written down after the third: at log-std -2 the policies drove
            # 14-15 m/s and crashed on nearly every course where -1's crawled, and std2+edge10
            # finished its first courses): both at five times the budget (1M env steps; PPO's
            # curve was still rising at 2M), evaluated at every 200k (--evals 5)
            "std2-1M": {"init_log_std": -2.0, "budget_scale": 5},
            "std2+edge10-1M": {"init_log_std": -2.0, "edge_barrier": 10.0, "budget_scale": 5},
            # Eco-v2 (written down before it ran): the critic's horizon. Coasting pays 8-35 s
            # later (issue 44), where SHAC's window is 32 steps (1.6 s) and its critic discounts
            # 0.99 a 50 ms step, a horizon of 1 / (1 - gamma) = 100 steps (5 s); 0.999 gives 50 s,
            # the whole 44 s run (the near-1 critic the issue asks to try), all else the benchmark's
            "gamma0.999": {"gamma": 0.999},
            # Eco-v2, the second (written down before it ran, after gamma0.999 learned the budget,
            # not the coast): the finite-horizon critic the issue names. Eco-v2 observes the time
            # left to its budget, which fixes the time to the step limit, so the limit is the
            # horizon's end (SHACConfig.finite_horizon: no bootstrap at truncation) and gamma = 1
            # weighs the fuel 30 s ahead as much as the next step's; all else the benchmark's
            "gamma1+horizon": {"gamma": 1.0, "finite_horizon": True},
            # Eco-v2, the third (written down before it ran, after gamma1+horizon arrived late on
            # two seeds of three): the other half of that suggestion, a longer window. The actor's
            # gradient runs through 32 steps (1.6 s) of the plant; 128 (6.4 s) reaches the short
            # end of the coast's 8-35 s payoff through the plant itself rather than the critic;
            # the same env steps, so a quarter of the actor updates; all else the benchmark's
            "window128": {"horizon": 128},
            # Eco-v2, the fourth (written down before it ran, after window128 was held out once
            # and became the benchmark's: 99 % in budget, still 7.9 % above the eco speed plan):
            # the window doubled again, 256 steps (12.8 s, over a quarter of the 44 s run), at the
            # same env steps, so an eighth of the base's actor updates; all else the base's
            "window256": {"horizon": 256},
            # Eco-v2, the fifth (written down before it ran, after window256 burned 3.3 % more than
            # window128): what the eco speed plan knows and the learner does not, the heights
            # ahead (docs/env.md: the plan sees the whole course's). window128 with the ground patch
            # sensor as a line of six points 10-60 m ahead along the heading (their friction and
            # height over the ground under the car, 12 observation entries), in the training and
            # the evaluation env alike ("obs_env": an observation is the policy's, not a training aid)
            "window128+ahead": {"horizon": 128, "obs_env": {"sensors": {
                "patch_rows": 6, "patch_cols": 1, "patch_start": 10.0, "patch_length": 50.0, "patch_width": 0.0}}}}
# what each evaluation adds beside the metric (ablation_diag.csv): where the runs fail. A course
# ends finished, crashed (the corridor or the roll limit before the truncation) or still driving
# at the truncation (too slow); mean_speed [m/s] over the time driven
DIAG_FIELDS = ("task", "variant", "seed", "point", "mean_speed", "crashed", "truncated")
FIELDS = ("task", "variant", "seed", "point", "env_steps", "wall_s", "finished", "metric", "per_course")


# what every variant starts from: SHAC as the learning benchmark trained it on the task before
# this ablation (the paper's schedule over 200k env steps, the task's LIMIT_SHAC settings then:
# none on the races), held here so the table reproduces after the benchmark takes a winner
BASE_SETTINGS = {"race": {}, "race_v1": {}, "eco": dict(L.LIMIT_SHAC["eco"]),
                 "eco_v2": dict(L.LIMIT_SHAC["eco"])}  # -v2's before window128 won: window 32
BASE_BUDGET = 200_000


def make_agent(task: str, variant: str, seed: int, budget: int, compile: bool):
    """SHAC as the learning benchmark trained it on ``task`` (``BASE_SETTINGS``), with
    ``variant``'s fields."""
    fields = {k: v for k, v in VARIANTS[variant].items() if k not in ("env", "budget_scale", "obs_env")}
    config = shac_published(budget, **{**BASE_SETTINGS[task], **fields})
    env = {**L.env_kwargs_of(task, 0.0, "shac"), **VARIANTS[variant].get("obs_env", {})}
    for k, v in VARIANTS[variant].get("env", {}).items():  # the training env's fields, tables merged
        env[k] = {**env[k], **v} if isinstance(v, dict) and isinstance(env.get(k), dict) else v
    return TRAINERS["shac"].make_run(env, seed, config, compile).agent


def read(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def append(path: str, row: dict, fields: tuple = FIELDS) -> None:
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        if new:
            w.writeheader()
        w.writerow(row)


def budget_of(args, variant: str) -> int:
    """The variant's budget [env steps]: ``BASE_BUDGET`` times its own scale and --scale."""
    return int(BASE_BUDGET * args.scale * VARIANTS[variant].get("budget_scale", 1))


def eval_env(task: str, variant: str) -> dict:
    """The evaluation env: the task as registered, with the variant's observation fields
    (``obs_env``: the policy reads them, so it is evaluated with them too)."""
    return {**L.env_kwargs_of(task, 0.0), **VARIANTS[variant].get("obs_env", {})}


def run_one(args, path: str, variant: str, seed: int) -> None:
    budget = budget_of(args, variant)
    points = [int(budget * j / args.evals) for j in range(1, args.evals + 1)]
    torch.manual_seed(seed)
    agent = make_agent(args.task, variant, seed, budget, args.compile)
    wall = 0.0
    seeds = VALIDATION_SEEDS[:args.courses]
    for target in points:
        t0 = time.perf_counter()
        if target > agent.env_steps:
            agent.train(env_steps=target, log=None)
        wall += time.perf_counter() - t0
        ev = evaluate(agent.policy, eval_env(args.task, variant), seeds=seeds)
        m = L.limit_metric(args.task, ev)
        row = dict(task=args.task, variant=variant, seed=seed, point=target, env_steps=agent.env_steps, wall_s=round(wall, 2),
                   finished=float(np.isfinite(m).mean()), metric=L.iqm(m), per_course=" ".join(f"{v:.6g}" for v in m))
        append(path, row)
        # positions per course: the start and one per step driven (NaN after the end)
        steps = np.isfinite(ev.traces[:, :, 0]).sum(0) - 1
        ended_early = steps < L.LIMITS[args.task][1]["episode_steps"]
        unfinished = ~np.isfinite(m)
        append(path.replace("ablation.csv", "ablation_diag.csv"),
               dict(task=args.task, variant=variant, seed=seed, point=target, mean_speed=ev.mean_speed,
                    crashed=float((unfinished & ended_early).mean()), truncated=float((unfinished & ~ended_early).mean())),
               DIAG_FIELDS)
        print(f"{variant:12s} seed {seed}  {agent.env_steps:>8,}/{budget:,}  finished {row['finished']:.2f}  "
              f"IQM {row['metric']:.2f}  train {wall:.0f} s", flush=True)


def tables(rows: list[dict], task: str) -> dict:
    """(variant, evaluation point [env steps]) -> {seed: per-course metric} (a SHAC window
    overshoots its point by under one window)."""
    out: dict = {}
    for r in rows:
        if r["task"] != task:
            continue
        out.setdefault((r["variant"], int(r["point"])), {})[int(r["seed"])] = L.per_course(r)
    return out


def diagnostics(rows: list[dict], task: str) -> dict:
    """(variant, point) -> the mean over seeds of mean_speed, crashed and truncated."""
    acc: dict = {}
    for r in rows:
        if r["task"] == task:
            acc.setdefault((r["variant"], int(r["point"])), {})[int(r["seed"])] = \
                [float(r[k]) for k in ("mean_speed", "crashed", "truncated")]
    return {k: np.mean(list(v.values()), axis=0) for k, v in acc.items()}


def report(rows: list[dict], task: str, diag_rows: list[dict] = ()) -> str:
    """The ablation table (markdown)."""
    cap = L._cap(task)
    tabs = tables(rows, task)
    diag = diagnostics(list(diag_rows), task)
    lines = ["| variant | env steps | seeds | finished [95 % CI] | IQM | penalised mean | finished vs base (paired) "
             "| mean speed | crashed | still driving at the end |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (variant, steps), per in sorted(tabs.items(), key=lambda kv: (list(VARIANTS).index(kv[0][0]), kv[0][1])):
        seeds = sorted(per)
        v = np.stack([per[s] for s in seeds])
        fig = L._figure(v, cap)
        lo, hi = fig["counted_ci95"]
        base = tabs.get(("base", steps), {})
        paired = "" if variant == "base" else "n/a"
        shared = [s for s in seeds if s in base]
        if variant != "base" and shared:
            d, dlo, dhi = paired_ci(np.stack([per[s] for s in shared]), np.stack([base[s] for s in shared]),
                                    stat=finish_rate, compare=lambda x, y: x - y)
            paired = f"{d:+.2f} [{dlo:+.2f}, {dhi:+.2f}] ({len(shared)} seeds)"
        iqm = f"{fig['iqm']:.2f}" if np.isfinite(fig["iqm"]) else "none (> 25 % unfinished)"
        pm = f"{fig['penalised_mean']:.2f}" if cap is not None else ""
        d = diag.get((variant, steps))
        extra = f"{d[0]:.1f} m/s | {d[1]:.2f} | {d[2]:.2f}" if d is not None else "- | - | -"
        lines.append(f"| {variant} | {steps:,} | {len(seeds)} | {fig['counted']:.2f} [{lo:.2f}, {hi:.2f}] | {iqm} | {pm} | {paired} "
                     f"| {extra} |")
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=tuple(L.LIMITS), default="race_v1")
    ap.add_argument("--variants", nargs="+", choices=tuple(VARIANTS), default=list(VARIANTS))
    ap.add_argument("--seeds", type=cli.int_in(1, 1000), default=3)
    ap.add_argument("--scale", type=cli.float_in(0.0, 1e6, lo_open=True), default=1.0, help="times the budget")
    ap.add_argument("--evals", type=cli.int_in(1, 100), default=2, help="evaluations per run")
    ap.add_argument("--courses", type=cli.int_in(1, len(VALIDATION_SEEDS)), default=len(VALIDATION_SEEDS))
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--threads", type=cli.int_in(1, 256), default=1, help="torch threads (one run at a time)")
    ap.add_argument("--out", default="runs/shac_ablation")
    ap.add_argument("--report-only", action="store_true")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(args.threads)
    path = os.path.join(args.out, "ablation.csv")
    if not args.report_only:
        for variant in args.variants:
            budget = budget_of(args, variant)
            for seed in range(args.seeds):
                done = [r for r in read(path) if r["task"] == args.task and r["variant"] == variant
                        and int(r["seed"]) == seed and int(r["env_steps"]) >= budget]
                if not done:
                    run_one(args, path, variant, seed)
    print(report(read(path), args.task, read(path.replace("ablation.csv", "ablation_diag.csv"))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
