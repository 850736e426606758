"""The main job: ``python -m dyn4_gym`` trains a policy through the plant for a few minutes on
``Dyn4Humvee-v0``'s defaults, evaluates it against the classical controller on held-out seeds,
and writes plots (``runs/main/`` by default).

    python -m dyn4_gym [--seconds 150] [--out runs/main]
    python -m dyn4_gym.demo      # the plant's manoeuvres and energy books only
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=150.0, help="training wall-clock budget")
    ap.add_argument("--num-envs", type=int, default=64)
    ap.add_argument("--eval-seeds", type=int, default=8)
    ap.add_argument("--env-kwargs", default="{}", help="JSON of Dyn4Humvee-v0 keyword arguments")
    ap.add_argument("--out", default="runs/main")
    args = ap.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .agents import SHAC, PurePursuit, SHACConfig
    from .agents.evaluation import EVAL_SEEDS, evaluate

    env_kwargs = json.loads(args.env_kwargs)
    os.makedirs(args.out, exist_ok=True)
    seeds = EVAL_SEEDS[: args.eval_seeds]
    print(f"dyn4-gym: training a policy through the plant (SHAC) for {args.seconds:.0f} s on Dyn4Humvee-v0")
    t0 = time.perf_counter()
    agent = SHAC(SHACConfig(num_envs=args.num_envs), env_kwargs)
    history = agent.train(seconds=args.seconds, log=print, every=10)
    agent.save(os.path.join(args.out, "model.pt"))
    print(f"\nevaluating on {len(seeds)} held-out seeds ...")
    mine = evaluate(agent.policy, env_kwargs, seeds=seeds)
    ref = evaluate(PurePursuit(), env_kwargs, seeds=seeds)
    print(f"\n{'after ' + str(agent.env_steps) + ' env steps':34s}{'trained':>12s}{'classical':>12s}")
    for k in mine.row():
        print(f"{k:34s}{mine.row()[k]:12.3f}{ref.row()[k]:12.3f}")

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
    with open(os.path.join(args.out, "evaluation.json"), "w") as fh:
        json.dump(dict(trained=mine.row(), classical=ref.row(), env_steps=agent.env_steps), fh, indent=1)
    print(f"\nwrote {path}, {args.out}/evaluation.json and {args.out}/model.pt ({time.perf_counter() - t0:.0f} s)")
    return dict(trained=mine.row(), classical=ref.row(), plot=path)


if __name__ == "__main__":
    main()
