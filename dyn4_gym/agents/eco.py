"""The eco task's classical baselines (issue 23; docs/env.md, "The eco task").

- Constant speed: pure pursuit on the pedals at the constant speed the time budget needs. The
  driver's speed reference is ``speed_scale`` times the task's target speed (the budget is the
  course at the target speed plus 10 %, so a scale a little below 1 still arrives in time); the
  scale is the one setting, tuned on the validation seeds (benchmarks/baselines.py eco). The
  benchmark's eco target is set against it.
- Cruise and coast: the same, with both pedals released over the course's last ``coast_m``
  metres. A car that drives to the line at speed carries kinetic energy over it that its fuel
  paid for; coasting the last stretch spends that energy on the way instead (the car starts at
  the target speed, so some of it was never paid for). Tuned on the validation seeds
  (benchmarks/baselines.py eco_coast): the stronger classical bar.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..envs import EnvConfig
from ..envs.course import goal_arc
from ..model.task import OBS_INDEX, obs_scale
from ..plant.powertrain import HUMVEE_POWERTRAIN
from .classical import PurePursuit
from .evaluation import counted_litres, evaluate  # counted_litres: the eco metric's one home

__all__ = ["ECO_COAST_TUNED", "ECO_TUNED_SCALE", "EcoResult", "coast_policy", "constant_speed_policy", "counted_litres",
           "litres_per_100km", "run_eco_baseline"]


# the speed scale benchmarks/baselines.py chose on the validation courses (docs/eco_baseline.json,
# "chosen"; tests/test_eco.py holds them equal)
ECO_TUNED_SCALE = 0.95
# the cruise-and-coast setting benchmarks/baselines.py eco_coast chose on the validation courses
# (docs/eco_coast_baseline.json, "chosen"; tests/test_eco.py holds them equal)
ECO_COAST_TUNED = {"speed_scale": 1.0, "coast_m": 75.0}


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


def coast_policy(cfg: EnvConfig, speed_scale: float = 1.0, coast_m: float = 0.0):
    """:func:`constant_speed_policy`, with both pedals released (steering kept) once the car is
    within ``coast_m`` [m] of the goal. It reads how far it has come from the observed clock
    (``observe_clock``): the lead ``s T / s_goal - t`` and the time left ``T - t`` give
    ``s / s_goal = (lead + t) / T``."""
    if not cfg.observe_clock:
        raise ValueError("coast_policy reads the distance driven from the observed clock: it needs an env with "
                         "observe_clock=True (Dyn4HumveeEco-v1)")
    if not (0.0 <= coast_m < float("inf")):
        raise ValueError(f"coast_m must be a finite distance >= 0, got {coast_m!r}")
    cruise = constant_speed_policy(cfg, speed_scale)
    budget = cfg.time_budget
    goal = goal_arc(cfg.course)  # [m] TaskCore.goal
    i_left, i_lead = OBS_INDEX["time_left"], OBS_INDEX["lead"]
    s_left, s_lead = obs_scale("time_left"), obs_scale("lead")

    def policy(obs):
        action = cruise(obs)
        t = budget - obs[:, i_left] * s_left
        remaining = goal * (1.0 - (obs[:, i_lead] * s_lead + t) / budget)
        coast = (remaining < coast_m).unsqueeze(-1)
        pedals = torch.where(coast, torch.zeros_like(action[:, 1:]), action[:, 1:])
        return torch.cat((action[:, :1], pedals), -1)

    return policy


@dataclass(frozen=True)
class EcoResult:
    arrival: np.ndarray  # [s] per seed (inf: did not finish)
    litres_per_100km: np.ndarray  # fuel over the distance driven, per seed
    returns: np.ndarray
    time_budget: float  # [s] the task's

    @property
    def in_budget(self) -> np.ndarray:
        """Per seed, bool: finished within the time budget."""
        return self.arrival <= self.time_budget

    @property
    def counted(self) -> np.ndarray:
        """The metric per seed: litres per 100 km in the budget, inf otherwise (counted_litres)."""
        return counted_litres(self.arrival, self.litres_per_100km, self.time_budget)


def run_eco_baseline(seeds, speed_scale: float = 1.0, env_kwargs: dict | None = None, policy=None,
                     coast_m: float | None = None) -> EcoResult:
    """A policy on the eco task's courses of ``seeds`` (``Dyn4HumveeEco-v1``, the benchmark's),
    one row each, each driven to the end of its episode by :func:`~.evaluation.evaluate` (the
    figures every learner is measured by). The default policy is the constant-speed baseline, or
    with ``coast_m`` the cruise-and-coast one."""
    import dyn4_gym

    kw = {**dyn4_gym.ECO_CLOCK, "dtype": "float64", **(env_kwargs or {})}
    cfg = EnvConfig.from_dict(kw)
    if policy is None:
        policy = (constant_speed_policy(cfg, speed_scale) if coast_m is None
                  else coast_policy(cfg, speed_scale, coast_m))
    ev = evaluate(policy, kw, seeds=seeds)
    return EcoResult(arrival=ev.arrival, litres_per_100km=ev.litres, returns=ev.returns, time_budget=cfg.time_budget)
