"""Load any policy the scripts accept: the classical controller, a shipped agent
(``pretrained[:METHOD]`` with an env id), a differentiable-trainer checkpoint (.pt) or an SB3
model (.zip), as ``policy(obs (B, 30) tensor) -> actions (B, 2)``."""

from __future__ import annotations

import os

__all__ = ["load_policy", "check_policy_fits", "load_fitting_policy", "trained_on"]


def trained_on(path: str, saved: dict | None = None) -> str | None:
    """The dyn4_gym task id a model file was trained on, where it says: ``env_id`` in
    train_sb3.py's run.json (``saved``, the run's record), or an RL Zoo model's file name
    (``logs/ppo/Dyn4HumveeRace-v0_1/Dyn4HumveeRace-v0.zip``); else (or for an id that is not
    dyn4_gym's) None."""
    from ..envs.ids import env_ids

    ids = env_ids()
    if saved and saved.get("env_id") in ids:
        return saved["env_id"]
    stem = os.path.splitext(os.path.basename(path))[0]
    return stem if stem in ids else None


def load_policy(path: str, env_kwargs: dict | None = None, vecnormalize: str | None = None,
                env_id: str | None = None):
    """``(policy, name, env_kwargs)``: with ``env_id``, that task's registered keyword arguments
    with ``env_kwargs`` over them (:func:`dyn4_gym.envs.ids.id_kwargs`: what the scripts'
    ``--env-id`` means); else the model's saved env keyword arguments (or, for an RL Zoo model,
    its task id's) merged under ``env_kwargs``. ``name`` says the task the model was trained on
    where the file tells (:func:`trained_on`). A bad file raises ``CheckpointError``, never a raw
    traceback. ``vecnormalize`` names an SB3 model's observation normaliser (else the one beside
    it, ``find_vecnormalize``)."""
    from ..cli import UsageError, pretrained_method
    from ..envs.ids import id_kwargs
    from .classical import PurePursuit
    from .shac import SHAC

    env_kwargs = dict(env_kwargs or {})

    def env(saved: dict, task: str | None) -> dict:
        if env_id is not None:
            return id_kwargs(env_id, env_kwargs)
        return id_kwargs(task, {**saved, **env_kwargs}) if task is not None else {**saved, **env_kwargs}

    if path == "classical":
        return PurePursuit.for_env(env({}, None)), "classical (pure pursuit)", env({}, None)
    method = pretrained_method(path)
    if method is not None:  # "pretrained" or "pretrained:METHOD": the agent shipped for env_id
        from .pretrained import pretrained
        from .trainers import DEFAULT_TRAINER

        method = method or DEFAULT_TRAINER

        if env_id is None:
            raise UsageError("--policy pretrained needs --env-id: the task whose shipped agent to load")
        try:
            policy = pretrained(env_id, method)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        return policy, f"pretrained {method} for {env_id}", env({}, None)
    if path.endswith(".zip"):
        from .sb3_glue import sb3_policy

        policy, saved, meta = sb3_policy(path, vecnormalize, with_meta=True)
        task = trained_on(path, meta)
        name = os.path.basename(os.path.dirname(os.path.abspath(path))) + "/" + os.path.basename(path)
        return policy, name + (f" (trained on {task})" if task else ""), env(saved, task)
    if vecnormalize is not None:
        from .._checks import CheckpointError

        raise CheckpointError(f"a normaliser ({vecnormalize}) goes with an SB3 model (.zip), not with {path}")
    policy, saved = SHAC.load_policy(path)  # the policy alone: no training env of the file's size
    return policy, os.path.basename(path), env(saved, None)


def check_policy_fits(policy, name: str, env_kwargs: dict, env_id: str | None = None) -> None:
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
    where = f"{name} does not fit this env ({env_id + ', ' if env_id else ''}action={core.cfg.action!r}: " \
            f"{len(core.obs_names)} observations, {core.n_action} actions)"
    try:
        out = policy(obs)
    except (RuntimeError, ValueError, IndexError) as exc:
        raise UsageError(f"{where}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__}") from None
    try:
        check_actions(out.detach() if isinstance(out, torch.Tensor) else out, 2, core.n_action, name="its action")
    except ValueError as exc:
        raise UsageError(f"{where}: {exc}") from None


def load_fitting_policy(path: str, env_kwargs: dict | None = None, vecnormalize: str | None = None,
                        env_id: str | None = None):
    """:func:`load_policy`, then :func:`check_policy_fits` on the env it will drive."""
    policy, name, env_kwargs = load_policy(path, env_kwargs, vecnormalize, env_id)
    check_policy_fits(policy, name, env_kwargs, env_id)
    return policy, name, env_kwargs
