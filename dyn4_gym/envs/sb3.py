"""A Stable-Baselines3 ``VecEnv`` over the batched task core (needs the ``sb3`` extra).

SB3 semantics: a finished row is reset at once; its last observation is in
``infos[i]["terminal_observation"]``, ``infos[i]["TimeLimit.truncated"]`` says whether it
ended by the time limit (and not by termination), and ``infos[i]["episode"]`` carries the
episode's return, length and wall-clock time (``{"r", "l", "t"}``, as SB3's ``Monitor`` writes
them, so the logger's ``rollout/ep_rew_mean`` works without a wrapper; ``VecMonitor`` on top
overwrites them with its own). ``PPO("MlpPolicy", Dyn4SB3VecEnv(16))`` trains on one batch.

A complete ``VecEnv``: ``render_mode="rgb_array"`` with ``get_images()`` / ``render()`` (tiled
frames, so ``VecVideoRecorder`` records it), ``seed()`` (row ``i`` reset with ``seed + i``,
equal to a ``DummyVecEnv`` of single envs seeded the same), and ``get_attr`` / ``set_attr`` /
``env_method`` with ``indices``: every row is the same env (one batch), so an attribute reads
the same for each index, and one can only be set for all rows (never the VecEnv's own, such as
``num_envs``); ``env_method("reset", indices=...)`` resets exactly the rows named. An index that
is not a row is an ``IndexError``; ``seed()`` checks every row's seed before storing any.
"""

from __future__ import annotations

import time

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from .config import EnvConfig
from .inputs import check_actions, check_seed
from .vector import BatchRunner

__all__ = ["Dyn4SB3VecEnv"]


class Dyn4SB3VecEnv(VecEnv):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, num_envs: int = 16, render_mode: str | None = None, **kwargs):
        from .render import check_render_mode

        check_render_mode(render_mode, self.metadata["render_modes"])
        runner = BatchRunner(EnvConfig.from_dict(kwargs), num_envs)  # checks num_envs and the config first
        act_space, obs_space = runner.core.spaces()
        self.render_mode = render_mode
        super().__init__(num_envs, obs_space, act_space)
        self.runner = runner
        self._actions = None
        self._renderer = None
        self._ep_return = np.zeros(num_envs)
        self._ep_length = np.zeros(num_envs, dtype=np.int64)
        self._t0 = time.time()

    @property
    def config(self) -> EnvConfig:
        return self.runner.config

    def reset(self):
        seeds = None if all(s is None for s in self._seeds) else self._seeds
        obs = self.runner.reset(seeds)
        self._reset_seeds()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        self._ep_return[:] = 0.0
        self._ep_length[:] = 0
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self.runner.check_started()
        self._actions = check_actions(actions, self.num_envs, self.runner.core.n_action)

    def step_wait(self):
        obs, reward, term, trunc, raw = self.runner.step(self._actions)
        done = term | trunc
        infos = [self.runner.info_row(raw, i) for i in range(self.num_envs)]
        self._ep_return += reward
        self._ep_length += 1
        if done.any():
            now = round(time.time() - self._t0, 6)
            for i in np.flatnonzero(done):
                infos[i]["terminal_observation"] = obs[i].copy()
                infos[i]["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
                infos[i]["episode"] = {"r": float(self._ep_return[i]), "l": int(self._ep_length[i]), "t": now}
            self._ep_return[done] = 0.0
            self._ep_length[done] = 0
            obs[done] = self.runner.autoreset(done)
        return obs, reward.astype(np.float32), done, infos

    def get_images(self) -> list[np.ndarray]:
        """One ``(480, 480, 3)`` frame per row (``render_mode="rgb_array"``)."""
        if self.render_mode != "rgb_array":
            raise ValueError("get_images() needs render_mode='rgb_array'")
        self.runner.check_started()
        from .render import renderer_for

        self._renderer = renderer_for(self._renderer, self.runner.core)
        return self._renderer.draw_all(self.runner.task_state())

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    def seed(self, seed: int | None = None):
        """SB3's ``VecEnv.seed``: row ``i`` is reset with ``seed + i`` at the next ``reset()``
        (None: a random base). Every row's seed is checked first (an integer in ``[0, 2**64)``,
        not a bool or a float), and a bad one stores nothing, so the next ``reset()`` still works."""
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.uint32).max, dtype=np.uint32))
        base = check_seed(seed, "seed")
        if base + self.num_envs - 1 >= 2**64:
            raise ValueError(f"seed + i for the {self.num_envs} rows must stay below 2**64, got seed {base}")
        self._seeds = [base + i for i in range(self.num_envs)]
        return self._seeds

    def _rows(self, indices) -> list[int]:
        """The rows ``indices`` names (None: all; an int; or a sequence of ints), each checked to be
        a row of this env; as SB3's ``_get_indices``, but out-of-range or non-integer indices raise
        where SB3's list-based envs would raise too."""
        rows = list(self._get_indices(indices))
        for i in rows:
            if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)) or not 0 <= i < self.num_envs:
                raise IndexError(f"index {i!r} is not a row of this {self.num_envs}-row env")
        return [int(i) for i in rows]

    # every row is the same env: attributes are the batch's
    def get_attr(self, attr_name, indices=None):
        return [getattr(self, attr_name) for _ in self._rows(indices)]

    # the VecEnv's own bookkeeping: set_attr would change what the batch is, not a setting of it
    _OWN = frozenset({"num_envs", "observation_space", "action_space", "runner", "render_mode", "metadata",
                      "reset_infos", "_seeds", "_options", "_actions"})

    def set_attr(self, attr_name, value, indices=None):
        rows = self._rows(indices)
        if attr_name in self._OWN:
            raise AttributeError(f"set_attr({attr_name!r}): that is the VecEnv's own attribute, not an env setting")
        if sorted(rows) != list(range(self.num_envs)):
            raise ValueError(f"set_attr({attr_name!r}) for rows {rows}: the rows share one env, so an attribute is "
                             "set for all of them (indices=None)")
        setattr(self, attr_name, value)

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
        """A method of the env for the rows ``indices`` names: ``reset`` resets exactly those rows
        (the others carry on, as a ``DummyVecEnv``'s would; ``seed()`` is for the next ``reset()``
        of every row, as there) and returns their observations; any
        other method is the batch's, called once, its result given for each row named."""
        rows = self._rows(indices)
        if method_name == "reset":
            if method_args or method_kwargs:
                raise TypeError("env_method('reset') takes no arguments here (seed() and set_options() set them)")
            if sorted(set(rows)) == list(range(self.num_envs)):
                obs = self.reset()
            else:
                mask = np.zeros(self.num_envs, dtype=bool)
                mask[rows] = True
                self.runner.check_started()
                obs = self.runner.reset(None, mask=mask)  # as a DummyVecEnv's env.reset(): the rows' next episode
                self._ep_return[mask] = 0.0
                self._ep_length[mask] = 0
            return [obs[i] for i in rows]
        out = getattr(self, method_name)(*method_args, **method_kwargs)
        return [out for _ in rows]

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False for _ in self._rows(indices)]

    def get_wrapper_attr(self, name: str):
        """As ``gymnasium.Env.get_wrapper_attr``: the env has no wrappers, so its own attribute."""
        return getattr(self, name)
