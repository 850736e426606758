"""The race task's classical baseline: a minimum-time speed profile over the known course, tracked
by pure pursuit (issue 23; docs/env.md, "The race task").

The planner knows what a race engineer would: the whole centre line and the friction under it.
Per course (one batch row) it computes the fastest speed profile ``v(s)`` the car's g-g envelope
allows, by the classic forward-backward pass (e.g. Lot & Biral's quasi-steady-state lap
simulation; Brayshaw & Harrison 2005):

1. the corner limit ``v_lat(s) = sqrt(a_lat(mu(s)) / |kappa(s)|)``, capped at ``v_max``;
2. forward, accelerating: ``v(s + ds)^2 <= v(s)^2 + 2 a_drive(v) sqrt(1 - (a_y / a_lat)^2) ds``;
3. backward, braking: ``v(s)^2 <= v(s + ds)^2 + 2 a_brake(mu) sqrt(1 - (a_y / a_lat)^2) ds``;

with ``a_y = v^2 kappa`` and the friction ellipse between the longitudinal and lateral limits.
The envelope is the plant's own, measured with its manoeuvres on flat ground at mu 0.8 (and
scaled in proportion to mu): the skidpad's 6.888 m/s^2 (0.878 mu g), the full-brake stop's 25.38 m
from 20 m/s (7.88 m/s^2 = 1.004 mu g), the drive command's 3 m/s^2 under the power cap
``P / (m v)``. ``margin`` (< 1) keeps the profile inside it: the one setting, tuned on the
validation seeds (agents/evaluation.VALIDATION_SEEDS).

Tracking: pure pursuit steering (agents/classical.py) and a speed loop on ``v(s)`` read
``lead`` seconds ahead of the car's arc length (the brakes' lag), the action the env's
``(steer, drive)`` box.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..envs import EnvConfig, TaskCore
from ..plant import HUMVEE
from .classical import PurePursuit, PurePursuitParams

__all__ = ["Envelope", "HUMVEE_ENVELOPE", "speed_profile", "RaceProfileParams", "RaceProfile", "RaceResult",
           "run_race_baseline", "RACE_TUNED"]


@dataclass(frozen=True)
class Envelope:
    """The car's g-g envelope on flat ground, per unit friction: lateral and braking limits over
    ``mu g``; the drive command's limit and the power cap it runs under."""

    lat_per_mu_g: float  # a_lat = lat_per_mu_g mu g
    brake_per_mu_g: float  # a_brake = brake_per_mu_g mu g
    a_drive: float  # [m/s^2]
    power_per_mass: float  # [W/kg] the drive force's cap P / v, per kg
    g: float = 9.81

    def lateral(self, mu):
        return self.lat_per_mu_g * mu * self.g

    def braking(self, mu):
        return self.brake_per_mu_g * mu * self.g

    def drive(self, v, mu):
        """The drive command's acceleration at ``v`` (the plant's smooth power cap), within the
        tires' braking-sized friction limit."""
        smooth = self.a_drive / (1.0 + (self.a_drive * v / self.power_per_mass) ** 4) ** 0.25
        return np.minimum(smooth, self.braking(mu))


# measured on the plant (tests/test_race.py re-measures them): skidpad 6.888 m/s^2 and stop 25.38 m
# from 20 m/s at mu 0.8 (README's envelope table), HUMVEE's 3 m/s^2 drive and 112 kW
HUMVEE_ENVELOPE = Envelope(lat_per_mu_g=6.888 / (0.8 * 9.81), brake_per_mu_g=20.0**2 / (2 * 25.38) / (0.8 * 9.81),
                           a_drive=HUMVEE.max_drive_accel, power_per_mass=HUMVEE.max_power / HUMVEE.mass)


def _curvature(xy: np.ndarray, spacing: float) -> np.ndarray:
    """Signed curvature [1/m] at each point of a centre line sampled every ``spacing`` metres:
    the turn between its two segments over the spacing (the neighbour's at the ends)."""
    d = np.diff(xy, axis=0)
    heading = np.unwrap(np.arctan2(d[:, 1], d[:, 0]))
    k = np.diff(heading) / spacing
    return np.concatenate(([k[0]], k, [k[-1]]))


def speed_profile(kappa: np.ndarray, mu: np.ndarray, spacing: float, v0: float, env: Envelope = HUMVEE_ENVELOPE,
                  margin: float = 0.9, v_max: float = 40.0) -> np.ndarray:
    """The minimum-time speed profile [m/s] over points ``spacing`` metres apart with curvature
    ``kappa`` and friction ``mu``, starting at ``v0``, inside ``margin`` times the envelope."""
    a_lat = margin * env.lateral(mu)
    a_brk = margin * env.braking(mu)
    v_lim = np.minimum(np.sqrt(a_lat / np.maximum(np.abs(kappa), 1e-9)), v_max)
    n = len(kappa)
    v = v_lim.copy()
    v[0] = min(v0, v_lim[0])
    for i in range(n - 1):  # forward: what the drive can reach
        use = min((v[i] ** 2 * abs(kappa[i]) / a_lat[i]) ** 2, 1.0)
        ax = margin * env.drive(v[i], mu[i]) * math.sqrt(1.0 - use)
        v[i + 1] = min(v[i + 1], math.sqrt(v[i] ** 2 + 2.0 * ax * spacing))
    for i in range(n - 2, -1, -1):  # backward: what the brakes can shed before each corner
        use = min((v[i + 1] ** 2 * abs(kappa[i + 1]) / a_lat[i + 1]) ** 2, 1.0)
        ax = a_brk[i + 1] * math.sqrt(1.0 - use)
        v[i] = min(v[i], math.sqrt(v[i + 1] ** 2 + 2.0 * ax * spacing))
    return v


@dataclass(frozen=True)
class RaceProfileParams:
    margin: float = 0.9  # share of the envelope the profile uses (tuned on validation seeds)
    lead: float = 0.3  # [s] read the profile this far ahead of the car (the brakes' lag)
    speed_gain: float = 2.0  # [1/s] speed loop
    pursuit: PurePursuitParams = PurePursuitParams(lookahead_gain=0.8, lookahead_min=8.0, lookahead_max=40.0)


class RaceProfile:
    """The baseline for one batch of courses: ``plan(state)`` at reset, then ``act(obs, s)``."""

    def __init__(self, core: TaskCore, params: RaceProfileParams = RaceProfileParams(),
                 envelope: Envelope = HUMVEE_ENVELOPE):
        if core.driver:
            raise ValueError("RaceProfile drives the acceleration action (action='accel')")
        self.core, self.params, self.envelope = core, params, envelope
        self.spacing = core.cfg.course.spacing
        self.pursuit = PurePursuit(params.pursuit, preview=core.cfg.course.preview)
        self.profiles = None

    def plan(self, state) -> np.ndarray:
        """Each row's speed profile ``(B, N)`` [m/s] over its course, from its centre line and the
        friction under it."""
        xy = state.course_xy.detach().to(torch.float64)
        mu = state.terrain(state.course_xy)[0].detach().to(torch.float64).cpu().numpy()
        xy = xy.cpu().numpy()
        v0 = state.x[:, 3].detach().cpu().numpy()
        self.profiles = np.stack([speed_profile(_curvature(xy[b], self.spacing), mu[b], self.spacing, float(v0[b]),
                                                self.envelope, self.params.margin) for b in range(xy.shape[0])])
        return self.profiles

    def act(self, obs: torch.Tensor, s: torch.Tensor, vx: torch.Tensor) -> torch.Tensor:
        """Actions ``(B, 2)`` from the observation, each row's arc length ``s`` [m] and speed ``vx``."""
        steer = self.pursuit(obs)[:, 0]
        prof = torch.as_tensor(self.profiles, dtype=obs.dtype, device=obs.device)
        ahead = s + self.params.lead * vx.clamp_min(0.0)
        i = (ahead / self.spacing).round().long().clamp(0, prof.shape[1] - 1)
        v_ref = prof.gather(1, i.unsqueeze(1)).squeeze(1)
        a_cmd = self.params.speed_gain * (v_ref - vx)
        lon = torch.where(a_cmd >= 0, a_cmd / self.pursuit.a_drive, a_cmd / self.pursuit.a_brake)
        return torch.stack((steer, lon), -1).clamp(-1.0, 1.0)


# the setting benchmarks/baselines.py chose on the validation courses (docs/race_baseline.json,
# "chosen"; tests/test_race.py holds them equal): the baseline every learner is measured against
RACE_TUNED = RaceProfileParams(margin=0.7, lead=0.4)


@dataclass
class RaceResult:
    time: np.ndarray  # [s] time to finish per seed (inf: did not finish)
    finished: np.ndarray  # bool per seed
    returns: np.ndarray  # the env's return per seed
    profiles: np.ndarray  # (B, N) the planned speed profiles [m/s]
    speeds: np.ndarray  # (T, B) vx while each row ran (NaN after)


@torch.no_grad()
def run_race_baseline(seeds, env_kwargs: dict | None = None, params: RaceProfileParams = RaceProfileParams(),
                      policy=None) -> RaceResult:
    """The baseline on the race task's courses of ``seeds`` (one row each, torch engine, float64):
    plan, then drive each row to the end of its episode. With ``policy`` (``obs -> action``, a
    learner's) the same courses and the same measurement, driven by it instead."""
    import dyn4_gym

    kw = {k: v for k, v in dyn4_gym.RACE.items() if k != "engine"}
    kw.update(dtype="float64", **(env_kwargs or {}))
    core = TaskCore(EnvConfig.from_dict(kw))
    B = len(seeds)
    state = core.new_state(torch.as_tensor(list(seeds), dtype=torch.long), torch.zeros(B, dtype=torch.long))
    agent = RaceProfile(core, params)
    agent.plan(state)
    obs = core.observe(state)
    dt = core.cfg.control_dt
    done = np.zeros(B, dtype=bool)
    time_ = np.full(B, np.inf)
    finished = np.zeros(B, dtype=bool)
    ret = np.zeros(B)
    speeds = []
    for t in range(core.cfg.episode_steps):
        a = agent.act(obs, state.s, state.x[:, 3]) if policy is None else torch.as_tensor(policy(obs), dtype=obs.dtype)
        state, obs, r, term, trunc, info = core.step(state, a)
        live = ~done
        ret[live] += r.numpy()[live]
        speeds.append(np.where(live, state.x[:, 3].numpy(), np.nan))
        succ = info["success"].numpy() & live
        time_[succ] = (t + 1) * dt
        finished |= succ
        done |= (term.numpy() | trunc.numpy())
        if done.all():
            break
    return RaceResult(time=time_, finished=finished, returns=ret, profiles=agent.profiles, speeds=np.array(speeds))
