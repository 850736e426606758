"""The batched faces: a native Gymnasium ``VectorEnv`` over one torch batch.

:class:`BatchRunner` holds the batch's state and its rows' random streams and is shared with the
SB3 adapter (sb3.py): row ``i`` reset with seed ``s`` draws the same episodes as a single
``Dyn4Env`` reset with seed ``s``, and each automatic reset moves the row to its next episode.
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np
import gymnasium as gym
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from .._checks import check_int_range
from .config import ConfigError, EnvConfig
from .core import TaskCore, TaskState
from .engines import make_engine
from .inputs import OwnSpec, check_actions, check_seed, seed_keys

__all__ = ["BatchRunner", "Dyn4VectorEnv"]


class BatchRunner:
    """The state of ``n`` rows on one task and engine (envs/engines.py), with seeding and partial
    resets; numpy in and out. Every numpy face (single env, vector env, SB3 adapter) runs on one."""

    def __init__(self, config: EnvConfig, n: int):
        if isinstance(n, bool) or not (isinstance(n, int) and n >= 1):
            raise ValueError(f"num_envs must be a positive int, got {n!r}")
        self.n = n
        self.config = config
        self.core = TaskCore(config)
        self.engine = make_engine(self.core)
        self.state = None
        self.keys = None

    def set_episode_steps(self, steps: int) -> None:
        """The episode limit, set after the build and before any state (``Dyn4Env`` under
        ``gym.make``, whose ``TimeLimit`` then truncates): the one config field that changes
        without a second build of the task (issue 49), in the config, the task core and the engine."""
        if self.state is not None:
            raise RuntimeError("set_episode_steps: the runner has a state already")
        # a number EnvConfig's bounds allow, checked here rather than by a whole validation
        check_int_range("episode_steps", steps, 1, 10**7)
        self.config = dataclasses.replace(self.config, episode_steps=steps)
        self.core.cfg = self.config
        self.engine.set_episode_steps(steps)

    def reset(self, seeds=None, mask: np.ndarray | None = None, options: dict | None = None) -> np.ndarray:
        """Reset the rows in ``mask`` (all by default); ``seeds`` a list of per-row seeds or None.
        Returns the observation of every row.

        ``options`` (``EnvConfig`` keys) reconfigure every row, so they need every row reset.
        Transactional: everything is checked and the new state drawn before anything is kept, so a
        rejected call (``ValueError`` / ``ConfigError``) leaves the runner exactly as it was.
        """
        n = self.n
        mask = np.ones(n, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        if self.state is None and not mask.all():
            raise RuntimeError("the first reset must reset every row")
        if seeds is not None:
            if len(seeds) != n:
                raise ValueError(f"need {n} seeds, got {len(seeds)}")
            seeds = [check_seed(s, f"seed[{i}]") for i, s in enumerate(seeds)]
        config, core, engine = self.config, self.core, self.engine
        if options:
            if not mask.all():
                raise ValueError("options reconfigure every row: give them with a reset of every row "
                                 "(no reset_mask, or one that is all True)")
            config = self.config.replace(dict(options), path="options")
            if config.action != self.config.action:
                raise ConfigError(f"options.action cannot change an env's action space (it is {self.config.action!r}); "
                                  "make another env")
            core = TaskCore(config, path="options")
            engine = make_engine(core)
        old_episodes = None if self.state is None else self.engine.episodes(self.state)
        if seeds is not None or self.keys is None:
            new_keys = seed_keys(seeds if seeds is not None else [None] * n)
            keys = new_keys if self.keys is None else np.where(mask, new_keys, self.keys)
            episodes = np.zeros(n, dtype=np.int64) if old_episodes is None else np.where(mask, 0, old_episodes)
        else:
            keys, episodes = self.keys, old_episodes + mask
        if self.state is None or engine is not self.engine:
            state = engine.new_state(keys, episodes)
        else:
            state = engine.reset_rows(self.state, mask, keys, episodes)
        self.config, self.core, self.engine = config, core, engine
        self.keys, self.state = keys, state
        return engine.observe(state)

    def step(self, actions: np.ndarray, active: np.ndarray | None = None):
        """``(obs, reward, terminated, truncated, info)`` as numpy; rows not ``active`` are not
        stepped (zeros; reset them next). ``info`` is the engine's packed form: read it with
        :meth:`info` (a dict of arrays) or :meth:`info_row` (one row's scalars)."""
        self.check_started()
        self.state, obs, reward, term, trunc, info = self.engine.step(self.state, actions, active)
        return obs, reward, term, trunc, info

    def step_one(self, action: np.ndarray):
        """One row's step (``n == 1``; the single env): ``action (n_action,)`` checked by the caller
        -> ``(obs (n_obs,), reward, terminated, truncated, info)`` with Python scalars and one
        row's info dict (the engines' ``step_one``)."""
        self.check_started()
        self.state, obs, reward, term, trunc, info = self.engine.step_one(self.state, action)
        return obs, reward, term, trunc, info

    def check_started(self) -> None:
        """``RuntimeError`` until the first reset (every face says the same)."""
        if self.state is None:
            raise RuntimeError("call reset() before step()")

    def info(self, raw) -> dict:
        return self.engine.info(raw)

    def info_row(self, raw, row: int) -> dict:
        return self.engine.info_row(raw, row)

    def autoreset(self, mask: np.ndarray) -> np.ndarray:
        """Move the rows in ``mask`` to their next episode; returns their new observations
        ``(mask.sum(), 30)``."""
        episodes = self.engine.episodes(self.state) + mask
        self.state = self.engine.reset_rows(self.state, mask, self.keys, episodes)
        return self.engine.observe(self.state, np.flatnonzero(mask))

    @property
    def episodes(self) -> np.ndarray:
        return self.engine.episodes(self.state)

    def task_state(self) -> TaskState:
        """The rows' state as a torch :class:`TaskState` (for rendering and inspection)."""
        return self.engine.task_state(self.state)


def with_masks(info: dict, present: np.ndarray) -> dict:
    """``info`` (nested dicts of per-row arrays) with Gymnasium's ``_key`` masks: next to every
    key a bool array saying which rows hold it (``present``), at every level of nesting, as
    ``gymnasium.vector.VectorEnv._add_info`` writes them (no key at all where no row holds it)."""
    if not present.any():
        return {}
    out = {}
    for k, v in info.items():
        out[k] = with_masks(v, present) if isinstance(v, dict) else v
        out[f"_{k}"] = present.copy()
    return out


class Dyn4VectorEnv(gym.vector.VectorEnv):
    """``num_envs`` cars in one torch batch; ``gym.make_vec("Dyn4Humvee-v1", num_envs=N)``.

    ``autoreset_mode`` (``gymnasium.vector.AutoresetMode`` or its value) is declared in
    ``metadata["autoreset_mode"]``: ``NEXT_STEP`` (default; a finished row is reset on the next
    step, which ignores its action and returns reward 0), ``SAME_STEP`` (reset at once; the final
    observation and info are in ``info["final_obs"]`` / ``info["final_info"]``) or ``DISABLED``
    (reset finished rows with ``reset(options={"reset_mask": mask})``). Other keyword arguments are
    those of :class:`dyn4_gym.envs.env.Dyn4Env`. Infos are dicts of arrays, one entry per row.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20, "autoreset_mode": AutoresetMode.NEXT_STEP}
    spec = OwnSpec()  # the caller's keyword arguments, copied (envs/inputs.py)

    def __init__(self, num_envs: int = 1, autoreset_mode=AutoresetMode.NEXT_STEP, render_mode: str | None = None,
                 max_episode_steps: int | None = None, **kwargs):
        """``max_episode_steps`` (what ``gym.make_vec`` passes: the registered 800, or yours) is
        the episode limit unless ``episode_steps`` is given, as :class:`Dyn4Env` takes it from
        ``gym.make``; the two faces then truncate at the same step."""
        if max_episode_steps is not None and "episode_steps" not in kwargs:
            kwargs["episode_steps"] = max_episode_steps
        self.autoreset_mode = AutoresetMode(autoreset_mode) if not isinstance(autoreset_mode, AutoresetMode) else autoreset_mode
        self.metadata = dict(self.metadata, autoreset_mode=self.autoreset_mode)
        self.num_envs = num_envs
        self.runner = BatchRunner(EnvConfig.from_dict(kwargs), num_envs)
        self.render_mode = render_mode
        from .render import check_render_mode

        check_render_mode(render_mode, self.metadata["render_modes"])
        self.single_action_space, self.single_observation_space = self.runner.core.spaces()
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
        return obs, with_masks({"episode": self.runner.episodes}, reset)

    def step(self, actions):
        self.runner.check_started()
        a = check_actions(actions, self.num_envs, self.runner.core.n_action)
        n = self.num_envs
        if self.autoreset_mode == AutoresetMode.DISABLED and self._done.any():
            raise RuntimeError(f"rows {np.flatnonzero(self._done).tolist()} finished: reset them with "
                               "reset(options={'reset_mask': mask}) before stepping (autoreset is disabled)")
        pending = self._done.copy()
        if self.autoreset_mode == AutoresetMode.NEXT_STEP and pending.any():
            # rows due for a reset are not stepped: they are reset, their action ignored, reward 0
            obs, reward, term, trunc, raw = self.runner.step(a, active=~pending)
            obs[pending] = self.runner.autoreset(pending)
        else:
            obs, reward, term, trunc, raw = self.runner.step(a)
        info = self.runner.info(raw)
        done = term | trunc
        if self.autoreset_mode == AutoresetMode.SAME_STEP and done.any():
            final_obs = np.full(n, None, dtype=object)
            for i in np.flatnonzero(done):
                final_obs[i] = obs[i].copy()
            final_info = with_masks(info, done)
            obs[done] = self.runner.autoreset(done)
            # as Gymnasium's own vector envs: the rows reset at once carry their final step in
            # final_info, not in the step's keys
            info = with_masks(info, ~done)
            info.update(final_obs=final_obs, _final_obs=done.copy(), final_info=final_info, _final_info=done.copy())
        else:
            info = with_masks(info, ~pending)  # NEXT_STEP: the rows reset in this step did not step
        self._done = done if self.autoreset_mode != AutoresetMode.SAME_STEP else np.zeros(n, dtype=bool)
        return obs, reward, term, trunc, info

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        from .render import renderer_for

        self._renderer = renderer_for(self._renderer, self.runner.core)
        return tuple(self._renderer.draw_all(self.runner.task_state()))

    def close_extras(self, **kwargs):
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
