"""Evaluate a saved policy or the classical controller on the held-out seeds; print the figures
(the task's own metric among them: time to finish, or fuel within the budget, with its IQM,
finish rate and 95 % intervals) and write a plot of the trajectories and the energy lines.

    python agents/evaluate.py --policy classical
    python agents/evaluate.py --policy runs/diff/model.pt --out runs/eval
    python agents/evaluate.py --policy classical --env-id Dyn4HumveeRace-v0 --seeds 16

Without ``--env-id`` a model is evaluated on the env it was trained on (its saved keyword
arguments; an SB3 model's task from train_sb3.py's run.json or an RL Zoo model's file name).
"""

import os

from dyn4_gym import cli
from dyn4_gym.agents.evaluation import EVAL_SEEDS


def parse_args(argv=None):
    ap = cli.Parser(description=__doc__.splitlines()[0])
    ap.add_policy()
    ap.add_env_id(help="the task to evaluate on, as registered (--env-kwargs over it; default: the one the model "
                       "was trained on where its files say, else Dyn4Humvee-v1's defaults)")
    ap.add_env_kwargs()
    ap.add_argument("--vecnormalize", default=None, metavar="PATH",
                    help="an SB3 model's observation normaliser (default: vecnormalize.pkl beside the .zip, or in "
                         "the folder named after it, RL Zoo's layout; nowhere else)")
    ap.add_argument("--seeds", type=cli.int_in(1, len(EVAL_SEEDS)), default=8,
                    help=f"how many held-out seeds, 1 to {len(EVAL_SEEDS)} (8: the v1 tables in docs/training.md)")
    ap.add_output("--out", "runs/eval")
    return ap.parse_args(argv)


@cli.script
def main(argv=None):
    args = parse_args(argv)
    cli.require("matplotlib", "evaluate.py's plot")
    from dyn4_gym.agents.evaluation import evaluate
    from dyn4_gym.agents.loading import load_fitting_policy

    policy, name, env_kwargs = load_fitting_policy(args.policy, args.env_kwargs, args.vecnormalize, args.env_id)
    print(f"evaluating {name} on {args.env_id or 'its saved env (with --env-kwargs over it)'}, {args.seeds} held-out "
          f"courses (the first call compiles the Numba kernels: tens of seconds on a fresh install)", flush=True)
    res = evaluate(policy, env_kwargs, seeds=EVAL_SEEDS[: args.seeds])
    _report(args, name, res, env_kwargs)


def _report(args, name, res, env_kwargs):
    from dyn4_gym.agents.evaluation import task_figures
    from dyn4_gym.envs import EnvConfig

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    print(f"{name} on {args.seeds} held-out seeds")
    for k, v in res.row().items():
        print(f"  {k:16s} {v:10.3f}")
    task = task_figures(res, EnvConfig.from_dict(dict(env_kwargs)).time_budget)
    n = len(task["per_course"])
    lo, hi = task["counted_ci95"]
    print(f"task metric: {task['metric']} [{task['unit']}], a course not {task['counts']} counting as inf; "
          f"95 % intervals: rliable's stratified bootstrap over the courses")
    print(f"  {task['counts']:16s} {round(task['counted'] * n):d}/{n} ({task['counted']:.0%}, CI {lo:.0%}-{hi:.0%})")
    print(f"  {'IQM':16s} {task['iqm']:10.2f} {task['unit']} (CI {task['ci95'][0]:.2f}-{task['ci95'][1]:.2f})")

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
    plt.close(fig)
    cli.write_json(os.path.join(args.out, "evaluation.json"), dict(policy=name, env_id=args.env_id, **res.row(),
                                                                   task=task), indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
