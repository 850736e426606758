"""The registered task ids, as the scripts take them (``--env-id``): which ids are dyn4_gym's,
and an id's keyword arguments with a user's over them.

``gym.make(env_id, **kwargs)`` replaces a registered keyword wholesale, so
``gym.make("Dyn4HumveeEco-v2", vehicle={"mass": 3000.0})`` drops the id's
``vehicle={"grade_force": True}``. :func:`id_kwargs` merges the nested tables (``course``,
``ground``, ``vehicle``, ``powertrain``, ``reward_weights``) key by key instead, so an override
changes what it names and nothing else of the task.
"""

from __future__ import annotations

__all__ = ["env_ids", "id_kwargs"]


def env_ids() -> tuple[str, ...]:
    """The dyn4_gym ids in Gymnasium's registry (registered at ``import dyn4_gym``), sorted."""
    from gymnasium.envs.registration import registry

    import dyn4_gym  # noqa: F401  (registers the ids)

    return tuple(sorted(k for k, s in registry.items() if str(s.entry_point).startswith("dyn4_gym.")))


def id_kwargs(env_id: str, overrides: dict | None = None) -> dict:
    """``env_id``'s registered keyword arguments with ``overrides`` over them: a value that is a
    table in both (a dict: ``course``, ``ground``, ``vehicle``, ``powertrain``,
    ``reward_weights``) merged key by key, any other replaced. ``ValueError`` for an id that is
    not dyn4_gym's (the message lists them)."""
    from gymnasium.envs.registration import registry

    ids = env_ids()
    if env_id not in ids:
        raise ValueError(f"{env_id!r} is not a dyn4_gym id; the ids are {', '.join(ids)}")
    base = dict(registry[env_id].kwargs)
    out = {**base, **(overrides or {})}
    for k, v in (overrides or {}).items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            out[k] = {**base[k], **v}
    return out
