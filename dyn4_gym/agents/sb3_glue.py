"""Glue between SB3 and the batched env: config loading (RL Zoo 3's YAML), the per-episode
reward-term and energy-book logger, and a policy wrapper for evaluation."""

from __future__ import annotations

import os

import numpy as np
import torch

__all__ = ["load_zoo_config", "split_hyperparams", "EpisodeTermsCallback", "sb3_policy"]
_ZOO_KEYS = {"n_envs", "n_timesteps", "policy", "normalize", "env_kwargs", "policy_kwargs"}


def load_zoo_config(path: str, env_id: str = "Dyn4Humvee-v1") -> dict:
    """The hyperparameters for ``env_id`` in an RL Zoo 3 YAML file, with ``policy_kwargs``
    evaluated (RL Zoo writes them as Python expressions such as ``dict(net_arch=[64, 64])``)."""
    import yaml

    with open(path) as fh:
        data = yaml.safe_load(fh) or {}
    if env_id not in data:
        raise KeyError(f"{path}: no section for {env_id!r} (sections: {sorted(data)})")
    hp = dict(data[env_id])
    pk = hp.get("policy_kwargs")
    if isinstance(pk, str):
        hp["policy_kwargs"] = eval(pk, {"__builtins__": {}}, {"dict": dict, "nn": torch.nn})  # noqa: S307 (zoo format)
    return hp


def split_hyperparams(hp: dict) -> tuple[dict, dict]:
    """``(run settings, algorithm keyword arguments)``."""
    run = {k: hp[k] for k in _ZOO_KEYS if k in hp}
    algo = {k: v for k, v in hp.items() if k not in _ZOO_KEYS}
    if "policy_kwargs" in hp:
        algo["policy_kwargs"] = hp["policy_kwargs"]
    return run, algo


def _callback_base():
    from stable_baselines3.common.callbacks import BaseCallback

    return BaseCallback


class EpisodeTermsCallback(_callback_base()):
    """Sums each row's reward terms and energy lines over its episode and logs their means over
    the episodes that ended (``episode/term/<name>``, ``episode/books/<line>``)."""

    def __init__(self, verbose: int = 0):
        super().__init__(verbose)
        self._acc = None
        self._done = []

    def _on_step(self) -> bool:
        infos, dones = self.locals["infos"], self.locals["dones"]
        if self._acc is None:
            self._acc = [dict() for _ in infos]
        for i, info in enumerate(infos):
            acc = self._acc[i]
            for group in ("reward_terms", "books"):
                for k, v in info.get(group, {}).items():
                    acc[f"{group}/{k}"] = acc.get(f"{group}/{k}", 0.0) + float(v)
            if dones[i]:
                self._done.append(acc)
                self._acc[i] = {}
        if self._done and len(self._done) >= len(infos):
            for k in self._done[0]:
                self.logger.record(f"episode/{k.replace('reward_terms', 'term')}", float(np.mean([d.get(k, 0.0) for d in self._done])))
            self._done = []
        return True


def sb3_policy(model_path: str):
    """``(policy(obs tensor) -> action tensor, env_kwargs)`` for a model saved by train_sb3.py,
    with its observation normalisation (``vecnormalize.pkl`` beside it) applied."""
    import json
    import pickle

    from stable_baselines3 import PPO, SAC

    from .shac import CheckpointError, _why

    # SB3's zip and VecNormalize's pickle are SB3's formats: loading runs pickled code by their
    # design, so load only files you trust. What is checked here is that they are what they claim.
    folder = os.path.dirname(model_path)
    try:
        meta = {}
        if os.path.exists(os.path.join(folder, "run.json")):
            with open(os.path.join(folder, "run.json")) as fh:
                meta = json.load(fh)
        if not isinstance(meta, dict) or meta.get("algo", "ppo") not in ("ppo", "sac"):
            raise ValueError("run.json beside the model is not train_sb3.py's")
        cls = {"ppo": PPO, "sac": SAC}[meta.get("algo", "ppo")]
        model = cls.load(model_path, device="cpu")
        norm = None
        vn = os.path.join(folder, "vecnormalize.pkl")
        if os.path.exists(vn):
            with open(vn, "rb") as fh:
                norm = pickle.load(fh)  # noqa: S301 (SB3's own format)
    except Exception as exc:
        raise CheckpointError(f"{model_path} is not a usable SB3 model from train_sb3.py ({_why(exc)})") from None

    def policy(obs: torch.Tensor) -> torch.Tensor:
        o = obs.detach().cpu().numpy()
        if norm is not None:
            o = norm.normalize_obs(o)
        a, _ = model.predict(o, deterministic=True)
        return torch.as_tensor(a, dtype=obs.dtype)

    return policy, meta.get("env_kwargs", {})
