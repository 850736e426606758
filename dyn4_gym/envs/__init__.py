"""Gymnasium environments on the plant: ``gym.make("Dyn4Humvee-v1")`` and friends.

- :class:`Dyn4Env`: the single-car ``gymnasium.Env`` (numpy);
- :class:`Dyn4VectorEnv`: the native batched ``gymnasium.vector.VectorEnv`` (``gym.make_vec``);
- :class:`Dyn4SB3VecEnv` (``dyn4_gym.envs.sb3``, needs stable-baselines3): the SB3 ``VecEnv``;
- :class:`Dyn4DiffEnv` and :func:`policy_rollout`: the differentiable path.

All four are faces of one task (:class:`TaskCore`, core.py); the numpy faces run it on the
Numba engine by default and on torch with ``engine="torch"`` (engines.py), the differentiable
ones always on torch.
"""

from .config import ConfigError, CourseConfig, EnvConfig, GroundConfig
from .core import OBS_NAMES, TaskCore, TaskState
from .diff import Dyn4DiffEnv, policy_rollout
from .env import Dyn4Env
from .rewards import DEFAULT_WEIGHTS, REWARD_TERMS, RewardTerm, StepContext, register_reward_term
from .vector import Dyn4VectorEnv

__all__ = [
    "ConfigError", "CourseConfig", "EnvConfig", "GroundConfig", "OBS_NAMES", "TaskCore", "TaskState", "Dyn4DiffEnv",
    "policy_rollout", "Dyn4Env", "Dyn4VectorEnv", "DEFAULT_WEIGHTS", "REWARD_TERMS", "RewardTerm", "StepContext",
    "register_reward_term",
]
