"""Glue between SB3 and the batched env: config loading (RL Zoo 3's YAML), the per-episode
reward-term and energy-book logger, and a policy wrapper for evaluation."""

from __future__ import annotations

import os

import numpy as np
import torch

__all__ = ["load_zoo_config", "parse_zoo_values", "split_hyperparams", "normalize_kwargs", "make_model", "model_policy",
           "EpisodeTermsCallback", "sb3_policy"]
_ZOO_KEYS = {"n_envs", "n_timesteps", "policy", "normalize", "env_kwargs", "policy_kwargs"}


def load_zoo_config(path: str, env_id: str = "Dyn4Humvee-v1", parse: bool = True) -> dict:
    """The hyperparameters for ``env_id`` in an RL Zoo 3 YAML file, with ``policy_kwargs`` and
    ``normalize`` evaluated (:func:`parse_zoo_values`; ``parse=False`` keeps RL Zoo's strings)."""
    from .. import cli

    yaml = cli.require("yaml", "reading an RL Zoo config")

    with open(path) as fh:
        data = yaml.safe_load(fh) or {}
    if env_id not in data:
        raise KeyError(f"{path}: no section for {env_id!r} (sections: {sorted(data)})")
    return parse_zoo_values(dict(data[env_id])) if parse else dict(data[env_id])


def parse_zoo_values(hp: dict) -> dict:
    """``policy_kwargs`` and ``normalize`` given as RL Zoo's Python expressions (strings such as
    ``"dict(net_arch=[64, 64])"``) evaluated, with ``dict`` and ``nn`` the only names."""
    hp = dict(hp)
    for key in ("policy_kwargs", "normalize"):
        if isinstance(hp.get(key), str):
            hp[key] = eval(hp[key], {"__builtins__": {}}, {"dict": dict, "nn": torch.nn})  # noqa: S307 (zoo format)
    return hp


def normalize_kwargs(run: dict) -> dict | None:
    """``VecNormalize``'s keyword arguments from a zoo config's ``normalize`` (None: no wrapper).
    ``true`` means RL Zoo's default, observations and rewards both normalised."""
    norm = run.get("normalize", False)
    if norm is True:
        return {}
    if isinstance(norm, dict):
        return dict(norm)
    return None


def make_model(algo: str, hp: dict, env_kwargs: dict | None = None, seed: int = 0, verbose: int = 0):
    """SB3 ``PPO`` or ``SAC`` on the batched env (:class:`Dyn4SB3VecEnv`, the Numba engine) with a
    zoo config's settings ``hp`` (:func:`load_zoo_config`): ``n_envs`` rows, ``VecNormalize``
    when ``normalize`` asks for it, the rest as the algorithm's keyword arguments."""
    from stable_baselines3.common.vec_env import VecNormalize

    from ..envs.sb3 import Dyn4SB3VecEnv
    from .trainers import trainer

    cls = trainer(algo).sb3_algorithm()  # a ValueError naming the trainers first

    run, kw = split_hyperparams(hp)
    env = Dyn4SB3VecEnv(num_envs=int(run.get("n_envs", 16)), **{**run.get("env_kwargs", {}), **(env_kwargs or {})})
    norm = normalize_kwargs(run)
    if norm is not None:
        env = VecNormalize(env, **norm)
    env.seed(seed)
    return cls(run.get("policy", "MlpPolicy"), env, seed=seed, device="cpu", verbose=verbose, **kw)


def model_policy(model):
    """``policy(obs tensor) -> action tensor``: the model's deterministic action, with its
    ``VecNormalize`` observation statistics (if any) applied, frozen at call time's values."""
    from stable_baselines3.common.vec_env import VecNormalize

    env = model.get_env()
    return _predictor(model, env if isinstance(env, VecNormalize) else None)


def _predictor(model, norm):
    """The deterministic policy on torch observations, through ``norm.normalize_obs`` if given."""

    def policy(obs: torch.Tensor) -> torch.Tensor:
        o = obs.detach().cpu().numpy()
        if norm is not None:
            o = norm.normalize_obs(o)
        a, _ = model.predict(o, deterministic=True)
        return torch.as_tensor(a, dtype=obs.dtype)

    return policy


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


def find_vecnormalize(model_path: str) -> str | None:
    """The observation normaliser saved with an SB3 model, from the two places the conventions put
    it and nowhere else: ``vecnormalize.pkl`` beside the zip (train_sb3.py), or in the folder
    named after the zip's stem (RL Zoo: ``<run>/<env id>/vecnormalize.pkl`` beside ``<run>/<env
    id>.zip``); None if neither has one. (Any other file, in any other folder, is never
    unpickled unless the user names it: ``sb3_policy(..., vecnormalize=PATH)``; issue 46.)"""
    folder = os.path.dirname(os.path.abspath(model_path))
    stem = os.path.splitext(os.path.basename(model_path))[0]
    from .trainers import VECNORMALIZE_FILE

    for cand in (os.path.join(folder, VECNORMALIZE_FILE), os.path.join(folder, stem, VECNORMALIZE_FILE)):
        if os.path.isfile(cand):
            return cand
    return None


def sb3_policy(model_path: str, vecnormalize: str | None = None, with_meta: bool = False):
    """``(policy(obs tensor) -> action tensor, env_kwargs)`` for an SB3 model (train_sb3.py's, RL
    Zoo's or any PPO / SAC / TD3 / A2C ``.zip``), with its observation normalisation applied:
    the file ``vecnormalize`` names, else the one :func:`find_vecnormalize` finds beside the
    model. The file loaded is printed (stderr); one that is not a ``VecNormalize`` is a
    ``CheckpointError``; a warning says when there is none to apply. ``with_meta``: also the
    run's record (train_sb3.py's run.json beside the model; ``{}`` without one)."""
    import json
    import pickle
    import sys
    import warnings

    from .. import cli

    sb3 = cli.require("stable_baselines3", "loading a Stable-Baselines3 model")

    from .shac import CheckpointError, _why
    from .trainers import VECNORMALIZE_FILE, sb3_trainers, trainer

    # SB3's zip and VecNormalize's pickle are SB3's formats: loading runs pickled code by their
    # design, so load only files you trust. What is checked here is that they are what they claim.
    folder = os.path.dirname(model_path)
    try:
        meta = {}
        if os.path.exists(os.path.join(folder, "run.json")):
            with open(os.path.join(folder, "run.json")) as fh:
                meta = json.load(fh)
        if not isinstance(meta, dict) or ("algo" in meta and meta["algo"] not in sb3_trainers()):
            raise ValueError("run.json beside the model is not train_sb3.py's")
        # run.json names the algorithm; without it (a model from elsewhere) each is tried
        names = [trainer(meta["algo"]).sb3_class] if "algo" in meta else ["PPO", "SAC", "TD3", "A2C", "DDPG"]
        model, errors = None, []
        for name in names:
            try:
                model = getattr(sb3, name).load(model_path, device="cpu")
                break
            except Exception as exc:  # the zip's policy belongs to another algorithm
                errors.append(f"{name}: {_why(exc)}")
        if model is None:
            raise ValueError("no SB3 algorithm loads it (" + "; ".join(errors)[:300] + ")")
        norm = None
        if vecnormalize is not None and not os.path.isfile(vecnormalize):
            raise ValueError(f"the normaliser {vecnormalize} named for it is not a file")
        vn = vecnormalize if vecnormalize is not None else find_vecnormalize(model_path)
        if vn is not None:
            from stable_baselines3.common.vec_env import VecNormalize

            print(f"observation normaliser: {vn}", file=sys.stderr)
            with open(vn, "rb") as fh:
                norm = pickle.load(fh)  # noqa: S301 (SB3's own format, from where the model's conventions put it)
            if not isinstance(norm, VecNormalize):
                raise ValueError(f"{vn} holds a {type(norm).__name__}, not SB3's VecNormalize")
            rms = getattr(norm, "obs_rms", None)
            stats = [getattr(rms, "mean", None), getattr(rms, "var", None)] if norm.norm_obs else []
            if any(v is None or not np.all(np.isfinite(np.asarray(v, dtype=np.float64))) for v in stats):
                raise ValueError(f"{vn} holds non-finite observation statistics (mean or variance)")
    except Exception as exc:
        raise CheckpointError(f"{model_path} is not a usable SB3 model ({_why(exc)})") from None
    if norm is None:
        warnings.warn(f"no {VECNORMALIZE_FILE} found with {model_path}: its policy sees raw observations "
                      "(right only if it was trained without VecNormalize)", RuntimeWarning, stacklevel=2)
    out = (_predictor(model, norm), meta.get("env_kwargs", {}))
    return out + (meta,) if with_meta else out
