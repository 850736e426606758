"""Train a policy by backpropagating through the plant (SHAC), with logs, checkpoints and a
final evaluation against the classical controller.

    python agents/train_diff.py --env-steps 200000 --compile --out runs/diff   # the main job's run
    python agents/train_diff.py --no-critic ...      # the truncated-BPTT ablation
    python agents/train_diff.py --help               # every SHACConfig field is a flag
    python agents/train_diff.py --resume runs/diff/model.pt --env-steps 400000   # continue to 400k
    python agents/train_diff.py --env-id Dyn4HumveeRace-v0 --out runs/diff_race   # a registered task

A run's folder holds one run: an --out that already holds this script's files is refused unless
the run resumes (--resume) or --overwrite replaces them (only this script's files go). Every
file is written whole (a temporary file moved over it), so an interrupted run leaves a folder
that the next run resumes or refuses.
"""

import os
import shutil

from dyn4_gym import cli
from dyn4_gym.agents import SHAC, PurePursuit, SHACConfig
from dyn4_gym.agents.cli import add_config_flags, config_from_flags
from dyn4_gym.agents.evaluation import EVAL_SEEDS, evaluate


def parse_args(argv=None):
    ap = cli.Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--env-steps", type=cli.positive_int, default=200_000,
                    help="train until this many env steps in all (the same result on every machine)")
    ap.add_argument("--seconds", type=cli.positive_float, default=None, help="also stop after this wall-clock time")
    ap.add_argument("--iterations", type=cli.positive_int, default=None, help="also stop after this many iterations")
    ap.add_env_id(help="the task to train on, as registered (--env-kwargs over it; default Dyn4Humvee-v1's "
                       "defaults); the checkpoint keeps its keyword arguments")
    ap.add_env_kwargs()
    ap.add_argument("--resume", default=None, help="a saved model.pt to continue from")
    ap.add_argument("--eval-seeds", type=cli.int_in(1, len(EVAL_SEEDS)), default=8)
    ap.add_output("--out", "runs/diff")
    ap.add_argument("--overwrite", action="store_true", help="replace the run already in --out (its files only)")
    add_config_flags(ap, SHACConfig)
    args = ap.parse_args(argv)
    args.config = config_from_flags(SHACConfig, args, ap)
    ap.check_file("--resume", args.resume)
    held = run_files(args.out)
    if held and not (args.resume or args.overwrite):
        ap.fail("--out", f"{args.out} already holds a run ({', '.join(held)}): --resume {os.path.join(args.out, 'model.pt')} "
                         "to continue it, --overwrite to replace it, or another --out")
    return args


# what a run writes in its --out
RUN_FILES = ("model.pt", "config.json", "history.json", "evaluation.json", "tb")


def run_files(out: str) -> list[str]:
    """The files of a run already in ``out``."""
    return [f for f in RUN_FILES if os.path.exists(os.path.join(out, f))] if os.path.isdir(out) else []


@cli.script
def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.resume:
        agent = SHAC.load(args.resume)
    else:
        agent = SHAC(args.config, cli.env_kwargs_of(args))
    if args.overwrite:  # the old run's files go, the folder's other files stay
        for f in run_files(args.out):
            path = os.path.join(args.out, f)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    cli.write_text(os.path.join(args.out, "config.json"), agent.config_json())

    writer = None
    try:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(os.path.join(args.out, "tb"))
    except Exception:  # tensorboard is optional
        pass

    ckpt = os.path.join(args.out, "model.pt")
    history = []
    chunk = 10  # iterations between checkpoints
    remaining_s, remaining_it = args.seconds, args.iterations
    while True:
        recs = agent.train(iterations=chunk if remaining_it is None else min(chunk, remaining_it),
                           seconds=remaining_s, env_steps=args.env_steps, log=lambda line: print(line, flush=True))
        history.extend(recs)
        if writer is not None:
            for rec in recs:
                for k in ("actor_loss", "critic_loss", "grad_norm", "episode_return"):
                    writer.add_scalar(f"train/{k}", rec[k], rec["env_steps"])
                for k, v in rec.items():
                    if k.startswith("episode/"):  # reward terms and energy lines per finished episode
                        writer.add_scalar(k, v, rec["env_steps"])
        agent.save(ckpt)
        if remaining_s is not None:
            remaining_s -= recs[-1]["time"]
        if remaining_it is not None:
            remaining_it -= len(recs)
        if ((remaining_s is not None and remaining_s <= 0) or (remaining_it is not None and remaining_it <= 0)
                or agent.env_steps >= args.env_steps):
            break

    cli.write_json(os.path.join(args.out, "history.json"), history)
    seeds = EVAL_SEEDS[: args.eval_seeds]
    mine = evaluate(agent.policy, agent.env_kwargs, seeds=seeds)
    ref = evaluate(PurePursuit.for_env(agent.env_kwargs), agent.env_kwargs, seeds=seeds)
    print(f"\nheld-out evaluation on {args.eval_seeds} seeds after {agent.env_steps} env steps")
    print(f"{'':18s}{'trained':>12s}{'classical':>12s}")
    for k in mine.row():
        print(f"{k:18s}{mine.row()[k]:12.3f}{ref.row()[k]:12.3f}")
    cli.write_json(os.path.join(args.out, "evaluation.json"),
                   dict(trained=mine.row(), classical=ref.row(), env_steps=agent.env_steps), indent=1)
    print(f"saved {ckpt}")


if __name__ == "__main__":
    main()
