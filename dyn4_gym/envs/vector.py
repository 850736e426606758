"""The batched faces: a native Gymnasium ``VectorEnv`` over one torch batch.

:class:`BatchRunner` holds the batch's state and its rows' random streams and is shared with the
SB3 adapter (sb3.py): row ``i`` reset with seed ``s`` draws the same episodes as a single
``Dyn4Env`` reset with seed ``s``, and each automatic reset moves the row to its next episode.
"""

from __future__ import annotations

import numbers

import numpy as np
import gymnasium as gym
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from .config import EnvConfig
from .core import OBS_CLIP, OBS_NAMES, TaskCore
from .env import check_actions, check_seed, seed_to_key, to_numpy_info

__all__ = ["BatchRunner", "Dyn4VectorEnv"]


class BatchRunner:
    """The state of ``n`` rows on one :class:`TaskCore`, with seeding and partial resets."""

    def __init__(self, config: EnvConfig, n: int):
        if isinstance(n, bool) or not (isinstance(n, int) and n >= 1):
            raise ValueError(f"num_envs must be a positive int, got {n!r}")
        self.n = n
        self.config = config
        self.core = TaskCore(config)
        self._step = self.core.step_fn()
        self.state = None
        self.keys = None

    def reset(self, seeds=None, mask: np.ndarray | None = None, options: dict | None = None) -> torch.Tensor:
        """Reset the rows in ``mask`` (all by default); ``seeds`` a list of per-row seeds or None.

        ``options`` (``EnvConfig`` keys) reconfigure every row, so they need every row reset.
        Transactional: everything is checked and the new state drawn before anything is kept, so a
        rejected call (``ValueError`` / ``ConfigError``) leaves the runner exactly as it was.
        """
        n = self.n
        mask_t = torch.ones(n, dtype=torch.bool) if mask is None else torch.as_tensor(mask, dtype=torch.bool)
        if self.state is None and not bool(mask_t.all()):
            raise RuntimeError("the first reset must reset every row")
        if seeds is not None:
            if len(seeds) != n:
                raise ValueError(f"need {n} seeds, got {len(seeds)}")
            seeds = [check_seed(s, f"seed[{i}]") for i, s in enumerate(seeds)]
        config, core, step = self.config, self.core, self._step
        if options:
            if not bool(mask_t.all()):
                raise ValueError("options reconfigure every row: give them with a reset of every row "
                                 "(no reset_mask, or one that is all True)")
            config = self.config.replace(dict(options), path="options")
            core = TaskCore(config, path="options")
            step = core.step_fn()
        if seeds is not None or self.keys is None:
            new_keys = seed_to_key(seeds if seeds is not None else [None] * n)
            keys = new_keys if self.keys is None else torch.where(mask_t, new_keys, self.keys)
            episodes = torch.zeros(n, dtype=torch.long) if self.state is None else torch.where(
                mask_t, torch.zeros(n, dtype=torch.long), self.state.episode.cpu())
        else:
            keys, episodes = self.keys, self.state.episode.cpu() + mask_t.long()
        if self.state is None or core is not self.core:
            state = core.new_state(keys, episodes)
        else:
            state = core.reset_rows(self.state, mask_t.to(core.device), keys, episodes)
        self.config, self.core, self._step = config, core, step
        self.keys, self.state = keys, state
        return core.observe(state)

    def step(self, actions: np.ndarray):
        act = torch.as_tensor(actions, dtype=self.core.dtype, device=self.core.device)
        with torch.no_grad():
            state, obs, reward, term, trunc, info = self._step(self.state, act)
        self.state = state
        return obs, reward, term, trunc, info

    def autoreset(self, mask: torch.Tensor) -> torch.Tensor:
        """Move the rows in ``mask`` to their next episode; returns the new observation."""
        with torch.no_grad():
            self.state = self.core.reset_rows(self.state, mask)
            return self.core.observe(self.state)


class Dyn4VectorEnv(gym.vector.VectorEnv):
    """``num_envs`` cars in one torch batch; ``gym.make_vec("Dyn4Humvee-v0", num_envs=N)``.

    ``autoreset_mode`` (``gymnasium.vector.AutoresetMode`` or its value) is declared in
    ``metadata["autoreset_mode"]``: ``NEXT_STEP`` (default; a finished row is reset on the next
    step, which ignores its action and returns reward 0), ``SAME_STEP`` (reset at once; the final
    observation and info are in ``info["final_obs"]`` / ``info["final_info"]``) or ``DISABLED``
    (reset finished rows with ``reset(options={"reset_mask": mask})``). Other keyword arguments are
    those of :class:`dyn4_gym.envs.env.Dyn4Env`. Infos are dicts of arrays, one entry per row.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20, "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, autoreset_mode=AutoresetMode.NEXT_STEP, render_mode: str | None = None,
                 **kwargs):
        self.autoreset_mode = AutoresetMode(autoreset_mode) if not isinstance(autoreset_mode, AutoresetMode) else autoreset_mode
        self.metadata = dict(self.metadata, autoreset_mode=self.autoreset_mode)
        self.num_envs = num_envs
        self.runner = BatchRunner(EnvConfig.from_dict(kwargs), num_envs)
        self.render_mode = render_mode
        self.single_action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.single_observation_space = spaces.Box(-OBS_CLIP, OBS_CLIP, (len(OBS_NAMES),), np.float32)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._done = np.zeros(num_envs, dtype=bool)
        self._renderer = None

    @property
    def config(self) -> EnvConfig:
        return self.runner.config

    def reset(self, *, seed=None, options: dict | None = None):
        """Reset every row, or those in ``options["reset_mask"]``. Other options reconfigure every
        row and so need a reset of every row. A rejected call changes nothing."""
        if options is not None and not isinstance(options, dict):
            raise ValueError(f"options must be a dict, got {type(options).__name__}")
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if mask is not None:
            mask = np.asarray(mask)
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(f"options['reset_mask'] must be a bool array of shape ({self.num_envs},)")
        if seed is None:
            seeds = None
        elif isinstance(seed, (numbers.Integral, np.integer)) and not isinstance(seed, (bool, np.bool_)):
            first = check_seed(seed)
            seeds = [first + i for i in range(self.num_envs)]
            check_seed(seeds[-1], f"seed + {self.num_envs - 1}")
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"seed must be an int or a list of {self.num_envs} seeds")
        obs = self.runner.reset(seeds, mask, options)
        if seeds is not None:
            self._np_random, _ = gym.utils.seeding.np_random(seeds[0])
        reset = np.ones(self.num_envs, dtype=bool) if mask is None else mask
        self._done = self._done & ~reset
        return self._np(obs), {"episode": self.runner.state.episode.cpu().numpy()}

    def step(self, actions):
        a = check_actions(actions, self.num_envs)
        n = self.num_envs
        if self.autoreset_mode == AutoresetMode.DISABLED and self._done.any():
            raise RuntimeError(f"rows {np.flatnonzero(self._done).tolist()} finished: reset them with "
                               "reset(options={'reset_mask': mask}) before stepping (autoreset is disabled)")
        if self.autoreset_mode == AutoresetMode.NEXT_STEP and self._done.any():
            pending = torch.as_tensor(self._done)
            before = self.runner.state
            obs, reward, term, trunc, info = self.runner.step(a)
            # rows due for a reset: discard their step, reset them, reward 0, not done
            self.runner.state = self.runner.core.select(pending, before, self.runner.state)
            obs = torch.where(pending[:, None], self.runner.autoreset(pending), obs)
            zero = torch.zeros_like(reward)
            reward = torch.where(pending, zero, reward)
            term, trunc = term & ~pending, trunc & ~pending
            info = _mask_info(info, ~pending)
        else:
            obs, reward, term, trunc, info = self.runner.step(a)
        done = (term | trunc).cpu().numpy()
        info = to_numpy_info(info)
        if self.autoreset_mode == AutoresetMode.SAME_STEP and done.any():
            final_obs = np.full(n, None, dtype=object)
            obs_np = self._np(obs)
            for i in np.flatnonzero(done):
                final_obs[i] = obs_np[i]
            info["final_obs"], info["_final_obs"] = final_obs, done.copy()
            info["final_info"] = {k: v for k, v in info.items() if k not in ("final_obs", "_final_obs")}
            info["_final_info"] = done.copy()
            obs = self.runner.autoreset(torch.as_tensor(done))
            done_after = np.zeros(n, dtype=bool)
        else:
            done_after = done
        self._done = done_after if self.autoreset_mode != AutoresetMode.SAME_STEP else np.zeros(n, dtype=bool)
        return (self._np(obs), reward.cpu().numpy().astype(np.float64), term.cpu().numpy(), trunc.cpu().numpy(), info)

    @staticmethod
    def _np(obs: torch.Tensor) -> np.ndarray:
        return obs.detach().cpu().numpy().astype(np.float32)

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        from .render import TopDownRenderer

        if self._renderer is None:
            self._renderer = TopDownRenderer(self.runner.core)
        return tuple(self._renderer.draw(self.runner.state, i) for i in range(self.num_envs))

    def close_extras(self, **kwargs):
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


def _mask_info(info: dict, keep: torch.Tensor) -> dict:
    """Zero the rows not in ``keep`` (nested dicts of tensors)."""
    out = {}
    for k, v in info.items():
        if isinstance(v, dict):
            out[k] = _mask_info(v, keep)
        else:
            out[k] = torch.where(keep, v, torch.zeros_like(v))
    return out
