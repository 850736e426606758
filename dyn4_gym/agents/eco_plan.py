"""The eco task's dynamic-programming speed plan (issue 44, item 2): the strongest classical eco
driver here.

Per course, a speed profile over the arc length ``v(s)`` that burns the least fuel while arriving
within the time budget, found by dynamic programming over a grid of (station, speed), the way
eco-driving planners do it on a known road (Hellstrom, Ivarsson, Aslund and Nielsen, "Look-ahead
control for heavy trucks to minimize trip time and fuel consumption", Control Engineering
Practice 17(2), 2009; the time is priced by a Lagrange multiplier, found by bisection so the plan
arrives ``margin`` seconds before the budget). Between two stations ``ds`` apart the car's
speed goes linearly in ``v^2`` (a constant force) from ``v0`` to ``v1``:

    F_wheel = m_eff (v1^2 - v0^2) / (2 ds) + 1/2 rho CdA vm^2 + C_rr m g + m g dz / ds,

``vm = (v0 + v1) / 2``, ``dt = ds / vm``, ``m_eff = m + J_rot / r^2`` (the spinning parts), the
last term only where the task has the grade force on (the plant's ``grade_force``), ``z`` the
ground under the centre line averaged over the car's footprint. The fuel of that step is the
powertrain's **steady-state** fuel power at ``(vm, F_wheel)`` times ``dt``:
:func:`steady_fuel_map` finds it from the plant's own powertrain stages
(:func:`dyn4_gym.plant.powertrain.powertrain_forces`), the crank at equilibrium
(``T_engine = T_pump``) in the gear the box settles in at that speed, for throttles 0-1; a force
below the closed throttle's (engine braking) is made up by the brakes at the closed throttle's
fuel (the idle governor's), one above full throttle's is not reachable.

The driver (:func:`plan_policy`) tracks the plan on the env's observation alone: its arc
length from the observed clock (as :func:`dyn4_gym.agents.eco.coast_policy`), the plan's
throttle fed forward, its speed fed back, a late car sped up by its lag behind the plan's
clock, and the steering of the eco task's pure pursuit. What it knows that the learners do not:
the whole course's heights (they see none; the grade shows only in their speed), and a model of
the powertrain's steady fuel map.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch
from numba import njit

from .._checks import check_positive, check_range
from ..envs import EnvConfig, TaskCore
from ..envs.course import goal_arc
from ..model.constants import RPM
from ..model.state import DYN4, PT
from ..model.task import OBS_INDEX, obs_scale
from ..plant.powertrain import PowertrainParams, powertrain_forces
from ..plant.spec import VehicleSpec
from .classical import PurePursuit

__all__ = ["ECO_PLAN_TUNED", "ECO_V2_PLAN_TUNED", "EcoPlanParams", "FuelMap", "SpeedPlan", "dp_speed_plan", "plan_courses", "plan_policy", "engaged_gears",
           "steady_fuel_map", "run_eco_plan"]


_SPEC_FIELDS = {f.name for f in dataclasses.fields(VehicleSpec)}


@dataclass(frozen=True)
class FuelMap:
    """The powertrain in steady state on level ground, per forward gear, over speeds ``speeds
    (V,)`` [m/s] (evenly spaced) and throttles ``throttles (K,)`` (0 to 1, increasing): the drive
    force at the wheels ``force (G, V, K)`` [N] (non-decreasing in the throttle) and the fuel power
    ``fuel (G, V, K)`` [W]; ``engaged (G, V)`` the gears the box may hold at each steady speed
    (:func:`engaged_gears`)."""

    speeds: np.ndarray
    throttles: np.ndarray
    force: np.ndarray
    fuel: np.ndarray
    engaged: np.ndarray

    def lookup(self, v, f_req) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(fuel power [W], throttle, reachable)`` for wheel forces ``f_req`` [N] at speeds
        ``v`` [m/s] (broadcast together; the map's nearest speed). Where the box may hold two
        gears the thirstier one counts (which is engaged depends on the way there), its throttle
        returned. Below the closed throttle's force: the closed throttle's fuel (the brakes make
        up the rest); above full throttle's in an engaged gear: unreachable (fuel inf)."""
        v, f = np.broadcast_arrays(np.asarray(v, dtype=np.float64), np.asarray(f_req, dtype=np.float64))
        dv = self.speeds[1] - self.speeds[0]
        i = np.clip(np.rint((v - self.speeds[0]) / dv).astype(np.int64), 0, len(self.speeds) - 1)
        fuel = np.full(v.shape, -np.inf)
        throttle = np.zeros(v.shape)
        reachable = np.ones(v.shape, dtype=bool)
        for g in range(self.force.shape[0]):
            force, table = self.force[g, i], self.fuel[g, i]  # (..., K)
            k = (force <= f[..., None]).sum(-1).clip(1, len(self.throttles) - 1)
            f0 = np.take_along_axis(force, (k - 1)[..., None], -1)[..., 0]
            f1 = np.take_along_axis(force, k[..., None], -1)[..., 0]
            w = np.clip((f - f0) / np.maximum(f1 - f0, 1e-9), 0.0, 1.0)
            q0 = np.take_along_axis(table, (k - 1)[..., None], -1)[..., 0]
            q1 = np.take_along_axis(table, k[..., None], -1)[..., 0]
            q = q0 + w * (q1 - q0)
            on = self.engaged[g, i]
            worse = on & (q > fuel)
            fuel = np.where(worse, q, fuel)
            throttle = np.where(worse, self.throttles[k - 1] + w * (self.throttles[k] - self.throttles[k - 1]), throttle)
            reachable &= ~on | (f <= force[..., -1])
        return np.where(reachable, fuel, np.inf), np.where(reachable, throttle, 1.0), reachable


def engaged_gears(v, pt: PowertrainParams) -> np.ndarray:
    """``(n_gears, ...)`` bool: the forward gears the box may hold at a steady speed ``v`` [m/s]
    (:func:`~dyn4_gym.plant.powertrain.select_gear`): a gear whose turbine turns between
    ``downshift_rpm`` and ``upshift_rpm`` (first gear at any speed below its upshift, the top gear
    at any above its downshift). Just above a gear's downshift speed and below the one under it
    upshifts, both may be engaged: the shift's hysteresis."""
    v = np.asarray(v, dtype=np.float64)
    rpm = np.stack([v / (r * pt.wheel_radius) * RPM for r in pt.gear_ratios])
    n = pt.n_gears
    above = np.ones_like(rpm, dtype=bool)
    above[1:] = rpm[1:] >= pt.downshift_rpm
    below = np.ones_like(rpm, dtype=bool)
    below[:n - 1] = rpm[:n - 1] <= pt.upshift_rpm
    return above & below


def steady_fuel_map(pt: PowertrainParams, speeds, throttles=np.linspace(0.0, 1.0, 41),
                    iterations: int = 80) -> FuelMap:
    """:class:`FuelMap` of ``pt`` from the plant's powertrain stages: in each forward gear, at each
    speed and throttle, the crank speed where the engine's net torque equals the converter's load
    (bisection on ``[1, 6000 rpm]``: the engine's torque less the pump's falls from positive, the
    converter driving the crank, to negative past the governor)."""
    pt = pt.as_numbers()
    v = torch.as_tensor(np.asarray(speeds, dtype=np.float64))
    th = torch.as_tensor(np.asarray(throttles, dtype=np.float64))
    if v.dim() != 1 or len(v) < 2 or not bool((v > 0).all()) or not np.allclose(np.diff(v.numpy()), float(v[1] - v[0])) \
            or not float(v[1] - v[0]) > 0:
        raise ValueError("steady_fuel_map takes evenly spaced increasing positive speeds, at least two")
    if th.dim() != 1 or len(th) < 2 or float(th[0]) != 0.0 or float(th[-1]) != 1.0 or not bool((torch.diff(th) > 0).all()):
        raise ValueError("steady_fuel_map takes increasing throttles from 0 to 1")
    G = torch.arange(1, pt.n_gears + 1, dtype=torch.float64)
    gear, V, T = torch.meshgrid(G, v, th, indexing="ij")
    zero = torch.zeros_like(V)
    lo, hi = torch.full_like(V, 1.0), torch.full_like(V, 6000.0 / RPM)

    def forces(w):
        st = torch.zeros(V.shape + (3,), dtype=torch.float64)
        st[..., PT.OMEGA_E], st[..., PT.GEAR] = w, gear  # PT.T_SHIFT plays no part here
        return powertrain_forces(st, T, zero, V, pt)

    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        pf = forces(mid)
        up = pf.t_engine - pf.t_pump > 0.0  # the crank still speeds up: equilibrium above
        lo, hi = torch.where(up, mid, lo), torch.where(up, hi, mid)
    pf = forces(0.5 * (lo + hi))
    # below idle the governor, not the pedal, holds the throttle open: there the force does not
    # rise with the pedal (it dips by a newton or so); the map keeps it non-decreasing
    force = np.maximum.accumulate(pf.f_drive.numpy(), axis=-1)
    return FuelMap(speeds=v.numpy(), throttles=th.numpy(), force=force, fuel=pf.fuel_power.numpy(),
                   engaged=engaged_gears(v.numpy(), pt))


@dataclass(frozen=True)
class SpeedPlan:
    """One course's plan at its stations: arc length ``arc (K+1,)`` [m] from the start to the
    goal, speed ``speed (K+1,)`` [m/s], the clock ``time (K+1,)`` [s] from 0, and per step between
    stations the steady throttle ``throttle (K,)`` and its fuel ``fuel (K,)`` [J]; ``in_time``:
    whether it arrives within the target (else it is the fastest the grid allows)."""

    arc: np.ndarray
    speed: np.ndarray
    time: np.ndarray
    throttle: np.ndarray
    fuel: np.ndarray
    in_time: bool


@njit(cache=True)
def _least_fuel_path(fuel, dt, i0, target, tick):
    """Forward dynamic programming over (speed, clock) labels: ``fuel (K, V, V)`` [J] and ``dt
    (V, V)`` [s] of a step from speed index ``i`` to ``j``; the clock is binned by ``tick`` [s] up
    to ``target`` [s], each bin keeping its least-fuel label with its exact time (so the times do
    not drift with the binning). Returns the speed indices ``(K+1,)`` of the least-fuel path that
    arrives by ``target``, or of the fastest path where none does (and whether one did)."""
    K, V = fuel.shape[0], fuel.shape[1]
    nb = int(target / tick) + 1
    F = np.full((V, nb), np.inf)
    T = np.zeros((V, nb))
    F[i0, 0] = 0.0
    back_v = np.full((K, V, nb), -1, dtype=np.int32)
    back_b = np.full((K, V, nb), -1, dtype=np.int32)
    # the fastest path, kept beside in case no label arrives in time
    fast_t = np.full(V, np.inf)
    fast_t[i0] = 0.0
    fast_back = np.full((K, V), -1, dtype=np.int32)
    for k in range(K):
        F1 = np.full((V, nb), np.inf)
        T1 = np.zeros((V, nb))
        ft1 = np.full(V, np.inf)
        for i in range(V):
            if fast_t[i] < np.inf:
                for j in range(V):
                    if fuel[k, i, j] < np.inf and fast_t[i] + dt[i, j] < ft1[j]:
                        ft1[j] = fast_t[i] + dt[i, j]
                        fast_back[k, j] = i
            for b in range(nb):
                f0 = F[i, b]
                if f0 == np.inf:
                    continue
                t0 = T[i, b]
                for j in range(V):
                    c = fuel[k, i, j]
                    if c == np.inf:
                        continue
                    t = t0 + dt[i, j]
                    if t > target:
                        continue
                    b1 = int(t / tick)
                    if f0 + c < F1[j, b1]:
                        F1[j, b1] = f0 + c
                        T1[j, b1] = t
                        back_v[k, j, b1] = i
                        back_b[k, j, b1] = b
        F, T, fast_t = F1, T1, ft1
    path = np.empty(K + 1, dtype=np.int64)
    best, bj, bb = np.inf, -1, -1
    for j in range(V):
        for b in range(nb):
            if F[j, b] < best:
                best, bj, bb = F[j, b], j, b
    if bj < 0:  # nothing arrives in time: the fastest path
        path[K] = np.argmin(fast_t)
        for k in range(K - 1, -1, -1):
            path[k] = fast_back[k, path[k + 1]]
        return path, False
    path[K] = bj
    for k in range(K - 1, -1, -1):
        i, b = back_v[k, bj, bb], back_b[k, bj, bb]
        path[k] = i
        bj, bb = i, b
    return path, True


def dp_speed_plan(height: np.ndarray, ds: float, v0: float, target_time: float, fuel_map: FuelMap,
                  spec: VehicleSpec, grade_force: bool, speeds=np.arange(1.0, 20.0001, 0.2),
                  tick: float = 0.1) -> SpeedPlan:
    """The least-fuel plan over stations ``ds`` [m] apart with ground heights ``height (K+1,)``
    [m] at them, from speed ``v0`` [m/s] at the first (the grid's nearest speed), any speed on the
    grid ``speeds`` [m/s] at the others, arriving within ``target_time`` [s] (or as fast as the
    grid allows where it cannot): :func:`_least_fuel_path`, its clock binned by ``tick`` [s]."""
    z = np.asarray(height, dtype=np.float64)
    K = len(z) - 1
    if K < 1 or not np.isfinite(z).all():
        raise ValueError("dp_speed_plan needs finite heights at two stations or more")
    check_positive("ds", ds)
    check_positive("target_time", target_time)
    check_positive("tick", tick)
    vg = np.asarray(speeds, dtype=np.float64)
    m, g = spec.mass, spec.gravity
    m_eff = m + spec.rotating_inertia / spec.tire_radius**2  # the spinning parts' mass at the wheels
    v_a, v_b = vg[:, None], vg[None, :]  # from (rows), to (columns)
    vm = 0.5 * (v_a + v_b)
    dt = ds / vm
    base = m_eff * (v_b**2 - v_a**2) / (2.0 * ds) + 0.5 * spec.air_density * spec.drag_area * vm**2 \
        + spec.rolling_resistance * m * g
    slope = np.diff(z) / ds if grade_force else np.zeros(K)
    # per step: fuel [J] and throttle of every (from, to) pair; unreachable pairs cost inf
    fuel, throttle = np.empty((K,) + vm.shape), np.empty((K,) + vm.shape)
    for k in range(K):
        q, th, _ = fuel_map.lookup(vm, base + m * g * slope[k])
        fuel[k], throttle[k] = q * dt, th
    i0 = int(np.argmin(np.abs(vg - v0)))
    path, in_time = _least_fuel_path(fuel, dt, i0, float(target_time), float(tick))
    steps = (np.arange(K), path[:-1], path[1:])
    v = vg[path]
    t = np.concatenate(([0.0], np.cumsum(dt[path[:-1], path[1:]])))
    return SpeedPlan(arc=np.arange(K + 1) * ds, speed=v, time=t, throttle=throttle[steps], fuel=fuel[steps],
                     in_time=bool(in_time))


@dataclass(frozen=True)
class EcoPlanParams:
    """The plan's and its tracker's settings (tuned on the validation courses,
    benchmarks/baselines.py eco_plan): ``margin`` [s] the plan arrives this long before the
    budget; ``speed_gain`` [1/(m/s)] throttle per m/s below the plan (and brake per m/s above it,
    past ``brake_deadband`` [m/s]); ``late_gain`` [(m/s)/s] the speed added per second behind the
    plan's clock; ``lead`` [s] the plan is read this far ahead of the car (the engine and the
    converter answer late); ``ds`` [m] between stations."""

    margin: float = 1.0
    speed_gain: float = 0.3
    late_gain: float = 1.0
    lead: float = 0.5
    brake_deadband: float = 1.0
    ds: float = 5.0

    def __post_init__(self):
        check_range("EcoPlanParams.margin", self.margin, 0.0, 20.0)
        for name in ("speed_gain", "late_gain", "lead", "brake_deadband"):
            check_range(f"EcoPlanParams.{name}", getattr(self, name), 0.0, 100.0)
        check_range("EcoPlanParams.ds", self.ds, 0.5, 50.0)


# the settings benchmarks/baselines.py eco_plan chose on the 16 validation courses of Eco-v1
# (docs/eco_plan_baseline.json "chosen"; tests/test_eco_plan_issue44.py holds them equal): the
# grid's least margin, the one the learners train with (benchmarks/learning.py LIMIT_TRAIN_ENV)
ECO_PLAN_TUNED = EcoPlanParams(margin=0.5, speed_gain=0.3, lead=1.0)
# the same grid's choice on Eco-v2 (benchmarks/baselines.py eco_v2_plan; docs/eco_v2_plan_baseline.json)
ECO_V2_PLAN_TUNED = EcoPlanParams(margin=0.5, speed_gain=0.15, lead=0.5)


def _per_row(params, n: int) -> list[EcoPlanParams]:
    """``params`` as one :class:`EcoPlanParams` per row: one for all, or a sequence of ``n``."""
    if isinstance(params, EcoPlanParams):
        return [params] * n
    params = list(params)
    if len(params) != n or not all(isinstance(p, EcoPlanParams) for p in params):
        raise ValueError(f"the eco plan takes one EcoPlanParams or one per course ({n}), got {len(params)}")
    return params


def plan_courses(cfg: EnvConfig, seeds, params=EcoPlanParams()) -> list[SpeedPlan]:
    """One :class:`SpeedPlan` per seed's course of the eco env ``cfg`` (its first episode): the
    ground under the centre line from the task's own draw (the torch task core), the footprint's
    mean height at stations ``ds`` apart from the start to the goal. ``params``: one
    :class:`EcoPlanParams` for all, or one per seed (a seed may come twice, with two settings:
    a (seed, margin, ds) is planned once)."""
    from .race import _footprint_mean

    if cfg.action != "driver":
        raise ValueError("the eco plan drives the pedals: it needs an env with action='driver'")
    if cfg.time_budget is None:
        raise ValueError("the eco plan needs the task's time budget (time_budget)")
    seeds = [int(s) for s in seeds]
    params = _per_row(params, len(seeds))
    core = TaskCore(cfg.replace({"dtype": "float64", "engine": "torch"}))
    # the spec as the env's vehicle overrides leave it (grade_force is the plant's, not the sheet's)
    spec = dataclasses.replace(core.spec, **{k: v for k, v in cfg.vehicle.items() if k in _SPEC_FIELDS})
    state = core.new_state(torch.as_tensor(seeds, dtype=torch.long), torch.zeros(len(seeds), dtype=torch.long))
    spacing = cfg.course.spacing
    _, height = state.terrain(state.course_xy)
    k = int(math.ceil(3.0 / spacing))  # the footprint, as the racing line's (race.FOOTPRINT)
    height = _footprint_mean(height.detach().to(torch.float64).numpy(), k)
    s0 = state.s.to(torch.float64).numpy()
    v0 = state.x[:, DYN4.VX].to(torch.float64).numpy()
    goal = goal_arc(cfg.course)
    fmap = steady_fuel_map(core.pt, np.arange(0.5, 20.5001, 0.05))
    planned: dict[tuple, SpeedPlan] = {}
    plans = []
    for b, (seed, p) in enumerate(zip(seeds, params)):
        key = (seed, p.margin, p.ds)
        if key not in planned:
            n = max(int(math.ceil((goal - s0[b]) / p.ds)), 1)
            arc = s0[b] + np.arange(n + 1) * (goal - s0[b]) / n
            z = np.interp(arc, np.arange(height.shape[1]) * spacing, height[b])
            plan = dp_speed_plan(z, (goal - s0[b]) / n, float(v0[b]), cfg.time_budget - p.margin, fmap, spec,
                                 bool(core.p.grade_force))
            planned[key] = dataclasses.replace(plan, arc=arc)
        plans.append(planned[key])
    return plans


def plan_policy(cfg: EnvConfig, plans: list[SpeedPlan], params=EcoPlanParams()):
    """``policy(obs) -> action`` that drives row ``b`` along ``plans[b]`` (one row per planned
    course, in order: :func:`dyn4_gym.agents.evaluation.evaluate`'s rows). It reads its arc length
    from the observed clock (the env needs ``observe_clock=True``), looks the plan up ``lead``
    seconds ahead, and asks for the plan's speed raised by ``late_gain`` times its lag behind the
    plan's clock: throttle = the plan's steady throttle + ``speed_gain`` x the speed error, brake
    only past ``brake_deadband`` above it; the steering is the eco task's pure pursuit's.
    ``params``: one :class:`EcoPlanParams` for every row, or one per row."""
    if not cfg.observe_clock:
        raise ValueError("plan_policy reads the distance driven from the observed clock: it needs an env with "
                         "observe_clock=True (Dyn4HumveeEco-v1, -v2)")
    steer = PurePursuit.for_env({"action": "driver", "course": {"preview": list(cfg.course.preview)}})
    budget, goal = cfg.time_budget, goal_arc(cfg.course)
    i_left, i_lead, i_vx = OBS_INDEX["time_left"], OBS_INDEX["lead"], OBS_INDEX["vx"]
    s_left, s_lead, s_vx = obs_scale("time_left"), obs_scale("lead"), obs_scale("vx")
    n = max(len(p.arc) for p in plans)
    rows = _per_row(params, len(plans))
    gain, late_gain, lead, deadband = (torch.tensor([getattr(p, f) for p in rows], dtype=torch.float64)
                                       for f in ("speed_gain", "late_gain", "lead", "brake_deadband"))

    def pad(a):  # ragged per-course arrays as (B, n), the last value held
        return torch.as_tensor(np.stack([np.concatenate((x, np.full(n - len(x), x[-1]))) for x in a]))

    arc = pad([p.arc for p in plans])
    speed, clock = pad([p.speed for p in plans]), pad([p.time for p in plans])
    throttle = pad([np.append(p.throttle, 0.0) for p in plans])  # a step's throttle at its first station

    def at(table, q):  # each row's table at its arc length q (B,), held at the ends
        i = torch.searchsorted(arc, q.unsqueeze(1)).squeeze(1).clamp(1, n - 1)
        a0, a1 = arc.gather(1, (i - 1)[:, None])[:, 0], arc.gather(1, i[:, None])[:, 0]
        w = ((q - a0) / (a1 - a0).clamp_min(1e-9)).clamp(0.0, 1.0)
        return table.gather(1, (i - 1)[:, None])[:, 0] * (1 - w) + table.gather(1, i[:, None])[:, 0] * w

    def step_value(table, q):  # the step's value (piecewise constant) a row is in at q
        i = (torch.searchsorted(arc, q.unsqueeze(1)).squeeze(1) - 1).clamp(0, n - 1)
        return table.gather(1, i[:, None])[:, 0]

    ds = arc[:, 1:] - arc[:, :-1]

    def clock_of(v):  # the clock of speeds v (B, n) at the stations, as dp_speed_plan's: ds over the mean speed
        return torch.cat((torch.zeros_like(v[:, :1]), (ds / (0.5 * (v[:, 1:] + v[:, :-1])).clamp_min(1e-3)).cumsum(1)), 1)

    def policy(obs, speed_table=None):
        """The pedals and steer for ``obs (B, n_obs)``; ``speed_table (B, n)`` [m/s] in place of
        the plans' speeds at their stations (``policy.tables["speed"]``), the plan's clock
        recomputed from it (the eco oracle's decision variable; differentiable)."""
        if obs.shape[0] != len(plans):
            raise ValueError(f"plan_policy planned {len(plans)} courses, got {obs.shape[0]} rows")
        spd, clk = (speed, clock) if speed_table is None else (speed_table, clock_of(speed_table))
        o = obs.to(torch.float64)
        t = budget - o[:, i_left] * s_left
        s = goal * (o[:, i_lead] * s_lead + t) / budget
        vx = o[:, i_vx] * s_vx
        late = (t - at(clk, s)).clamp_min(0.0)
        ahead = s + lead * vx.clamp_min(0.0)
        v_ref = at(spd, ahead) + late_gain * late
        err = v_ref - vx
        th = (step_value(throttle, ahead) + gain * err).clamp(0.0, 1.0)
        brake = (gain * (-err - deadband)).clamp(0.0, 1.0)
        return torch.stack((steer(obs)[:, 0].to(torch.float64), th, brake), -1).to(obs.dtype)

    policy.tables = dict(arc=arc, speed=speed, clock=clock)  # (B, n) each, the last value held past a course's end
    return policy


def run_eco_plan(seeds, params=EcoPlanParams(), task: dict | None = None, env_kwargs: dict | None = None):
    """The plan and its tracker on the eco courses of ``seeds`` (``task``: the eco task's keyword
    arguments, ``dyn4_gym.ECO_CLOCK`` unless given; ``env_kwargs`` over them), measured by
    :func:`~dyn4_gym.agents.evaluation.evaluate` as every learner is: ``(EcoResult, plans)``.
    ``params``: one :class:`EcoPlanParams`, or one per seed (a grid's settings in one batch, a
    seed once per setting)."""
    import dyn4_gym

    from .eco import EcoResult
    from .evaluation import evaluate

    kw = {**(dyn4_gym.ECO_CLOCK if task is None else task), "dtype": "float64", **(env_kwargs or {})}
    cfg = EnvConfig.from_dict(kw)
    plans = plan_courses(cfg, seeds, params)
    ev = evaluate(plan_policy(cfg, plans, params), kw, seeds=seeds)
    return EcoResult(arrival=ev.arrival, litres_per_100km=ev.litres, returns=ev.returns,
                     time_budget=cfg.time_budget), plans
