"""Evaluate a saved policy or the classical controller on the held-out seeds; print the figures
and write a plot of the trajectories and the energy lines.

    python agents/evaluate.py --policy classical
    python agents/evaluate.py --policy runs/diff/model.pt --out runs/eval
"""

import os

from dyn4_gym import cli
from dyn4_gym.agents.evaluation import EVAL_SEEDS


def parse_args(argv=None):
    ap = cli.Parser(description=__doc__.splitlines()[0])
    ap.add_policy()
    ap.add_env_kwargs()
    ap.add_argument("--vecnormalize", default=None, metavar="PATH",
                    help="an SB3 model's observation normaliser (default: vecnormalize.pkl beside the .zip, or in "
                         "the folder named after it, RL Zoo's layout; nowhere else)")
    ap.add_argument("--seeds", type=cli.int_in(1, len(EVAL_SEEDS)), default=8,
                    help=f"how many held-out seeds, 1 to {len(EVAL_SEEDS)} (8: the README's tables)")
    ap.add_output("--out", "runs/eval")
    return ap.parse_args(argv)


@cli.script
def main(argv=None):
    args = parse_args(argv)
    cli.require("matplotlib", "evaluate.py's plot")
    from dyn4_gym.agents.evaluation import evaluate
    from dyn4_gym.agents.loading import load_fitting_policy

    policy, name, env_kwargs = load_fitting_policy(args.policy, args.env_kwargs, args.vecnormalize)
    res = evaluate(policy, env_kwargs, seeds=EVAL_SEEDS[: args.seeds])
    _report(args, name, res)


def _report(args, name, res):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    plt.close(fig)
    cli.write_json(os.path.join(args.out, "evaluation.json"), dict(policy=name, **res.row()), indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
