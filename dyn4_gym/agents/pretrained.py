"""Trained agents shipped with the package (issue 47): a SHAC policy per benchmark task, loadable
in one call, with the figures it reached on the held-out courses and how it was made stored
beside it.

    from dyn4_gym.agents import pretrained
    policy = pretrained("Dyn4HumveeRace-v0")            # SHAC; pretrained(id, "ppo") where PPO ships
    action = policy(torch.as_tensor(obs)[None])         # (1, obs) float32 -> (1, n_action)

Each agent is two files in ``dyn4_gym/data/pretrained/``: ``<id>__<method>.pt``, a SHAC
checkpoint (:meth:`SHAC.save`: the actor, its observation normaliser and, so training can go on
from it, the critic and the optimisers; 64 x 64 networks, under 0.3 MB), and ``<id>__<method>.json``,
its record: the command that made it, the commit, the seed and env steps, the packages, and the
held-out figures (:func:`~dyn4_gym.agents.evaluation.task_figures` on ``EVAL_SEEDS``), which a
test re-measures. ``benchmarks/pretrained.py`` makes them with the learning benchmark's settings.
The size budget of the folder is :data:`SIZE_BUDGET`.
"""

from __future__ import annotations

import json
import os

from .trainers import DEFAULT_TRAINER, TRAINERS, trainer

__all__ = ["PRETRAINED_DIR", "SIZE_BUDGET", "METHODS", "available", "load_files", "pretrained", "pretrained_path",
           "pretrained_record"]

PRETRAINED_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "pretrained")
SIZE_BUDGET = 4 * 2**20  # [bytes] every shipped agent together (tests/test_pretrained_issue47.py holds it)
# the methods an agent can ship for (every trainer), and their checkpoint's extension: SHAC's own
# checkpoint; an SB3 model (with its VecNormalize statistics beside it, ``<stem>.vecnormalize.pkl``;
# loading needs the sb3 extra). SHAC and PPO ship today.
METHODS = {name: t.suffix for name, t in TRAINERS.items()}


def _stem(env_id: str, method: str) -> str:
    return os.path.join(PRETRAINED_DIR, f"{env_id}__{method}")


def available() -> list[tuple[str, str]]:
    """``(env_id, method)`` of every shipped agent, sorted."""
    if not os.path.isdir(PRETRAINED_DIR):
        return []
    out = []
    for name in os.listdir(PRETRAINED_DIR):
        stem, ext = os.path.splitext(name)
        if ext == ".json" and "__" in stem:
            env_id, method = stem.rsplit("__", 1)
            if method in METHODS and os.path.exists(os.path.join(PRETRAINED_DIR, stem + METHODS[method])):
                out.append((env_id, method))
    return sorted(out)


def _check(env_id: str, method: str) -> None:
    ships = available()
    if (env_id, method) not in ships:
        ships = ", ".join(f"{i} ({m})" for i, m in ships) or "none"
        raise ValueError(f"no pretrained {method!r} agent for {env_id!r}; shipped: {ships}")


def pretrained_path(env_id: str, method: str = DEFAULT_TRAINER) -> str:
    """The shipped checkpoint's path (``ValueError`` naming what ships when there is none)."""
    _check(env_id, method)
    return _stem(env_id, method) + METHODS[method]


def pretrained_record(env_id: str, method: str = DEFAULT_TRAINER) -> dict:
    """The agent's record: provenance (command, commit, seed, env steps, packages) and the
    held-out figures it reached (``figures``)."""
    _check(env_id, method)
    with open(_stem(env_id, method) + ".json") as f:
        return json.load(f)


def pretrained(env_id: str, method: str = DEFAULT_TRAINER):
    """The shipped policy for ``env_id``: ``policy(obs (B, n_obs) tensor) -> actions (B, n_action)``,
    deterministic (the actor's mean), for the env ``gym.make(env_id)`` makes. PPO's needs the sb3
    extra (its files are SB3's: the model and its observation normaliser)."""
    _check(env_id, method)
    return load_files(_stem(env_id, method), method)


def load_files(stem: str, method: str):
    """The policy in an agent's files ``<stem>.pt`` (SHAC) or ``<stem>.zip`` and
    ``<stem>.vecnormalize.pkl`` (PPO), record or not (benchmarks/pretrained.py reads back what it
    has just written with it)."""
    return trainer(method).load_policy(stem)
