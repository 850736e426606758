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
from ..model.state import DYN4
from ..plant import HUMVEE
from .classical import PurePursuit, PurePursuitParams

__all__ = ["Envelope", "HUMVEE_ENVELOPE", "speed_profile", "RaceProfileParams", "RaceProfile", "RacingLineParams",
           "RacingLine", "RaceResult", "run_race_baseline", "straight_line_time", "truncation_time", "RACE_TUNED", "RACE_LINE_TUNED",
           "RACE_V1_LINE_TUNED", "RACE_V1_SHAC", "RACE_V1_SHAC_BUDGET", "race_core", "race_start"]


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
# from 20 m/s at mu 0.8 (docs/physics.md's envelope table), HUMVEE's 3 m/s^2 drive and 112 kW
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
                  margin: float = 0.9, v_max: float = 40.0, zpp: np.ndarray | None = None) -> np.ndarray:
    """The minimum-time speed profile [m/s] over points ``spacing`` metres apart with curvature
    ``kappa`` and friction ``mu``, starting at ``v0``, inside ``margin`` times the envelope.
    ``spacing`` is a scalar or the ``(N - 1,)`` lengths [m] between neighbouring points (a racing
    line's are uneven).

    ``zpp`` [1/m], the ground's vertical curvature along the path (``d^2 z / ds^2``, negative
    over a crest), scales every tire limit by the load factor ``n = 1 + v^2 zpp / g``: over a
    crest at speed the wheels carry less than the car's weight and grip less (a 0.15 m hill of
    30 m wavelength at 30 m/s leaves 40 % of it), and where ``n`` would reach 0 the car would
    leave the ground. None: level (``n = 1``)."""
    ds = np.broadcast_to(np.asarray(spacing, dtype=np.float64), (len(kappa) - 1,))
    n_pts = len(kappa)
    zpp = np.zeros(n_pts) if zpp is None else np.asarray(zpp, dtype=np.float64)
    a_lat = margin * env.lateral(mu)
    a_brk = margin * env.braking(mu)
    # v^2 |kappa| <= a_lat (1 + v^2 zpp / g)  <=>  v^2 (|kappa| - a_lat zpp / g) <= a_lat
    denom = np.abs(kappa) - a_lat * zpp / env.g
    v_lim = np.minimum(np.sqrt(a_lat / np.maximum(denom, 1e-9)), v_max)

    def load(i, v):  # the load factor at point i and speed v, >= 0
        return max(1.0 + v * v * zpp[i] / env.g, 0.0)

    v = v_lim.copy()
    v[0] = min(v0, v_lim[0])
    for i in range(n_pts - 1):  # forward: what the drive can reach
        n = load(i, v[i])
        use = min((v[i] ** 2 * abs(kappa[i]) / max(a_lat[i] * n, 1e-12)) ** 2, 1.0)
        ax = margin * min(float(env.drive(v[i], mu[i])), float(env.braking(mu[i])) * n) * math.sqrt(1.0 - use)
        v[i + 1] = min(v[i + 1], math.sqrt(v[i] ** 2 + 2.0 * ax * ds[i]))
    for i in range(n_pts - 2, -1, -1):  # backward: what the brakes can shed before each corner
        n = load(i + 1, v[i + 1])
        use = min((v[i + 1] ** 2 * abs(kappa[i + 1]) / max(a_lat[i + 1] * n, 1e-12)) ** 2, 1.0)
        ax = a_brk[i + 1] * n * math.sqrt(1.0 - use)
        v[i] = min(v[i], math.sqrt(v[i + 1] ** 2 + 2.0 * ax * ds[i]))
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
        v0 = state.x[:, DYN4.VX].detach().cpu().numpy()
        self.profiles = np.stack([speed_profile(_curvature(xy[b], self.spacing), mu[b], self.spacing, float(v0[b]),
                                                self.envelope, self.params.margin) for b in range(xy.shape[0])])
        return self.profiles

    def act(self, obs: torch.Tensor, state) -> torch.Tensor:
        """Actions ``(B, 2)`` from the observation and the state (each row's arc length ``s`` [m]
        along the centre line and its speed ``vx``)."""
        steer = self.pursuit(obs)[:, 0]
        s, vx = state.s, state.x[:, DYN4.VX]
        prof = torch.as_tensor(self.profiles, dtype=obs.dtype, device=obs.device)
        ahead = s + self.params.lead * vx.clamp_min(0.0)
        i = (ahead / self.spacing).round().long().clamp(0, prof.shape[1] - 1)
        v_ref = prof.gather(1, i.unsqueeze(1)).squeeze(1)
        return torch.stack((steer, _longitudinal(self.params.speed_gain * (v_ref - vx))), -1).clamp(-1.0, 1.0)


def _longitudinal(a_cmd: torch.Tensor, spec=HUMVEE) -> torch.Tensor:
    """The accel action's longitudinal entry for a commanded acceleration ``a_cmd`` [m/s^2]:
    over the drive's limit when it drives, the brakes' when it brakes."""
    return torch.where(a_cmd >= 0, a_cmd / spec.max_drive_accel, a_cmd / spec.max_brake_accel)


@dataclass(frozen=True)
class RacingLineParams:
    """The racing-line driver's settings (tuned on the validation courses)."""

    margin: float = 0.9  # share of the envelope the profile uses
    safety: float = 1.0  # [m] the line keeps this far inside the corridor's edge (the car's CG ends it)
    lead: float = 0.3  # [s] read the profile this far ahead of the car (the brakes' lag)
    speed_gain: float = 2.0  # [1/s] speed loop
    lookahead_gain: float = 0.6  # [s] pure pursuit's lookahead, L_d = gain vx, clamped to [min, max]
    lookahead_min: float = 6.0  # [m]
    lookahead_max: float = 30.0  # [m]


# [m] the profile plans each point with the least friction within this arc of it: the wheels
# reach a patch half a wheelbase (1.7 m) before the CG, and the car runs a metre or so off its
# line (a fixed design number, not tuned)
FOOTPRINT = 3.0


def _footprint(a: np.ndarray, k: int, reduce) -> np.ndarray:
    """Each row of ``a (B, N)`` reduced (``np.min``, ``np.mean``) over ``k`` points either side
    (held at the ends)."""
    if k <= 0:
        return a
    padded = np.pad(a, ((0, 0), (k, k)), mode="edge")
    return reduce(np.lib.stride_tricks.sliding_window_view(padded, 2 * k + 1, axis=1), axis=-1)


def _footprint_min(mu: np.ndarray, k: int) -> np.ndarray:
    """Each row's friction ``(B, N)`` replaced by its least within ``k`` points either side."""
    return _footprint(mu, k, np.min)


def _footprint_mean(h: np.ndarray, k: int) -> np.ndarray:
    """Each row's height ``(B, N)`` averaged over ``k`` points either side: the body rides the
    hills and the suspension swallows what is shorter than the car (a 1 m bump)."""
    return _footprint(h, k, np.mean)


def _second_derivative(z: np.ndarray, ds: np.ndarray) -> np.ndarray:
    """``d^2 z / ds^2`` [1/m] at each point of a path with segment lengths ``ds`` (0 at the ends)."""
    slope = np.diff(z) / ds
    inner = np.diff(slope) / (0.5 * (ds[1:] + ds[:-1]))
    return np.concatenate(([0.0], inner, [0.0]))


class RacingLine:
    """The strongest classical race driver here (issue 44): the minimum-curvature line inside the
    corridor (:mod:`dyn4_gym.agents.racing_line`), the forward-backward speed profile over that
    line's curvature, the least friction under the car's footprint (``FOOTPRINT``) and the
    ground's vertical curvature (the hills' crests unload the tires; :func:`speed_profile`), pure
    pursuit on the line with a speed-scaled lookahead (Coulter 1992), and the profile's
    acceleration fed forward with a speed loop on the profile, both read ``lead`` seconds ahead.
    ``plan(state)`` at reset, then ``act(obs, state)``.

    It knows what the learners do not: the whole course, the friction and the height under it
    (the learners see five preview points of the centre line, up to 60 m ahead on Race-v0 and
    120 m on Race-v1, and the friction at them), and its own pose in the world (theirs is
    relative to the centre line). Planning (a QP and a profile per course) runs in numpy at
    reset; ``act`` is batched torch."""

    def __init__(self, core: TaskCore, params: RacingLineParams | tuple = RacingLineParams(),
                 envelope: Envelope = HUMVEE_ENVELOPE, spec=HUMVEE):
        if core.driver:
            raise ValueError("RacingLine drives the acceleration action (action='accel')")
        rows = (params,) if isinstance(params, RacingLineParams) else tuple(params)
        if not rows or not all(isinstance(p, RacingLineParams) for p in rows):
            raise ValueError("RacingLine takes a RacingLineParams or a sequence of them, one per row")
        for p in rows:
            if not core.widths.min() - p.safety >= 0.0:
                raise ValueError(f"RacingLineParams.safety {p.safety} m leaves no room in a corridor "
                                 f"{core.widths.min():g} m wide at its narrowest side")
        self.core, self.params, self.envelope, self.spec = core, params, envelope, spec
        self._rows = rows
        self.spacing = core.cfg.course.spacing
        self.line = self.arc = self.profiles = None

    def _row(self, b: int) -> RacingLineParams:
        return self._rows[b if len(self._rows) > 1 else 0]

    def plan(self, state) -> np.ndarray:
        """Each row's racing line ``(B, N, 2)`` [m, world], its arc length and its speed profile
        ``(B, N)`` [m/s], from its centre line and the friction under the line. With one
        :class:`RacingLineParams` per row (a tuning grid in one batch) each row plans with its
        own; rows on the same course with the same ``safety`` share one line."""
        from .racing_line import line_geometry, min_curvature_offsets, normals

        xy = state.course_xy.detach().to(torch.float64).cpu().numpy()
        heading = state.course_heading.detach().to(torch.float64).cpu().numpy()
        B = xy.shape[0]
        if len(self._rows) not in (1, B):
            raise ValueError(f"RacingLine has {len(self._rows)} settings for {B} rows")
        lines, offsets = [], {}
        for b in range(B):
            bound = self.core.widths - self._row(b).safety  # (N, 2): right, left of each point
            key = (xy[b].tobytes(), heading[b].tobytes(), self._row(b).safety)
            if key not in offsets:
                offsets[key] = min_curvature_offsets(xy[b], heading[b], bound)
            lines.append(xy[b] + offsets[key][:, None] * normals(heading[b]))
        line = np.stack(lines)
        like = state.course_xy
        mu, height = state.terrain(torch.as_tensor(line, dtype=like.dtype, device=like.device))
        k = int(math.ceil(FOOTPRINT / self.spacing))
        mu = _footprint_min(mu.detach().to(torch.float64).cpu().numpy(), k)
        height = _footprint_mean(height.detach().to(torch.float64).cpu().numpy(), k)
        v0 = state.x[:, DYN4.VX].detach().to(torch.float64).cpu().numpy()
        arcs, profiles, accels = [], [], []
        for b in range(line.shape[0]):
            arc, ds, kappa = line_geometry(line[b])
            v = speed_profile(kappa, mu[b], ds, float(v0[b]), self.envelope, self._row(b).margin,
                              zpp=_second_derivative(height[b], ds))
            arcs.append(arc)
            profiles.append(v)
            accels.append(np.append(np.diff(v**2) / (2.0 * ds), 0.0))  # the profile's own acceleration
        self.line, self.arc, self.profiles = line, np.stack(arcs), np.stack(profiles)
        per_row = {f: np.array([getattr(self._row(b), f) for b in range(B)])
                   for f in ("lead", "speed_gain", "lookahead_gain", "lookahead_min", "lookahead_max")}
        self._t = {k: torch.as_tensor(v, dtype=like.dtype, device=like.device)
                   for k, v in (("line", line), ("arc", self.arc), ("profile", self.profiles),
                                ("accel", np.stack(accels)), *per_row.items())}
        return self.profiles

    def _at(self, arc_query: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """``values (B, N, ...)`` interpolated at each row's arc length ``arc_query (B,)`` along its
        line (held at the ends)."""
        arc = self._t["arc"]
        q = arc_query.clamp(arc[:, :1].squeeze(1), arc[:, -1])
        k = torch.searchsorted(arc, q.unsqueeze(1)).squeeze(1).clamp(1, arc.shape[1] - 1)
        a0, a1 = arc.gather(1, (k - 1)[:, None]).squeeze(1), arc.gather(1, k[:, None]).squeeze(1)
        w = ((q - a0) / (a1 - a0).clamp_min(1e-9)).clamp(0.0, 1.0)
        shape = (-1, 1) + values.shape[2:]
        idx = k.view(-1, 1, *([1] * (values.dim() - 2))).expand(shape)
        v0 = values.gather(1, idx - 1).squeeze(1)
        v1 = values.gather(1, idx).squeeze(1)
        w = w.view(-1, *([1] * (values.dim() - 2)))
        return v0 + w * (v1 - v0)

    def act(self, obs: torch.Tensor, state) -> torch.Tensor:
        """Actions ``(B, 2)`` from the state: the car's pose and speed, and its arc length along
        the centre line, carried over to the racing line point by point (line point ``i`` lies on
        centre point ``i``'s normal)."""
        prm, x = self._t, state.x
        arc, n = self._t["arc"], self._t["arc"].shape[1]
        j = (state.s / self.spacing).clamp(0.0, n - 1.0)
        i0 = j.floor().long().clamp(0, n - 2)
        frac = (j - i0.to(j.dtype)).unsqueeze(1)
        car_arc = (arc.gather(1, i0[:, None]) * (1 - frac) + arc.gather(1, i0[:, None] + 1) * frac).squeeze(1)
        vx = x[:, DYN4.VX]
        la = torch.minimum(torch.maximum(prm["lookahead_gain"] * vx, prm["lookahead_min"]), prm["lookahead_max"])
        target = self._at(car_arc + la, self._t["line"])
        d = target - x[:, DYN4.X:DYN4.Y + 1]
        c, s = torch.cos(x[:, DYN4.PSI]), torch.sin(x[:, DYN4.PSI])
        xb, yb = c * d[:, 0] + s * d[:, 1], -s * d[:, 0] + c * d[:, 1]
        kappa = 2 * yb / (xb * xb + yb * yb).clamp_min(1.0)
        steer = torch.atan(self.spec.wheelbase * kappa) / self.spec.max_steer
        ahead = car_arc + prm["lead"] * vx.clamp_min(0.0)
        # the profile's acceleration fed forward, the speed error fed back: near the profile the
        # car asks only what the friction ellipse leaves (a loop alone floors it through corners)
        a_cmd = self._at(ahead, prm["accel"]) + prm["speed_gain"] * (self._at(ahead, prm["profile"]) - vx)
        lon = _longitudinal(a_cmd, self.spec)
        return torch.stack((steer, lon), -1).clamp(-1.0, 1.0)


# the setting benchmarks/baselines.py chose on the validation courses (docs/race_baseline.json,
# "chosen"; tests/test_race.py holds them equal): the baseline every learner is measured against
RACE_TUNED = RaceProfileParams(margin=0.7, lead=0.4)


# the setting benchmarks/baselines.py race_line chose on the validation courses (docs/
# race_line_baseline.json, "chosen"; tests/test_racing_line.py holds them equal): the strongest
# classical race driver, the bar issue 44 sets every learner against
RACE_LINE_TUNED = RacingLineParams(margin=0.9, safety=1.25, lookahead_gain=0.4)
# and on Dyn4HumveeRace-v1 (benchmarks/baselines.py race_v1_line, docs/race_v1_line_baseline.json;
# tests/test_versions_issue44.py holds them equal)
RACE_V1_LINE_TUNED = RacingLineParams(margin=0.9, safety=0.75, lookahead_gain=0.4)
# SHAC's settings on Dyn4HumveeRace-v1 besides the paper's schedule (shac_published), and its
# budget [env steps]: the learning benchmark's (benchmarks/learning.py LIMIT_SHAC, LIMIT_BUDGET_OF;
# chosen by benchmarks/shac_ablation.py on the validation courses, docs/tasks.md) and the main job's
RACE_V1_SHAC = {"init_log_std": -2.0, "edge_barrier": 10.0}
RACE_V1_SHAC_BUDGET = 1_000_000


@dataclass
class RaceResult:
    time: np.ndarray  # [s] time to finish per seed (inf: did not finish)
    finished: np.ndarray  # bool per seed
    returns: np.ndarray  # the env's return per seed
    profiles: np.ndarray  # (B, N) the planned speed profiles [m/s]
    speeds: np.ndarray  # (T, B) vx while each row ran (NaN after)
    lines: np.ndarray | None = None  # (B, N, 2) [m] the racing lines driven (RacingLine), else None


def race_core(task: dict | None = None, env_kwargs: dict | None = None) -> TaskCore:
    """The race ``task``'s (``dyn4_gym.RACE`` unless given) torch task core in float64, with
    ``env_kwargs`` over it: the harness every race driver and the oracle are measured on."""
    import dyn4_gym

    kw = {k: v for k, v in (dyn4_gym.RACE if task is None else task).items() if k != "engine"}
    kw.update(dtype="float64", **(env_kwargs or {}))
    return TaskCore(EnvConfig.from_dict(kw))


def race_start(core: TaskCore, seeds):
    """The first episode of each seed's course, one row a seed."""
    return core.new_state(torch.as_tensor(list(seeds), dtype=torch.long), torch.zeros(len(seeds), dtype=torch.long))


@torch.no_grad()
def run_race_baseline(seeds, env_kwargs: dict | None = None,
                      params: RaceProfileParams | RacingLineParams = RaceProfileParams(), policy=None,
                      task: dict | None = None) -> RaceResult:
    """The baseline on the race task's courses of ``seeds`` (one row each, torch engine, float64):
    plan, then drive each row to the end of its episode; ``params`` picks the driver (its
    :class:`RacingLineParams`, or one per row: the racing line's, :class:`RacingLine`). With ``policy`` (``obs ->
    action``, a learner's) the same courses and the same measurement, driven by it instead.
    ``task``: the race's keyword arguments (``dyn4_gym.RACE``, -v0's, unless given:
    ``dyn4_gym.RACE_V1``), ``env_kwargs`` over them."""
    core = race_core(task, env_kwargs)
    B = len(seeds)
    state = race_start(core, seeds)
    first = params[0] if isinstance(params, (tuple, list)) and params else params
    agent = (RacingLine if isinstance(first, RacingLineParams) else RaceProfile)(core, params)
    agent.plan(state)
    obs = core.observe(state)
    dt = core.cfg.control_dt
    done = np.zeros(B, dtype=bool)
    time_ = np.full(B, np.inf)
    finished = np.zeros(B, dtype=bool)
    ret = np.zeros(B)
    speeds = []
    for t in range(core.cfg.episode_steps):
        a = agent.act(obs, state) if policy is None else torch.as_tensor(policy(obs), dtype=obs.dtype)
        state, obs, r, term, trunc, info = core.step(state, a)
        live = ~done
        ret[live] += r.numpy()[live]
        speeds.append(np.where(live, state.x[:, DYN4.VX].numpy(), np.nan))
        succ = info["success"].numpy() & live
        time_[succ] = (t + 1) * dt
        finished |= succ
        done |= (term.numpy() | trunc.numpy())
        if done.all():
            break
    return RaceResult(time=time_, finished=finished, returns=ret, profiles=agent.profiles, speeds=np.array(speeds),
                      lines=getattr(agent, "line", None))


def straight_line_time(env_kwargs: dict | None = None, task: dict | None = None) -> float:
    """[s] The floored straight-line reference (issue 44): the race's car, start speed and course
    length, driven straight with the drive command at +1 the whole way, on level ground at the
    task's base friction (no patches, bumps or hills), for at least the task's own episode whatever
    the limit in ``env_kwargs`` (inf if it does not arrive). It is what the drive alone allows over the
    course's length: how far a method lies above it is roughly what cornering and braking cost it
    (a line that cuts the corners is a little shorter than the centre line, so it is no hard
    bound)."""
    import dyn4_gym

    race = dyn4_gym.RACE if task is None else task
    kw = {k: v for k, v in race.items() if k != "engine"}
    kw.update(env_kwargs or {})
    length = EnvConfig.from_dict(dict(kw, dtype="float64")).course.length
    course = dict(kw.get("course", {}), centre_line=((0.0, 0.0), (length, 0.0)))
    ground = dict(kw.get("ground", {}), n_patches=0, n_bumps=0, hills_amplitude=0.0)
    # at least the task's own episode: the reference is the car's, not the episode's limit
    steps = max(int(kw.get("episode_steps", 1200)), int(race["episode_steps"]))
    r = run_race_baseline([0], env_kwargs=dict(kw, course=course, ground=ground, episode_steps=steps),
                          policy=lambda obs: torch.tensor([[0.0, 1.0]] * obs.shape[0]), task=race)
    return float(r.time[0])


def truncation_time(env_kwargs: dict | None = None, task: dict | None = None) -> float:
    """[s] When a race's episode is cut (``episode_steps x control_dt`` of ``task``, ``dyn4_gym.RACE``
    unless given, with ``env_kwargs`` over it): the time an unfinished course counts at in the
    penalised mean."""
    import dyn4_gym

    kw = {k: v for k, v in (dyn4_gym.RACE if task is None else task).items() if k != "engine"}
    cfg = EnvConfig.from_dict(dict(kw, **(env_kwargs or {})))
    return cfg.episode_steps * cfg.control_dt
