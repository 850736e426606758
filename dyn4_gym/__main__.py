"""The main job: ``python -m dyn4_gym`` trains a policy through the plant (SHAC) for a budget of
env steps (the same result for the same seed on one installation; minutes on two cores),
evaluates it against the task's classical drivers on held-out courses, and writes plots
(``runs/main/`` by default).

Its task is ``Dyn4HumveeRace-v1``, the learning benchmark's race where cornering decides
(docs/tasks.md), with the benchmark's SHAC (the paper's schedule, its Race-v1 settings and
budget: seed 0 of the benchmark's 10), against the racing line (the strongest classical driver,
issue 44) and the oracle through the plant (its held-out times as the benchmark measured them,
read, not rerun), beside the floored straight-line reference. ``--task race`` trains on
``Dyn4HumveeRace-v0`` (the 400 m race) against the centre-line minimum-time profile and the
racing line; ``--task v1`` on ``Dyn4Humvee-v1`` against pure pursuit (the project's first task).

    python -m dyn4_gym [--env-steps N] [--seconds S] [--task race_v1|race|v1] [--out runs/main]
    python -m dyn4_gym.demo      # the plant's manoeuvres and energy books only
"""

from __future__ import annotations

import argparse
import os
import time

from . import RACE, RACE_V1, cli
from .agents import SHAC, PurePursuit, SHACConfig, shac_published
from .agents.race import RACE_LINE_TUNED, RACE_TUNED, RACE_V1_LINE_TUNED, RACE_V1_SHAC, RACE_V1_SHAC_BUDGET


# each task's id and the main job's budget on it [env steps]: on Race-v1 the benchmark's (below
# 1M its seeds finish few courses: docs/tasks.md, "SHAC's ablation on Race-v1")
TASK_IDS = {"race_v1": "Dyn4HumveeRace-v1", "race": "Dyn4HumveeRace-v0", "v1": "Dyn4Humvee-v1"}
ENV_STEPS = {"race_v1": RACE_V1_SHAC_BUDGET, "race": 200_000, "v1": 200_000}
# each race's keyword arguments, its SHAC settings over the paper's schedule, and its classical
# drivers by name (Race-v1: the racing line, the strongest; Race-v0 also the centre-line baseline)
RACE_TASKS = {"race_v1": RACE_V1, "race": RACE}
RACE_SHAC = {"race_v1": RACE_V1_SHAC, "race": {}}
RACE_DRIVERS = {"race_v1": {"racing line": RACE_V1_LINE_TUNED},
                "race": {"baseline": RACE_TUNED, "racing line": RACE_LINE_TUNED}}


class Progress:
    """One line, rewritten in place: a bar, env steps, the recent episodes' return and an ETA.

    The ETA comes from the rate since the first iteration, which carries the one-off cost of
    compiling (minutes the first time) and would otherwise inflate it a hundredfold; that first
    window's time is said on a line of its own."""

    def __init__(self, budget: int):
        self.budget, self.first = budget, None

    def __call__(self, rec: dict) -> None:
        import sys

        done = min(rec["env_steps"] / self.budget, 1.0)
        if self.first is None:
            self.first = (rec["time"], rec["env_steps"])
            print(f"first window (compiling included): {rec['time']:.1f} s")
        t1, s1 = self.first
        rate = (rec["env_steps"] - s1) / (rec["time"] - t1) if rec["time"] > t1 else None
        eta = "  ..." if rate is None else f"{max(self.budget - rec['env_steps'], 0) / rate:5.0f} s"
        bar = "#" * int(30 * done) + "." * (30 - int(30 * done))
        sys.stdout.write(f"\r[{bar}] {done:4.0%} {rec['env_steps']:>8,} env steps  return {rec['episode_return']:7.2f}  "
                         f"{rec['time']:5.0f} s, ETA {eta}")
        sys.stdout.flush()


def parse_args(argv=None):
    from .agents.evaluation import EVAL_SEEDS
    from .agents.shac import _SIZE_BOUNDS

    ap = cli.Parser(prog="python -m dyn4_gym", description=__doc__.splitlines()[0])
    ap.add_argument("--env-steps", type=cli.positive_int, default=None,
                    help="training budget in env steps (default: the task's, " +
                    ", ".join(f"{t} {n:,}" for t, n in ENV_STEPS.items()) + ")")
    ap.add_argument("--seconds", type=cli.positive_float, default=None,
                    help="also stop after this wall-clock time (machine-dependent)")
    ap.add_argument("--seed", type=cli.seed, default=0)
    ap.add_argument("--task", choices=tuple(TASK_IDS), default="race_v1",
                    help="race_v1: Dyn4HumveeRace-v1 against the racing line and the oracle; race: Dyn4HumveeRace-v0 "
                    "against the min-time profile and the racing line; v1: Dyn4Humvee-v1 against pure pursuit")
    ap.add_argument("--num-envs", type=cli.int_in(1, _SIZE_BOUNDS["num_envs"]), default=None,
                    help="cars a window (default: 64 on the race, the published schedule's; 32 on v1)")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True,
                    help="torch.compile the env step with its backward (minutes once; cached on disk)")
    ap.add_argument("--eval-seeds", type=cli.int_in(1, len(EVAL_SEEDS)), default=None,
                    help="held-out courses (default: all 16 on the race, 8 on v1)")
    ap.add_env_kwargs()
    ap.add_output("--out", "runs/main")
    return ap.parse_args(argv)


@cli.script
def main(argv=None) -> dict:
    args = parse_args(argv)

    matplotlib = cli.require("matplotlib", "the main job's plot")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .agents.evaluation import EVAL_SEEDS, evaluate

    os.makedirs(args.out, exist_ok=True)
    race = args.task in RACE_TASKS
    seeds = EVAL_SEEDS[: args.eval_seeds or (len(EVAL_SEEDS) if race else 8)]
    budget = args.env_steps or ENV_STEPS[args.task]
    if race:
        task = RACE_TASKS[args.task]
        env_kwargs = {**{k: v for k, v in task.items() if k != "engine"}, **args.env_kwargs}
        config = shac_published(budget, seed=args.seed, compile=args.compile,
                                **RACE_SHAC[args.task],
                                **({"num_envs": args.num_envs} if args.num_envs else {}))
    else:
        env_kwargs = args.env_kwargs
        config = SHACConfig(num_envs=args.num_envs or SHACConfig.num_envs, seed=args.seed, compile=args.compile)
    name = TASK_IDS[args.task]
    print(f"dyn4-gym: training a policy through the plant (SHAC) for {budget:,} env steps on {name}")
    t0 = time.perf_counter()
    if args.compile:
        try:  # where Inductor keeps its cache (TORCHINDUCTOR_CACHE_DIR moves it)
            from torch._inductor.runtime.cache_dir_utils import cache_dir

            cache = cache_dir()
        except Exception:  # pragma: no cover - another torch version
            cache = "Inductor's cache folder"
        print("compiling with torch.compile, in the first window: two graphs, one plant substep with its course "
              "projection and sums (run 5 times a step) and the step's finish (checks, reward terms, observation), "
              f"each forward and backward. Minutes the first time on a small or busy machine, seconds once cached "
              f"({cache}); --no-compile skips it and trains eagerly (docs/getting-started.md, 'First run').")
    agent = SHAC(config, env_kwargs)
    history = agent.train(seconds=args.seconds, env_steps=budget, log=None, on_iteration=Progress(budget))
    print()
    agent.save(os.path.join(args.out, "model.pt"))
    print(f"\nevaluating on {len(seeds)} held-out seeds ...")
    if race:
        return _race_report(args, agent, task, name, RACE_DRIVERS[args.task], env_kwargs, history, seeds, t0)
    mine = evaluate(agent.policy, env_kwargs, seeds=seeds)
    ref = evaluate(PurePursuit.for_env(env_kwargs), env_kwargs, seeds=seeds)
    print(f"\n{'after ' + str(agent.env_steps) + ' env steps':34s}{'trained':>12s}{'classical':>12s}")
    for k in mine.row():
        print(f"{k:34s}{mine.row()[k]:12.3f}{ref.row()[k]:12.3f}")
    target = agent.env.config.target_speed
    verdict = "beats" if mine.mean_return > ref.mean_return else "does not beat"
    print(f"\nthe trained policy finished {round(mine.finished * len(seeds))} of {len(seeds)} held-out courses at "
          f"{mine.mean_speed:.2f} m/s (target {target:g}) and {verdict} the classical controller: return "
          f"{mine.mean_return:.1f} against {ref.mean_return:.1f} ({mine.mean_return / ref.mean_return - 1:+.1%}), "
          f"{mine.energy_per_km:.0f} against {ref.energy_per_km:.0f} kJ/km")

    fig, ax = plt.subplots(1, 3, figsize=(16, 4.5))
    ax[0].plot([h["env_steps"] for h in history], [h["episode_return"] for h in history])
    ax[0].axhline(ref.mean_return, color="k", ls="--", label="classical (held-out seeds)")
    ax[0].axhline(mine.mean_return, color="tab:green", ls=":", label="trained (held-out seeds)")
    ax[0].set(xlabel="environment steps", ylabel="return", title="training episodes' return")
    ax[0].legend()
    for a, res, name in ((ax[1], mine, "trained"), (ax[2], ref, "classical")):
        for i in range(res.traces.shape[1]):
            a.plot(res.courses[i, :, 0], res.courses[i, :, 1], color="0.85", lw=0.8)
            a.plot(res.traces[:, i, 0], res.traces[:, i, 1], lw=1.0)
        a.set(title=f"{name}: return {res.mean_return:.1f}, finished {res.finished:.0%}", xlabel="X [m]", ylabel="Y [m]")
        a.axis("equal")
    fig.tight_layout()
    path = os.path.join(args.out, "main.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    cli.write_json(os.path.join(args.out, "evaluation.json"),
                   dict(trained=mine.row(), classical=ref.row(), env_steps=agent.env_steps), indent=1)
    print(f"\nwrote {path}, {args.out}/evaluation.json and {args.out}/model.pt ({time.perf_counter() - t0:.0f} s)")
    return dict(trained=mine.row(), classical=ref.row(), plot=path)


def _race_report(args, agent, task: dict, env_id: str, drivers: dict, env_kwargs: dict, history, seeds, t0) -> dict:
    """A race (``task``, registered as ``env_id``): the trained policy's and each classical
    driver's time to finish per held-out course (``drivers``: name -> its tuned parameters,
    ``RACE_DRIVERS``), the oracle's where the
    benchmark measured it on these courses (``agents.oracle.stored_times``: the race as
    registered, no ``--env-kwargs``), the IQM over courses (an unfinished course counts as
    infinitely slow) with its 95 % bootstrap interval, the mean with an unfinished course at the
    truncation time, the trained policy against each of them paired on the same courses, the
    floored straight-line reference, a plot, and the JSON."""
    import matplotlib.pyplot as plt
    import numpy as np

    from .agents.evaluation import evaluate
    from .agents.oracle import stored_times
    from .agents.race import run_race_baseline, straight_line_time, truncation_time
    from .agents.stats import bootstrap_ci, iqm, paired_ci, penalised_mean
    from .envs import EnvConfig

    mine = evaluate(agent.policy, env_kwargs, seeds=seeds)
    print("the classical drivers on the same courses (the racing line plans each course first) ...", flush=True)
    runs = {name: run_race_baseline(seeds, env_kwargs=args.env_kwargs, params=prm, task=task)
            for name, prm in drivers.items()}
    floor = straight_line_time(args.env_kwargs, task=task)
    cols = [("trained", mine.arrival)] + [(name, r.time) for name, r in runs.items()]  # inf where not finished
    oracle = None if args.env_kwargs else stored_times(env_id, seeds)
    if oracle is not None:
        cols.append(("oracle", oracle))
    cap = truncation_time(args.env_kwargs, task=task)
    fig_of = {}
    for name, t in cols:
        lo, hi = bootstrap_ci(t)
        fig_of[name] = dict(finished=int(np.isfinite(t).sum()), courses=len(t), iqm_time=iqm(t), ci95=[lo, hi],
                            mean_time=penalised_mean(t, cap), times=[float(v) for v in t])
    width = 16 if len(cols) < 4 else 15  # the column width: four columns keep the table in 100 characters
    print(f"\n{'after ' + str(agent.env_steps) + ' env steps':34s}" + "".join(f"{n:>{width}s}" for n, _ in cols))
    print(f"{'courses finished':34s}" + "".join(f"{fig_of[n]['finished']:>{width - 3}d}/{len(seeds):<2d}" for n, _ in cols))
    print(f"{'IQM time to finish [s]':34s}" + "".join(f"{fig_of[n]['iqm_time']:{width}.2f}" for n, _ in cols))
    print(f"{'its 95 % bootstrap CI [s]':34s}" + "".join(
        f"{fig_of[n]['ci95'][0]:.2f}-{fig_of[n]['ci95'][1]:.2f}".rjust(width) for n, _ in cols))
    print(f"{f'mean time, unfinished at {cap:.0f} s [s]':34s}" + "".join(f"{fig_of[n]['mean_time']:{width}.2f}"
                                                                       for n, _ in cols))
    print(f"{'mean speed [m/s]':34s}{mine.mean_speed:{width}.2f}"
          + "".join(f"{float(np.nanmean(r.speeds)):{width}.2f}" for r in runs.values()))
    print(f"{'floored straight line [s]':34s}{floor:{width}.2f}  (the drive alone over the course's length)")
    if oracle is not None:
        print("the oracle's times are the learning benchmark's (benchmarks/oracle.py, hours here), read, not rerun")
    elif not args.env_kwargs:
        print("(no oracle: it was not run on these courses)")
    else:
        print("(no oracle: it was run on the race as registered, not with --env-kwargs)")
    verdicts = []
    for name, t in cols[1:]:
        g, lo, hi = paired_ci(mine.arrival, t, stat=lambda v: penalised_mean(v, cap))
        # below the printed precision a sign would claim more than the figure shows
        how = f"as fast as the {name} (within 0.05 %)" if abs(g) < 5e-4 else \
            f"{abs(g):.1%} {'faster' if g > 0 else 'slower'} than the {name}"
        verdicts.append(f"{how} in mean time (paired 95 % CI {lo:+.1%} to {hi:+.1%})")
        fig_of["trained"][f"vs_{name.replace(' ', '_')}"] = dict(mean_gain=g, ci95=[lo, hi])
    others = ", ".join(f"the {name} {fig_of[name]['finished']}" for name, _ in cols[1:])
    print(f"\nthe trained policy finished {fig_of['trained']['finished']} of {len(seeds)} held-out race courses "
          f"({others}); it is " + "; ".join(verdicts))

    fig, ax = plt.subplots(1, 3, figsize=(16, 4.5))
    ax[0].plot([h["env_steps"] for h in history], [h["episode_return"] for h in history])
    length = EnvConfig.from_dict(env_kwargs).course.length
    ax[0].set(xlabel="environment steps", ylabel="return",
              title=f"training episodes' return ({length:.0f} - 10 x time)")
    for i in range(mine.traces.shape[1]):
        ax[1].plot(mine.courses[i, :, 0], mine.courses[i, :, 1], color="0.85", lw=0.8)
        ax[1].plot(mine.traces[:, i, 0], mine.traces[:, i, 1], lw=1.0)
    ax[1].set(title=f"trained: {fig_of['trained']['finished']} of {len(seeds)} finished", xlabel="X [m]",
              ylabel="Y [m]")
    ax[1].axis("equal")
    idx = np.arange(len(seeds))
    colours = {"trained": "tab:green", "baseline": "k", "racing line": "tab:purple", "oracle": "tab:orange"}
    w = 0.8 / len(cols)
    for j, (name, t) in enumerate(cols):
        shown = np.where(np.isfinite(t), t, 0.0)
        ax[2].bar(idx + (j - (len(cols) - 1) / 2) * w, shown, width=w, color=colours[name],
                  label=f"{name} (an empty slot: not finished)")
    ax[2].axhline(floor, color="tab:red", ls=":", label="floored straight line")
    ax[2].set(xlabel="held-out course", ylabel="time to finish [s]", title="per course")
    ax[2].set_ylim(floor * 0.9, None)
    ax[2].legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(args.out, "main.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    out = dict(task=env_id, env_steps=agent.env_steps, straight_line_time=floor,
               **{name.replace(" ", "_"): fig_of[name] for name, _ in cols})
    cli.write_json(os.path.join(args.out, "evaluation.json"), out, indent=1)
    print(f"\nwrote {path}, {args.out}/evaluation.json and {args.out}/model.pt ({time.perf_counter() - t0:.0f} s)")
    return dict(out, plot=path)


def console() -> int:
    """The ``dyn4-gym`` console command (``pip install`` puts it on the PATH): the main job."""
    main()
    return 0


if __name__ == "__main__":
    main()
