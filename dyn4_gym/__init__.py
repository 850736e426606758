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

- ``Dyn4HumveeRace-v0``: minimum time at the friction limit (issue 23; docs/env.md, "The race
  task"): a course whose corners need up to 7 m/s^2 at its 20 m/s design speed, friction patches,
  the friction ahead in the observation, a reward of metres along the course less the time.
- ``Dyn4HumveeEco-v0``: fuel at a time budget (issue 23; docs/env.md, "The eco task"): the
  powertrain over hills, a reward of minus the fuel (and half the progress), and a cost for each
  step past the budget. ``Dyn4HumveeEco-v1`` is the same task that also observes the clock: the
  time left and the lead over the pace that arrives at the budget (``observe_clock``).

Issue 44 adds versions with the grade force on (climbing costs the drive): ``Dyn4Humvee-v2``,
``Dyn4HumveeDriver-v2``, ``Dyn4HumveeEco-v2`` (Eco-v1 with it) and ``Dyn4HumveeRace-v1``, the
race where cornering decides: 1 km courses with corners down to a 16.7 m radius, the friction
ahead up to 120 m, a crash costing ten seconds. The older ids stay as they were.
"""

__version__ = "0.1.0"

FLAT_GROUND = {"hills_amplitude": 0.0, "n_patches": 0, "n_bumps": 0}


def _only(**weights) -> dict:
    """Reward weights with these terms alone: every other built-in term's weight 0."""
    from .model.task import TERM_ORDER

    return {**{name: 0.0 for name in TERM_ORDER}, **weights}


# The race task (docs/env.md, "The race task"): the course's corners need up to 7 m/s^2 at the
# 20 m/s design speed, where the Humvee holds about 6.9 m/s^2 on mu 0.8 and 3.4 on mu 0.4 (its
# skidpad), so a fast lap brakes for the corners; six friction patches on and near the course
# (mu 0.4-1.0), seen ahead in the observation; the reward pays metres along the course,
# uncapped, less the step's time at half the design speed, so a finished course returns
# ``length - 10 m/s x time``: the time to finish, and a crash never pays (termination 20).
RACE = {
    "course": {"length": 400.0, "lat_accel": 7.0, "wavelength_min": 60.0, "wavelength_max": 200.0,
               "half_width": 4.0, "preview": [10.0, 20.0, 30.0, 45.0, 60.0], "preview_friction": True},
    "ground": {"n_patches": 6, "patch_radius_min": 6.0, "patch_radius_max": 15.0, "n_bumps": 2},
    "target_speed": 20.0, "start_speed": 10.0, "episode_steps": 1200, "progress_cap": None,
    "reward_weights": _only(progress=1.0, time=0.5, termination=20.0),
    "engine": "auto",
}
# The eco task (docs/env.md, "The eco task"): a 400 m course over 2 m hills, driven through the
# powertrain (action="driver"), to arrive within 44 s (400 m at 10 m/s, plus 10 %) on as little
# fuel as possible. The reward is minus the fuel burned, in metres of lift (fuel energy / m g),
# half a metre per metre along the course (uncapped: a dense signal to move, and a constant, 200,
# over any finished course), and each step past the budget costs the time term's 0.5 m: a course
# finished in time returns 200 minus its fuel, so its return is the metric, litres per 100 km,
# up to that constant. The termination weight, 200, is more than a whole course's fuel (about
# 66 m at 12 L/100 km) plus the lateness of a car still driving at the 60 s truncation (16 s
# late: 160 m), so a crash never saves fuel.
ECO = {
    "action": "driver",
    "course": {"length": 400.0},
    "ground": {"hills_amplitude": 2.0, "hills_wavelength_min": 60.0, "hills_wavelength_max": 180.0, "n_bumps": 0},
    "target_speed": 10.0, "time_budget": 44.0, "episode_steps": 1200, "progress_cap": None,
    "reward_weights": _only(progress=0.5, fuel=1.0, late=1.0, termination=200.0),
    "engine": "auto",
}
# Its -v1: the same task that also observes the clock its reward depends on (docs/env.md, "The
# eco task"); the learning benchmark's eco task.
ECO_CLOCK = dict(ECO, observe_clock=True)
# Issue 44: the slopes' horizontal reaction on (docs/plant.md, "Grade force"), so climbing costs
# the drive and the hills move fuel and lap time; the seeds left it opt-in (off). Every task over
# terrain has a newer version with it on; the older ids stay as they were (Gymnasium calls them
# out of date at gym.make) so earlier results reproduce.
GRADE_FORCE = {"vehicle": {"grade_force": True}}
# The race where cornering decides (issue 44; docs/env.md, "Dyn4HumveeRace-v1"), its numbers
# written down before any driver ran on it: a 1 km course whose corners go down to a 16.7 m
# radius (6 m/s^2 at the 10 m/s design speed: the Humvee holds 6.9 on mu 0.8, 3.4 on mu 0.4),
# wavelengths 40-160 m, in the same 4 m half-width corridor; twelve friction patches (mu 0.4-1.0)
# and four bumps over the 0.3 m hills, the grade force on. The preview reaches 120 m: braking
# from 30 m/s to the 10 m/s corner speed on mu 0.4 takes 102 m (1.004 mu g, the plant's stop).
# The reward pays metres along the course less 10 m/s times the time (a finisher's return is
# 1,000 less ten times its time); leaving the corridor or rolling over costs 100 m, ten seconds
# of race, so a crash near the end never beats finishing slower.
RACE_V1 = {
    "course": {"length": 1000.0, "lat_accel": 6.0, "wavelength_min": 40.0, "wavelength_max": 160.0,
               "half_width": 4.0, "preview": [10.0, 25.0, 50.0, 80.0, 120.0], "preview_friction": True},
    "ground": {"n_patches": 12, "patch_radius_min": 6.0, "patch_radius_max": 15.0, "n_bumps": 4},
    "target_speed": 10.0, "start_speed": 10.0, "episode_steps": 2400, "progress_cap": None,
    "reward_weights": _only(progress=1.0, time=1.0, termination=100.0),
    **GRADE_FORCE,
    "engine": "auto",
}
ECO_V2 = dict(ECO_CLOCK, **GRADE_FORCE)
EPISODE_STEPS = 800  # EnvConfig.episode_steps's default (tests/test_conventions.py holds them equal)


# one line per registered id: what the task is (the docs' and the README's id tables are made from
# this and the registry: dyn4_gym/doc_tables.py; a registered id without a line fails there)
ID_NOTES = {
    "Dyn4Humvee-v0": "Dyn4Humvee-v1 with the progress term uncapped (kept so earlier results reproduce)",
    "Dyn4Humvee-v1": "follow a course over hills, friction patches and bumps near a target speed",
    "Dyn4Humvee-v2": "Dyn4Humvee-v1 with the grade force on (climbing costs the drive)",
    "Dyn4HumveeFlat-v0": "Dyn4HumveeFlat-v1 with the progress term uncapped",
    "Dyn4HumveeFlat-v1": "Dyn4Humvee-v1 on level ground of friction 0.8: quick learning tests",
    "Dyn4HumveeDriver-v0": "Dyn4HumveeDriver-v1 with the progress term uncapped",
    "Dyn4HumveeDriver-v1": "Dyn4Humvee-v1 driven through the powertrain: steer, throttle, brake",
    "Dyn4HumveeDriver-v2": "Dyn4HumveeDriver-v1 with the grade force on",
    "Dyn4HumveeRace-v0": "minimum time over 400 m at the friction limit (friction seen ahead)",
    "Dyn4HumveeRace-v1": "the race where cornering decides: 1 km of tight corners, 120 m preview, grade force on",
    "Dyn4HumveeEco-v0": "least fuel over 400 m of 2 m hills within a 44 s budget, through the powertrain",
    "Dyn4HumveeEco-v1": "Dyn4HumveeEco-v0 that also observes the clock against the budget",
    "Dyn4HumveeEco-v2": "Dyn4HumveeEco-v1 with the grade force on: the benchmark's eco task",
}


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
    specs["Dyn4HumveeRace-v0"] = dict(RACE)
    specs["Dyn4HumveeEco-v0"] = dict(ECO)
    specs["Dyn4HumveeEco-v1"] = dict(ECO_CLOCK)
    # issue 44: the grade force on (GRADE_FORCE)
    specs["Dyn4Humvee-v2"] = dict(tasks["Dyn4Humvee"], **GRADE_FORCE)
    specs["Dyn4HumveeDriver-v2"] = dict(tasks["Dyn4HumveeDriver"], **GRADE_FORCE)
    specs["Dyn4HumveeRace-v1"] = dict(RACE_V1)
    specs["Dyn4HumveeEco-v2"] = dict(ECO_V2)
    for env_id, kwargs in specs.items():
        if env_id in registry:
            continue
        # the registered limit is the config's episode_steps: gym.make's TimeLimit ends episodes
        # there (the env lifts its own limit under gym.make, docs/env.md "Episode end"), and
        # tools that read env.spec.max_episode_steps see it
        register(id=env_id, entry_point="dyn4_gym.envs.env:Dyn4Env",
                 vector_entry_point="dyn4_gym.envs.vector:Dyn4VectorEnv", kwargs=kwargs,
                 max_episode_steps=kwargs.get("episode_steps", EPISODE_STEPS))


_register()
