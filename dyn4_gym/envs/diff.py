"""The differentiable path: a batched env with gradients on, and a functional rollout.

:class:`Dyn4DiffEnv` keeps the autograd graph across steps until :meth:`Dyn4DiffEnv.detach`
starts a new window (short-horizon trainers such as SHAC cut it between windows); finished rows
are reset by a select in the same step, which also cuts their gradient. :func:`policy_rollout` runs a
policy for a horizon from a given state and returns everything stacked, for backpropagation
through time. Float32 or float64, CPU or CUDA (``dtype``, ``device`` keyword arguments).
"""

from __future__ import annotations

import torch

from .config import EnvConfig
from .core import TaskCore, TaskState
from .inputs import check_seed, seed_to_key
from .._tree import tree_map

__all__ = ["Dyn4DiffEnv", "policy_rollout"]


class Dyn4DiffEnv:
    """``num_envs`` rows with gradients on; torch tensors in and out.

    ``sync_free``: step without a host sync (issue 49), so a GPU's queue never waits on the host
    inside a step: finished rows are reset by drawing every row's next episode and selecting
    (:meth:`TaskCore.reset_where`; the same states, one extra draw a step), and actions are not
    checked for NaN or inf on the host: a row given one steps from its last finite state, ends
    with ``info["nonfinite"]`` and the termination penalty, and restarts (the env's guard for a
    non-finite state), its gradient cut so no NaN reaches the other rows. The default (``None``)
    is on for CUDA devices and off elsewhere, where the sync is cheap and the select's extra draw
    is not; the results are the same either way for finite actions. Shapes are checked always.
    With ``compile=True`` too, the step is :meth:`TaskCore.compiled_whole_step`: the substeps,
    the reward terms and the reset in one compiled program (``fullgraph=True``).
    """

    def __init__(self, num_envs: int = 64, sync_free: bool | None = None, **kwargs):
        if isinstance(num_envs, bool) or not (isinstance(num_envs, int) and num_envs >= 1):
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        if sync_free is not None and not isinstance(sync_free, bool):
            raise ValueError(f"sync_free must be True, False or None, got {sync_free!r}")
        self.config = EnvConfig.from_dict(kwargs)
        self.core = TaskCore(self.config)
        self.sync_free = self.core.device.type == "cuda" if sync_free is None else sync_free
        self.num_envs = num_envs
        self.state: TaskState | None = None
        self._step = self.core.step_fn()  # compile=True: the compiled forward and backward
        # sync-free: the whole step with its reset inside (compile=True: as one compiled program)
        self._whole = None if not self.sync_free else (
            self.core.compiled_whole_step() if self.config.compile else self.core.whole_step)

    @property
    def obs_dim(self) -> int:
        return self.core._scales.shape[0]

    def reset(self, seed: int | None = None) -> torch.Tensor:
        seed = check_seed(seed)
        seeds = [None] * self.num_envs if seed is None else [seed + i for i in range(self.num_envs)]
        key = seed_to_key(seeds)
        self.state = self.core.new_state(key, torch.zeros(self.num_envs, dtype=torch.long))
        return self.core.observe(self.state)

    def step(self, action: torch.Tensor):
        """Returns ``(obs, reward, terminated, truncated, info)``; finished rows restart at once,
        and ``info["final_obs"]`` holds the observation they finished with."""
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        if not isinstance(action, torch.Tensor):
            raise TypeError(f"action must be a torch tensor of shape ({self.num_envs}, {self.core.n_action}), got {type(action).__name__} "
                            "(this face keeps gradients; use gym.make_vec for numpy)")
        if action.shape != (self.num_envs, self.core.n_action) or not (
                self.sync_free or torch.isfinite(action.detach()).all()):
            raise ValueError(f"action must be a finite tensor of shape ({self.num_envs}, {self.core.n_action})")
        if self._whole is not None:  # non-finite actions found on the device (TaskCore.step's bad)
            bad = ~torch.isfinite(action.detach()).all(-1)
            self.state, obs, reward, term, trunc, info = self._whole(self.state, action, bad)
            return obs, reward, term, trunc, info
        state, obs, reward, term, trunc, info = self._step(self.state, action)
        done = term | trunc
        info["final_obs"] = obs
        if bool(done.any()):
            state = self.core.reset_rows(state, done)
            obs = torch.where(done[:, None], self.core.observe(state), obs)
        self.state = state
        return obs, reward, term, trunc, info

    def __deepcopy__(self, memo):
        """A copy whose state is cut from the graph: it starts a new window (a graph cannot be copied)."""
        import copy

        new = object.__new__(type(self))
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            new.__dict__[k] = copy.deepcopy(v.detach() if isinstance(v, TaskState) else v, memo)
        return new

    def detach(self) -> torch.Tensor:
        """Cut the graph here: the next steps' gradients stop at the current state."""
        self.state = self.state.detach()
        return self.core.observe(self.state)

    def detach_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """Cut the graph here for the rows where the ``(num_envs,)`` bool mask ``rows`` is true
        (the others keep theirs); returns the observation, those rows' cut from the graph."""
        if not (isinstance(rows, torch.Tensor) and rows.dtype == torch.bool and rows.shape == (self.num_envs,)):
            raise ValueError(f"rows must be a bool tensor of shape ({self.num_envs},)")
        rows = rows.to(self.state.x.device)

        def cut(t: torch.Tensor) -> torch.Tensor:
            if not t.requires_grad or t.shape[:1] != rows.shape:
                return t
            return torch.where(rows.view(-1, *[1] * (t.dim() - 1)), t.detach(), t)

        self.state = tree_map(cut, self.state)
        return self.core.observe(self.state)


def policy_rollout(policy, core: TaskCore, state: TaskState, horizon: int):
    """Run ``policy(obs) -> action`` for ``horizon`` steps from ``state``, keeping the graph.

    Rows that finish stop accumulating (a ``alive`` mask multiplies later rewards) and are not
    reset, so the returned trajectory is one differentiable function of the policy and the start.
    Returns a dict: ``obs (T+1, B, D)``, ``action``, ``reward``, ``alive (T, B)``, ``state`` (last).
    """
    obs = core.observe(state)
    alive = torch.ones(state.batch_size, dtype=torch.bool, device=obs.device)
    out = dict(obs=[obs], action=[], reward=[], alive=[])
    for _ in range(horizon):
        a = policy(obs)
        state, obs, r, term, trunc, _ = core.step(state, a)
        out["action"].append(a)
        out["reward"].append(r * alive)
        out["alive"].append(alive)
        out["obs"].append(obs)
        alive = alive & ~(term | trunc)
    res = {k: torch.stack(v) for k, v in out.items()}
    res["state"] = state
    return res
