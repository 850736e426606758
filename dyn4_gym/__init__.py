"""dyn4-gym: a differentiable four-wheel vehicle plant in torch, and Gymnasium environments on it.

Importing the package registers the environments (idempotently, so worker processes that
re-import it through ``gym.make("dyn4_gym:Dyn4Humvee-v1")`` are fine):

- ``Dyn4Humvee-v1``: the default task, hills, friction patches and bumps;
- ``Dyn4HumveeFlat-v1``: level ground of constant friction 0.8, no patches or bumps, for quick
  learning tests;
- ``Dyn4HumveeDriver-v1``: the default task driven through the powertrain, actions
  ``(steer, throttle, brake)`` (``action="driver"``; docs/env.md, "Actions").

Each has a ``-v0`` twin whose progress term is not capped at the target speed
(``progress_cap=None``), kept so earlier results can be reproduced (docs/env.md, "Versions").
"""

__version__ = "0.1.0"

FLAT_GROUND = {"hills_amplitude": 0.0, "n_patches": 0, "n_bumps": 0}
EPISODE_STEPS = 800  # EnvConfig.episode_steps's default (tests/test_conventions.py holds them equal)


def _register() -> None:
    from gymnasium.envs.registration import register, registry

    tasks = {
        "Dyn4Humvee": {"engine": "auto"},
        "Dyn4HumveeFlat": {"ground": dict(FLAT_GROUND), "engine": "auto"},
        "Dyn4HumveeDriver": {"action": "driver", "engine": "auto"},
    }
    # v1: progress paid up to the target speed (EnvConfig.progress_cap's default); v0: uncapped
    specs = {f"{name}-{v}": {**kwargs, **extra} for name, kwargs in tasks.items()
             for v, extra in (("v0", {"progress_cap": None}), ("v1", {}))}
    for env_id, kwargs in specs.items():
        if env_id in registry:
            continue
        # the registered limit is the config's episode_steps: gym.make's TimeLimit ends episodes
        # there (the env lifts its own limit under gym.make, docs/env.md "Episode end"), and
        # tools that read env.spec.max_episode_steps see it
        register(id=env_id, entry_point="dyn4_gym.envs.env:Dyn4Env",
                 vector_entry_point="dyn4_gym.envs.vector:Dyn4VectorEnv", kwargs=kwargs, max_episode_steps=EPISODE_STEPS)


_register()
