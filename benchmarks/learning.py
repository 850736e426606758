"""The learning benchmark: PPO, SAC, the differentiable trainer (SHAC) and the classical
controller on the same task, observations, action scaling, episode length and evaluation seeds.

Each learned method trains for the same wall-clock budget per seed and is evaluated
(deterministic, on the held-out seeds, evaluation time not counted) at regular points; the
script prints the final table and the steps and time each method needed to reach 50 %, 80 % and
100 % of PPO's final return, and writes the curves as CSV and a plot.

    python benchmarks/learning.py --seconds 60 --seeds 3 --out runs/learning
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import time

import numpy as np
import torch

from dyn4_gym.agents import SHAC, PurePursuit, SHACConfig
from dyn4_gym.agents.evaluation import EVAL_SEEDS, evaluate
from dyn4_gym.agents.sb3_glue import load_zoo_config, split_hyperparams

CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs")

TASK = dict(course={"length": 120.0}, episode_steps=300)


def _curve(method, seed, train_chunk, policy_fn, budget, evals, env_kwargs, eval_seeds):
    rows, spent, steps = [], 0.0, 0
    for k in range(evals + 1):
        if k > 0:
            t0 = time.perf_counter()
            steps = train_chunk(budget / evals)
            spent += time.perf_counter() - t0
        res = evaluate(policy_fn(), env_kwargs, seeds=eval_seeds)
        rows.append(dict(method=method, seed=seed, env_steps=steps, wall_s=spent, eval_return=res.mean_return,
                         finished=res.finished))
        print(f"{method:8s} seed {seed}  steps {steps:8d}  time {spent:6.1f} s  return {res.mean_return:8.2f}  "
              f"finished {res.finished:.2f}", flush=True)
    return rows


def run_shac(seed, budget, evals, env_kwargs, eval_seeds):
    agent = SHAC(SHACConfig(num_envs=64, horizon=32, seed=seed), env_kwargs)

    def chunk(sec):
        agent.train(seconds=sec, log=None)
        return agent.env_steps

    return _curve("shac", seed, chunk, lambda: agent.policy, budget, evals, env_kwargs, eval_seeds)


def run_sb3(algo, seed, budget, evals, env_kwargs, eval_seeds):
    from stable_baselines3 import PPO, SAC
    from stable_baselines3.common.vec_env import VecNormalize

    from dyn4_gym.envs.sb3 import Dyn4SB3VecEnv

    # the settings are configs/<algo>.yml's (RL Zoo format), the same train_sb3.py uses
    run, algo_kwargs = split_hyperparams(load_zoo_config(os.path.join(CONFIGS, f"{algo}.yml")))
    env = Dyn4SB3VecEnv(num_envs=int(run.get("n_envs", 16)), **{**run.get("env_kwargs", {}), **env_kwargs})
    if run.get("normalize", False):
        env = VecNormalize(env, norm_obs=True, norm_reward=False)
    env.seed(seed)
    cls = {"ppo": PPO, "sac": SAC}[algo]
    model = cls(run.get("policy", "MlpPolicy"), env, seed=seed, device="cpu", **algo_kwargs)

    def chunk(sec):
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < sec:
            model.learn(total_timesteps=2048, reset_num_timesteps=False)
        return int(model.num_timesteps)

    def policy_fn():
        def policy(obs):
            o = obs.cpu().numpy()
            a, _ = model.predict(env.normalize_obs(o) if isinstance(env, VecNormalize) else o, deterministic=True)
            return torch.as_tensor(a, dtype=obs.dtype)
        return policy

    return _curve(algo, seed, chunk, policy_fn, budget, evals, env_kwargs, eval_seeds)


def first_reach(rows, level):
    for r in rows:
        if r["eval_return"] >= level:
            return r["env_steps"], r["wall_s"]
    return None, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0, help="training wall-clock per method and seed")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--evals", type=int, default=4, help="evaluation points per run")
    ap.add_argument("--eval-seeds", type=int, default=8)
    ap.add_argument("--methods", nargs="+", default=["ppo", "sac", "shac"])
    ap.add_argument("--out", default="runs/learning")
    args = ap.parse_args()
    torch.set_num_threads(max(torch.get_num_threads(), 1))
    os.makedirs(args.out, exist_ok=True)
    eval_seeds = EVAL_SEEDS[: args.eval_seeds]
    classical = evaluate(PurePursuit(), TASK, seeds=eval_seeds)
    print(f"classical: return {classical.mean_return:.2f}, finished {classical.finished:.2f}")
    rows = []
    for method in args.methods:
        for seed in range(args.seeds):
            if method == "shac":
                rows += run_shac(seed, args.seconds, args.evals, TASK, eval_seeds)
            else:
                rows += run_sb3(method, seed, args.seconds, args.evals, TASK, eval_seeds)
    with open(os.path.join(args.out, "curves.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    # final returns and the thresholds relative to PPO's final return
    final = {}
    for m in args.methods:
        finals = [max((r for r in rows if r["method"] == m and r["seed"] == s), key=lambda r: r["wall_s"])["eval_return"]
                  for s in range(args.seeds)]
        final[m] = (float(np.mean(finals)), float(np.std(finals)))
    print("\nmethod      final return (mean +- std over seeds)   env steps   wall s")
    for m in args.methods:
        last = [r for r in rows if r["method"] == m and r["seed"] == 0][-1]
        print(f"{m:10s} {final[m][0]:10.2f} +- {final[m][1]:6.2f}   {last['env_steps']:10d} {last['wall_s']:8.0f}")
    print(f"{'classical':10s} {classical.mean_return:10.2f}")
    summary = dict(classical=classical.mean_return, final=final, reach={})
    if "ppo" in final:
        target = final["ppo"][0]
        print("\nsteps / seconds to reach 50 %, 80 %, 100 % of PPO's final return (first seed to get there, mean over seeds)")
        for m in args.methods:
            cells = []
            for frac in (0.5, 0.8, 1.0):
                hits = [first_reach([r for r in rows if r["method"] == m and r["seed"] == s], frac * target)
                        for s in range(args.seeds)]
                got = [h for h in hits if h[0] is not None]
                cell = (f"{np.mean([h[0] for h in got]):.0f} / {np.mean([h[1] for h in got]):.0f}s ({len(got)}/{len(hits)})"
                        if got else "not reached")
                cells.append(cell)
                summary["reach"].setdefault(m, {})[str(frac)] = cell
            print(f"{m:10s} " + " | ".join(cells))
    with open(os.path.join(args.out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(12, 4.2))
    for m in args.methods:
        for s in range(args.seeds):
            rs = [r for r in rows if r["method"] == m and r["seed"] == s]
            kw = dict(color={"ppo": "tab:blue", "sac": "tab:orange", "shac": "tab:green"}.get(m), alpha=0.8,
                      label=m if s == 0 else None)
            ax[0].plot([r["env_steps"] for r in rs], [r["eval_return"] for r in rs], **kw)
            ax[1].plot([r["wall_s"] for r in rs], [r["eval_return"] for r in rs], **kw)
    for a, xl in zip(ax, ("environment steps", "training wall-clock [s]")):
        a.axhline(classical.mean_return, color="k", ls="--", label="classical")
        a.set(xlabel=xl, ylabel="evaluation return")
        a.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "learning.png"), dpi=110)
    print(f"wrote {args.out}/curves.csv, learning.png, summary.json")


if __name__ == "__main__":
    main()
