"""dyn4-gym: a differentiable four-wheel vehicle plant in torch, and Gymnasium environments on it.

Importing the package registers the environments (idempotently, so worker processes that
re-import it through ``gym.make("dyn4_gym:Dyn4Humvee-v0")`` are fine):

- ``Dyn4Humvee-v0``: the default task, hills, friction patches and bumps;
- ``Dyn4HumveeFlat-v0``: level ground of constant friction 0.8, no patches or bumps, for quick
  learning tests;
- ``Dyn4HumveeDriver-v0``: the default task driven through the powertrain, actions
  ``(steer, throttle, brake)`` (``action="driver"``; docs/env.md, "Actions").
"""

__version__ = "0.1.0"

FLAT_GROUND = {"hills_amplitude": 0.0, "n_patches": 0, "n_bumps": 0}


def _register() -> None:
    from gymnasium.envs.registration import register, registry

    specs = {
        "Dyn4Humvee-v0": {"engine": "auto"},
        "Dyn4HumveeFlat-v0": {"ground": dict(FLAT_GROUND), "engine": "auto"},
        "Dyn4HumveeDriver-v0": {"action": "driver", "engine": "auto"},
    }
    for env_id, kwargs in specs.items():
        if env_id in registry:
            continue
        register(id=env_id, entry_point="dyn4_gym.envs.env:Dyn4Env",
                 vector_entry_point="dyn4_gym.envs.vector:Dyn4VectorEnv", kwargs=kwargs)


_register()
