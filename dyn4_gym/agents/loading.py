"""Load any policy the scripts accept: the classical controller, a differentiable-trainer
checkpoint (.pt) or an SB3 model (.zip), as ``policy(obs (B, 30) tensor) -> actions (B, 2)``."""

from __future__ import annotations

import os

__all__ = ["load_policy", "check_policy_fits", "load_fitting_policy"]


def load_policy(path: str, env_kwargs: dict | None = None, vecnormalize: str | None = None):
    """``(policy, name, env_kwargs)``: the saved env keyword arguments merged under
    ``env_kwargs``. A bad file raises ``CheckpointError``, never a raw traceback. ``vecnormalize``
    names an SB3 model's observation normaliser (else the one beside it, ``find_vecnormalize``)."""
    from .classical import PurePursuit
    from .shac import SHAC

    env_kwargs = dict(env_kwargs or {})
    if path == "classical":
        return PurePursuit.for_env(env_kwargs), "classical (pure pursuit)", env_kwargs
    if path.endswith(".zip"):
        from .sb3_glue import sb3_policy

        policy, saved = sb3_policy(path, vecnormalize)
        name = os.path.basename(os.path.dirname(os.path.abspath(path))) + "/" + os.path.basename(path)
        return policy, name, {**saved, **env_kwargs}
    if vecnormalize is not None:
        from .shac import CheckpointError

        raise CheckpointError(f"a normaliser ({vecnormalize}) goes with an SB3 model (.zip), not with {path}")
    policy, saved = SHAC.load_policy(path)  # the policy alone: no training env of the file's size
    return policy, os.path.basename(path), {**saved, **env_kwargs}


def check_policy_fits(policy, name: str, env_kwargs: dict) -> None:
    """One step of ``policy`` on a zero observation of the env ``env_kwargs`` configure: its action
    must be that env's (width, finite). Else ``UsageError`` in one line, before any evaluation or
    recording: a policy of the other variant (accel or driver), or a normaliser of another
    observation size, says so here."""
    import torch

    from ..cli import UsageError
    from ..envs import EnvConfig, TaskCore
    from ..envs.inputs import check_actions

    core = TaskCore(EnvConfig.from_dict(dict(env_kwargs)))
    obs = torch.zeros(2, len(core.obs_names))
    where = f"{name} does not fit this env (action={core.cfg.action!r}: {len(core.obs_names)} observations, " \
            f"{core.n_action} actions)"
    try:
        out = policy(obs)
    except (RuntimeError, ValueError, IndexError) as exc:
        raise UsageError(f"{where}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__}") from None
    try:
        check_actions(out.detach() if isinstance(out, torch.Tensor) else out, 2, core.n_action, name="its action")
    except ValueError as exc:
        raise UsageError(f"{where}: {exc}") from None


def load_fitting_policy(path: str, env_kwargs: dict | None = None, vecnormalize: str | None = None):
    """:func:`load_policy`, then :func:`check_policy_fits` on the env it will drive."""
    policy, name, env_kwargs = load_policy(path, env_kwargs, vecnormalize)
    check_policy_fits(policy, name, env_kwargs)
    return policy, name, env_kwargs
