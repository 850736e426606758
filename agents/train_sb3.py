"""Train SB3 PPO or SAC on the batched env, with observation normalisation, evaluation and
checkpoint callbacks, TensorBoard logs (if tensorboard is installed), a progress bar (if tqdm
and rich are), reward terms and energy books logged per episode, and the config saved beside
the model.

    python agents/train_sb3.py --algo ppo --config configs/ppo.yml --out runs/ppo
    python agents/evaluate.py --policy runs/ppo/model.zip
    python agents/train_sb3.py --algo sac --env-id Dyn4HumveeRace-v0 --out runs/sac_race

``--env-id`` picks the task (its registered keyword arguments) and the config's section of the
same name; run.json records it, and evaluate.py reads it back.
"""

import argparse
import importlib.util
import os
import shutil

from stable_baselines3.common.callbacks import CallbackList, CheckpointCallback, EvalCallback
from stable_baselines3.common.vec_env import VecMonitor, VecNormalize

from dyn4_gym import cli
from dyn4_gym.agents.evaluation import VALIDATION_SEEDS
from dyn4_gym.agents.trainers import VECNORMALIZE_FILE, sb3_trainers, trainer
from dyn4_gym.agents.sb3_glue import EpisodeTermsCallback, load_zoo_config, normalize_kwargs, split_hyperparams
from dyn4_gym.envs.sb3 import Dyn4SB3VecEnv

def parse_args(argv=None):
    ap = cli.Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--algo", choices=sb3_trainers(), default=sb3_trainers()[0])
    ap.add_argument("--config", default=None, help="RL Zoo YAML (default configs/<algo>.yml)")
    ap.add_argument("--timesteps", type=cli.float_in(1.0, 1e12), default=None, help="override n_timesteps")
    ap.add_env_id(help="the task to train on (default Dyn4Humvee-v1): its registered keyword arguments, and the "
                       "config's section of that name")
    ap.add_argument("--env-kwargs", type=cli.json_object, default={},
                    help="JSON of env keyword arguments (merged over the config's and the id's)")
    ap.add_argument("--seed", type=cli.int_in(0, 2**32 - 1), default=0)
    ap.add_argument("--eval-freq", type=cli.positive_int, default=10_000, help="env steps between evaluations")
    ap.add_argument("--eval-episodes", type=cli.int_in(1, 1024), default=8)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    args.config = args.config or os.path.join(os.path.dirname(__file__), "..", "configs", f"{args.algo}.yml")
    ap.check_file("--config", args.config)
    section = args.env_id or "Dyn4Humvee-v1"
    try:
        args.run, args.algo_kwargs = split_hyperparams(load_zoo_config(args.config, section))
    except Exception as exc:  # a YAML that is not an RL Zoo config for this env
        ap.fail("--config", f"{args.config}: {' '.join(str(exc).split())[:200]}")
    args.env_kwargs = cli.env_kwargs_of(argparse.Namespace(
        env_id=args.env_id, env_kwargs={**args.run.get("env_kwargs", {}), **args.env_kwargs}))
    ap.check_env_kwargs("--env-kwargs", args.env_kwargs)
    args.out = args.out or os.path.join("runs", args.algo)
    ap.check_output("--out", args.out)
    return args


@cli.script
def main(argv=None):
    args = parse_args(argv)
    config, run, algo_kwargs, env_kwargs = args.config, args.run, args.algo_kwargs, args.env_kwargs
    n_envs = int(run.get("n_envs", 16))
    timesteps = int(args.timesteps or run.get("n_timesteps", 100_000))
    out = args.out
    os.makedirs(out, exist_ok=True)
    shutil.copy(config, os.path.join(out, "config.yml"))
    cli.write_json(os.path.join(out, "run.json"), dict(algo=args.algo, env_id=args.env_id, env_kwargs=env_kwargs,
                                                        n_envs=n_envs, timesteps=timesteps, seed=args.seed), indent=1)

    env = VecMonitor(Dyn4SB3VecEnv(num_envs=n_envs, **env_kwargs))
    eval_env = VecMonitor(Dyn4SB3VecEnv(num_envs=min(n_envs, args.eval_episodes), **env_kwargs))
    norm = normalize_kwargs(run)
    if norm is not None:
        env = VecNormalize(env, **norm)
        eval_env = VecNormalize(eval_env, **{**norm, "norm_reward": False}, training=False)
    env.seed(args.seed)
    eval_env.seed(VALIDATION_SEEDS[0])  # the best model is chosen on validation courses, not the held-out ones

    tb = os.path.join(out, "tb") if importlib.util.find_spec("tensorboard") else None
    progress = bool(importlib.util.find_spec("tqdm") and importlib.util.find_spec("rich"))
    cls = trainer(args.algo).sb3_algorithm()
    model = cls(run.get("policy", "MlpPolicy"), env, seed=args.seed, tensorboard_log=tb, verbose=1, device="cpu",
                **algo_kwargs)
    callbacks = CallbackList([
        EvalCallback(eval_env, n_eval_episodes=args.eval_episodes, eval_freq=max(args.eval_freq // n_envs, 1),
                     best_model_save_path=out, log_path=out, deterministic=True),
        CheckpointCallback(save_freq=max(args.eval_freq // n_envs, 1), save_path=os.path.join(out, "checkpoints"),
                           save_vecnormalize=True),
        EpisodeTermsCallback(),
    ])
    model.learn(total_timesteps=timesteps, callback=callbacks, progress_bar=progress)
    model.save(os.path.join(out, "model"))
    if isinstance(env, VecNormalize):
        env.save(os.path.join(out, VECNORMALIZE_FILE))
    print(f"saved {os.path.join(out, 'model.zip')}")


if __name__ == "__main__":
    main()
