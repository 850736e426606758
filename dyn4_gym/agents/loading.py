"""Load any policy the scripts accept: the classical controller, a differentiable-trainer
checkpoint (.pt) or an SB3 model (.zip), as ``policy(obs (B, 30) tensor) -> actions (B, 2)``."""

from __future__ import annotations

import os

__all__ = ["load_policy"]


def load_policy(path: str, env_kwargs: dict | None = None):
    """``(policy, name, env_kwargs)``: the saved env keyword arguments merged under
    ``env_kwargs``. A bad file raises ``CheckpointError``, never a raw traceback."""
    from .classical import PurePursuit
    from .shac import SHAC

    env_kwargs = dict(env_kwargs or {})
    if path == "classical":
        return PurePursuit(driver=env_kwargs.get("action") == "driver"), "classical (pure pursuit)", env_kwargs
    if path.endswith(".zip"):
        from .sb3_glue import sb3_policy

        policy, saved = sb3_policy(path)
        name = os.path.basename(os.path.dirname(os.path.abspath(path))) + "/" + os.path.basename(path)
        return policy, name, {**saved, **env_kwargs}
    agent = SHAC.load(path)
    return agent.policy, os.path.basename(path), {**agent.env_kwargs, **env_kwargs}
