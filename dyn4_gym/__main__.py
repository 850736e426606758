"""The main job: ``python -m dyn4_gym`` trains a policy through the plant (SHAC) for a budget of
env steps (the same result for the same seed on one installation; a few minutes on two cores),
evaluates it against the task's classical drivers on held-out courses, and writes plots
(``runs/main/`` by default).

Its task is ``Dyn4HumveeRace-v0`` (docs/tasks.md), with SHAC's published
schedule, against the centre-line minimum-time speed profile tracked by pure pursuit and the
racing line (the strongest classical driver, issue 44), beside the floored straight-line
reference. ``--task v1`` trains on
``Dyn4Humvee-v1`` against pure pursuit instead (the project's first task).

    python -m dyn4_gym [--env-steps 100000] [--seconds S] [--task race|v1] [--out runs/main]
    python -m dyn4_gym.demo      # the plant's manoeuvres and energy books only
"""

from __future__ import annotations

import argparse
import os
import time

from . import cli
from .agents import SHAC, PurePursuit, SHACConfig, shac_published


ENV_STEPS = 200_000  # the main job's budget


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
    ap.add_argument("--env-steps", type=cli.positive_int, default=ENV_STEPS, help="training budget in env steps")
    ap.add_argument("--seconds", type=cli.positive_float, default=None,
                    help="also stop after this wall-clock time (machine-dependent)")
    ap.add_argument("--seed", type=cli.seed, default=0)
    ap.add_argument("--task", choices=("race", "v1"), default="race",
                    help="race: Dyn4HumveeRace-v0 against the min-time profile; v1: Dyn4Humvee-v1 against pure pursuit")
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
    race = args.task == "race"
    seeds = EVAL_SEEDS[: args.eval_seeds or (len(EVAL_SEEDS) if race else 8)]
    if race:
        from . import RACE

        env_kwargs = {**{k: v for k, v in RACE.items() if k != "engine"}, **args.env_kwargs}
        config = shac_published(args.env_steps, seed=args.seed, compile=args.compile,
                                **({"num_envs": args.num_envs} if args.num_envs else {}))
    else:
        env_kwargs = args.env_kwargs
        config = SHACConfig(num_envs=args.num_envs or SHACConfig.num_envs, seed=args.seed, compile=args.compile)
    name = "Dyn4HumveeRace-v0" if race else "Dyn4Humvee-v1"
    print(f"dyn4-gym: training a policy through the plant (SHAC) for {args.env_steps:,} env steps on {name}")
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
    history = agent.train(seconds=args.seconds, env_steps=args.env_steps, log=None,
                          on_iteration=Progress(args.env_steps))
    print()
    agent.save(os.path.join(args.out, "model.pt"))
    print(f"\nevaluating on {len(seeds)} held-out seeds ...")
    if race:
        return _race_report(args, agent, env_kwargs, history, seeds, t0)
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


def _race_report(args, agent, env_kwargs, history, seeds, t0) -> dict:
    """The race: the trained policy's, the baseline's and the racing line's (the strongest classical
    driver, issue 44) time to finish per held-out course, the IQM over courses (an unfinished
    course counts as infinitely slow) with its 95 % bootstrap interval, the mean with an
    unfinished course at the truncation time, the trained policy against each driver paired on
    the same courses, the floored straight-line reference, a plot, and the JSON."""
    import matplotlib.pyplot as plt
    import numpy as np

    from .agents.evaluation import evaluate
    from .agents.race import RACE_LINE_TUNED, RACE_TUNED, run_race_baseline, straight_line_time, truncation_time
    from .agents.stats import bootstrap_ci, iqm, paired_ci, penalised_mean

    mine = evaluate(agent.policy, env_kwargs, seeds=seeds)
    print("the classical drivers on the same courses (the racing line plans each course first) ...", flush=True)
    base = run_race_baseline(seeds, env_kwargs=args.env_kwargs, params=RACE_TUNED)
    line = run_race_baseline(seeds, env_kwargs=args.env_kwargs, params=RACE_LINE_TUNED)
    floor = straight_line_time(args.env_kwargs)
    t_mine, t_base, t_line = mine.arrival, base.time, line.time  # inf where not finished
    cap = truncation_time(args.env_kwargs)
    fig_of = {}
    cols = (("trained", t_mine), ("baseline", t_base), ("racing line", t_line))
    for name, t in cols:
        lo, hi = bootstrap_ci(t)
        fig_of[name] = dict(finished=int(np.isfinite(t).sum()), courses=len(t), iqm_time=iqm(t), ci95=[lo, hi],
                            mean_time=penalised_mean(t, cap), times=[float(v) for v in t])
    print(f"\n{'after ' + str(agent.env_steps) + ' env steps':34s}" + "".join(f"{n:>16s}" for n, _ in cols))
    print(f"{'courses finished':34s}" + "".join(f"{fig_of[n]['finished']:>13d}/{len(seeds):<2d}" for n, _ in cols))
    print(f"{'IQM time to finish [s]':34s}" + "".join(f"{fig_of[n]['iqm_time']:16.2f}" for n, _ in cols))
    print(f"{'its 95 % bootstrap CI [s]':34s}" + "".join(
        f"{fig_of[n]['ci95'][0]:.2f}-{fig_of[n]['ci95'][1]:.2f}".rjust(16) for n, _ in cols))
    print(f"{f'mean time, unfinished at {cap:.0f} s [s]':34s}" + "".join(f"{fig_of[n]['mean_time']:16.2f}"
                                                                       for n, _ in cols))
    print(f"{'mean speed [m/s]':34s}{mine.mean_speed:16.2f}{float(np.nanmean(base.speeds)):16.2f}"
          f"{float(np.nanmean(line.speeds)):16.2f}")
    print(f"{'floored straight line [s]':34s}{floor:16.2f}  (the drive alone over the course's length)")
    verdicts = []
    for name, t in cols[1:]:
        g, lo, hi = paired_ci(t_mine, t, stat=lambda v: penalised_mean(v, cap))
        verdicts.append(f"{abs(g):.1%} {'faster' if g > 0 else 'slower'} than the {name} in mean time "
                        f"(paired 95 % CI {lo:+.1%} to {hi:+.1%})")
        fig_of["trained"][f"vs_{name.replace(' ', '_')}"] = dict(mean_gain=g, ci95=[lo, hi])
    print(f"\nthe trained policy finished {fig_of['trained']['finished']} of {len(seeds)} held-out race courses "
          f"(the baseline {fig_of['baseline']['finished']}, the racing line {fig_of['racing line']['finished']}); "
          f"it is {verdicts[0]}, and {verdicts[1]}")

    fig, ax = plt.subplots(1, 3, figsize=(16, 4.5))
    ax[0].plot([h["env_steps"] for h in history], [h["episode_return"] for h in history])
    ax[0].set(xlabel="environment steps", ylabel="return", title="training episodes' return (400 - 10 x time)")
    for i in range(mine.traces.shape[1]):
        ax[1].plot(mine.courses[i, :, 0], mine.courses[i, :, 1], color="0.85", lw=0.8)
        ax[1].plot(mine.traces[:, i, 0], mine.traces[:, i, 1], lw=1.0)
    ax[1].set(title=f"trained: {fig_of['trained']['finished']} of {len(seeds)} finished", xlabel="X [m]",
              ylabel="Y [m]")
    ax[1].axis("equal")
    idx = np.arange(len(seeds))
    for off, (name, t, c) in zip((-0.27, 0.0, 0.27), (("trained", t_mine, "tab:green"), ("baseline", t_base, "k"),
                                                      ("racing line", t_line, "tab:purple"))):
        shown = np.where(np.isfinite(t), t, 0.0)
        ax[2].bar(idx + off, shown, width=0.27, color=c, label=f"{name} (an empty slot: not finished)")
    ax[2].axhline(floor, color="tab:red", ls=":", label="floored straight line")
    ax[2].set(xlabel="held-out course", ylabel="time to finish [s]", title="per course")
    ax[2].set_ylim(floor * 0.9, None)
    ax[2].legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(args.out, "main.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    out = dict(task="Dyn4HumveeRace-v0", env_steps=agent.env_steps, trained=fig_of["trained"],
               baseline=fig_of["baseline"], racing_line=fig_of["racing line"], straight_line_time=floor)
    cli.write_json(os.path.join(args.out, "evaluation.json"), out, indent=1)
    print(f"\nwrote {path}, {args.out}/evaluation.json and {args.out}/model.pt ({time.perf_counter() - t0:.0f} s)")
    return dict(out, plot=path)


def console() -> int:
    """The ``dyn4-gym`` console command (``pip install`` puts it on the PATH): the main job."""
    main()
    return 0


if __name__ == "__main__":
    main()
