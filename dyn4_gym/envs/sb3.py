"""A Stable-Baselines3 ``VecEnv`` over the batched task core (needs the ``sb3`` extra).

SB3 semantics: a finished row is reset at once; its last observation is in
``infos[i]["terminal_observation"]`` and ``infos[i]["TimeLimit.truncated"]`` says whether it
ended by the time limit (and not by termination). ``PPO("MlpPolicy", Dyn4SB3VecEnv(16))`` trains
on one torch batch.
"""

from __future__ import annotations

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from .config import EnvConfig
from .inputs import check_actions
from .vector import BatchRunner

__all__ = ["Dyn4SB3VecEnv"]


class Dyn4SB3VecEnv(VecEnv):
    def __init__(self, num_envs: int = 16, **kwargs):
        runner = BatchRunner(EnvConfig.from_dict(kwargs), num_envs)  # checks num_envs and the config first
        act_space, obs_space = runner.core.spaces()
        self.render_mode = None
        super().__init__(num_envs, obs_space, act_space)
        self.runner = runner
        self._actions = None

    @property
    def config(self) -> EnvConfig:
        return self.runner.config

    def reset(self):
        seeds = None if all(s is None for s in self._seeds) else self._seeds
        obs = self.runner.reset(seeds)
        self._reset_seeds()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self.runner.check_started()
        self._actions = check_actions(actions, self.num_envs, self.runner.core.n_action)

    def step_wait(self):
        obs, reward, term, trunc, raw = self.runner.step(self._actions)
        done = term | trunc
        infos = [self.runner.info_row(raw, i) for i in range(self.num_envs)]
        if done.any():
            for i in np.flatnonzero(done):
                infos[i]["terminal_observation"] = obs[i].copy()
                infos[i]["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
            obs[done] = self.runner.autoreset(done)
        return obs, reward.astype(np.float32), done, infos

    def close(self) -> None:
        pass

    def get_attr(self, attr_name, indices=None):
        return [getattr(self, attr_name) for _ in self._get_indices(indices)]

    def set_attr(self, attr_name, value, indices=None):
        setattr(self, attr_name, value)

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
        return [getattr(self, method_name)(*method_args, **method_kwargs) for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False for _ in self._get_indices(indices)]

