"""The eco task's classical baseline: pure pursuit on the pedals at the constant speed the time
budget needs (issue 23; docs/env.md, "The eco task").

The driver's speed reference is ``speed_scale`` times the task's target speed (the budget is
the course at the target speed plus 10 %, so a scale a little below 1 still arrives in time);
the scale is the one setting, tuned on the validation seeds (benchmarks/baselines.py eco).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..envs import EnvConfig
from ..model.task import OBS_INDEX
from ..plant.powertrain import HUMVEE_POWERTRAIN
from .classical import PurePursuit
from .evaluation import evaluate

__all__ = ["ECO_TUNED_SCALE", "EcoResult", "constant_speed_policy", "counted_litres", "litres_per_100km",
           "run_eco_baseline"]


# the speed scale benchmarks/baselines.py chose on the validation courses (docs/eco_baseline.json,
# "chosen"; tests/test_eco.py holds them equal)
ECO_TUNED_SCALE = 0.95


def litres_per_100km(fuel_j, distance_m, pt=HUMVEE_POWERTRAIN):
    """Fuel energy [J] over a distance [m] as litres of diesel per 100 km."""
    return np.asarray(fuel_j) / (pt.fuel_lhv * pt.fuel_density) / np.asarray(distance_m) * 1e5


def constant_speed_policy(cfg: EnvConfig, speed_scale: float = 1.0):
    """Pure pursuit on the pedals (``action="driver"``) with its speed reference scaled."""
    pp = PurePursuit.for_env({"action": "driver", "course": {"preview": list(cfg.course.preview)}})
    i = OBS_INDEX["target_speed"]

    def policy(obs):
        obs = obs.clone()
        obs[:, i] *= speed_scale
        return pp(obs)

    return policy


def counted_litres(arrival, litres, time_budget: float) -> np.ndarray:
    """The eco task's metric per course: litres per 100 km where the car arrived within
    ``time_budget`` [s], ``inf`` where it did not count (late, or never arrived)."""
    arrival = np.asarray(arrival, dtype=np.float64)
    return np.where(arrival <= time_budget, np.asarray(litres, dtype=np.float64), np.inf)


@dataclass
class EcoResult:
    arrival: np.ndarray  # [s] per seed (inf: did not finish)
    in_budget: np.ndarray  # bool: finished within the time budget
    litres_per_100km: np.ndarray  # fuel over the distance driven, per seed
    returns: np.ndarray
    counted: np.ndarray  # the metric per seed: litres per 100 km in the budget, inf otherwise (counted_litres)


def run_eco_baseline(seeds, speed_scale: float = 1.0, env_kwargs: dict | None = None, policy=None) -> EcoResult:
    """A policy (default: the constant-speed baseline) on the eco task's courses of ``seeds``, one
    row each, each driven to the end of its episode by :func:`~.evaluation.evaluate` (the
    figures every learner is measured by)."""
    import dyn4_gym

    kw = {**dyn4_gym.ECO, "dtype": "float64", **(env_kwargs or {})}
    cfg = EnvConfig.from_dict(kw)
    policy = constant_speed_policy(cfg, speed_scale) if policy is None else policy
    ev = evaluate(policy, kw, seeds=seeds)
    return EcoResult(arrival=ev.arrival, in_budget=ev.arrival <= cfg.time_budget, litres_per_100km=ev.litres,
                     returns=ev.returns, counted=counted_litres(ev.arrival, ev.litres, cfg.time_budget))
