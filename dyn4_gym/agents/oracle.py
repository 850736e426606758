"""The race's oracle through the differentiable plant (issue 44): per course, what the whole
episode's actions can reach when they are optimised by gradient through the torch plant.

What a policy could reach with this plant on a course it knew in full. Raw open-loop actions
optimised over a whole episode are ill-conditioned (a change of steer early on moves every later
state; measured here, Adam's first step on them made every run worse), so the decision variables
ride on a stabilising driver, as in closed-loop shooting: the racing-line driver
(:class:`~dyn4_gym.agents.race.RacingLine`, the strongest classical driver, and bolder settings of
it as restarts) plus a free residual per step ``r (T, B, 2)`` on its actions, and a scale per point
``rho (B, N)`` on its speed profile (``v_ref = v (1 + rho)``, its feed-forward recomputed). Both
are improved by Adam, kept in boxes by clamping after each step, on

    loss_b = -mean_t min(s_t, goal) / goal + w_edge sum_t relu(|e_t| - (h - edge))^2
             + w_roll sum_t relu(|phi_t| - roll_frac phi_max)^2,

the area under the progress curve (a row ahead at every step arrives first) with smooth barriers
for the two things that end an episode early: the corridor (cross-track ``e`` [m] past
``h - edge``, ``h`` the half width) and the roll limit, counted until the row's episode ends.
Friction needs no barrier: the tires' saturation is the plant's own (Pacejka in the friction
ellipse), so sliding costs time by itself.

Every iteration's rollout *is* the env's episode (the same ``TaskCore.step``, float64), so each
row's finish time is read off it as the harness measures any driver (``info["success"]``, the
step count times ``control_dt``; a run that left the corridor or rolled first does not finish),
and the best finishing run per course is kept with the actions it took, which replay open loop
(the plant is deterministic). Iteration 0 drives the starts as they are, so the oracle is never
slower than the driver it starts from. Backpropagation runs through the whole episode. Batched:
courses x starts are the rows of one rollout, and rows are independent.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import time as _time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..envs import EnvConfig, TaskCore
from ..model.state import DYN4
from .barriers import termination_barrier
from .eco_plan import ECO_V2_PLAN_TUNED, EcoPlanParams
from .race import RACE_LINE_TUNED, RacingLine, RacingLineParams, race_core, race_start, run_race_baseline

__all__ = ["OracleParams", "OracleResult", "race_oracle", "bolder_starts", "stored_times", "EcoOracleParams",
           "EcoOracleResult", "eco_oracle"]

# the oracle's held-out times as benchmarks/oracle.py measured them, shipped for the main job
ORACLE_TIMES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "oracle",
                            "race_times.json")


def stored_times(env_id: str, seeds) -> np.ndarray | None:
    """[s] The oracle's time on each course of ``seeds`` of the race ``env_id`` as registered (no
    kwargs over it), inf where it did not finish, from the run that made the docs' figures
    (``dyn4_gym/data/oracle/race_times.json``; hours on this machine, so read, not rerun); None
    where that run has no such task or lacks one of the seeds."""
    with open(ORACLE_TIMES) as f:
        data = json.load(f)
    if env_id not in data:
        return None
    at = dict(zip(data[env_id]["eval_seeds"], data[env_id]["times"]))
    if not all(int(s) in at for s in seeds):
        return None
    return np.array([np.inf if at[int(s)] is None else float(at[int(s)]) for s in seeds])


def bolder_starts(tuned: RacingLineParams) -> tuple:
    """The oracle's restarts from a race's tuned racing line: the tuned setting first (the
    classical bar, and the start whose time is reported beside the oracle's), then at 0.95 of the
    envelope, then at its full envelope 0.75 m from the edge."""
    return (tuned, dataclasses.replace(tuned, margin=0.95), RacingLineParams(margin=1.0, safety=0.75,
                                                                           lookahead_gain=0.4))


@dataclass(frozen=True)
class OracleParams:
    """The trajectory optimisation's settings (chosen before any held-out course ran; none is
    tuned on them)."""

    iters: int = 30  # Adam iterations (each a whole-episode rollout and its backward)
    lr: float = 0.01  # Adam's step: action units for the residual, a share of the speed for the scale
    edge: float = 0.75  # [m] the corridor barrier starts this far inside the edge
    w_edge: float = 1.0  # [1/m^2] the corridor barrier's weight, per step
    roll_frac: float = 0.8  # the roll barrier starts at this share of the roll limit
    w_roll: float = 10.0  # [1/rad^2] the roll barrier's weight, per step
    slack: float = 1.05  # the horizon: the starting driver's slowest finish times this (steps)
    segment: int = 50  # steps per checkpointed segment of the backward (memory, not results)
    # restarts: the racing line's tuned setting first (the classical bar), then bolder ones
    starts: tuple = field(default_factory=lambda: bolder_starts(RACE_LINE_TUNED))

    def __post_init__(self):
        if not (isinstance(self.iters, int) and self.iters >= 0):
            raise ValueError(f"OracleParams.iters must be an int >= 0, got {self.iters!r}")
        for name in ("lr", "w_edge", "w_roll", "edge"):
            if not (np.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise ValueError(f"OracleParams.{name} must be finite and >= 0, got {getattr(self, name)!r}")
        if not (isinstance(self.segment, int) and self.segment >= 1):
            raise ValueError(f"OracleParams.segment must be an int >= 1, got {self.segment!r}")
        if not (0 < self.roll_frac <= 1 and self.slack >= 1):
            raise ValueError("OracleParams.roll_frac must be in (0, 1] and slack >= 1")
        if not self.starts or not all(isinstance(p, RacingLineParams) for p in self.starts):
            raise ValueError("OracleParams.starts must be a non-empty tuple of RacingLineParams")


@dataclass
class OracleResult:
    time: np.ndarray  # (C,) [s] the best finish per course (inf: no run finished)
    start_time: np.ndarray  # (C,) [s] the first start's (the tuned racing line's) own finish
    actions: np.ndarray  # (T, C, 2) the actions of the best finishing run per course (a start's if none)
    history: list  # per iteration: dict(iter, best (C,), loss, seconds); iteration 0 the starts


def _profile_accel(profile: torch.Tensor, arc: torch.Tensor) -> torch.Tensor:
    """The acceleration [m/s^2] a speed profile ``(B, N)`` [m/s] over arc lengths ``arc (B, N)``
    asks, ``d(v^2)/2 ds`` per segment (0 at the end): RacingLine's feed-forward, in torch."""
    ds = (arc[:, 1:] - arc[:, :-1]).clamp_min(1e-9)
    return torch.cat([(profile[:, 1:] ** 2 - profile[:, :-1] ** 2) / (2.0 * ds), torch.zeros_like(profile[:, :1])], 1)


def _segments(segment, T: int, size: int, carry: tuple, extra: tuple):
    """Run an episode's steps ``0 .. T - 1`` in chunks of ``size``: ``segment(t0, t1, *carry,
    *extra) -> (*carry, *sums, taken)`` steps ``t0 .. t1 - 1`` from the tensors ``carry`` (what a
    step changes: the task state's moving fields, flags), adding ``sums`` over its steps and
    returning the actions it took ``(t1 - t0, B, A)``; ``extra`` are the decision variables and
    what it reads alone. With gradients each chunk runs under activation checkpointing
    (``torch.utils.checkpoint``, its reentrant form: a segment's forward builds no graph, its
    backward recomputes it), so only the states between chunks are kept. The graph of a step
    is mostly autograd's own nodes (thousands of small ops a substep), which the non-reentrant
    form keeps; measured: a 1 km course's 1,300 steps at 48 rows held 19 GB without it.
    Returns ``(carry, sums, taken (T, B, A))``."""
    from torch.utils.checkpoint import checkpoint

    n = len(carry)
    sums, taken = None, []
    for t0 in range(0, T, size):
        args = (t0, min(t0 + size, T), *carry, *extra)
        out = checkpoint(segment, *args, use_reentrant=True) if torch.is_grad_enabled() else segment(*args)
        carry, part = out[:n], out[n:-1]
        sums = part if sums is None else tuple(a + b for a, b in zip(sums, part))
        taken.append(out[-1].detach())
    return carry, sums, torch.cat(taken)


# what a step changes in TaskState: the fields an episode's segments carry
MOVING = ("x", "pt", "idx", "s", "t", "prev_action")


def _rollout(core: TaskCore, state, agent: RacingLine, base: dict, residual: torch.Tensor, scale: torch.Tensor,
             prm: OracleParams):
    """One episode from ``state`` driven by ``agent`` (its speed profile times ``1 + scale``) plus
    ``residual (T, B, 2)``, with the graph kept (in checkpointed segments, :func:`_segments`): the
    loss per row, each row's finish step (-1 if it ended otherwise or not at all) and the actions
    taken ``(T, B, 2)``."""
    cfg = core.cfg
    goal = core.goal(state)
    T, B = residual.shape[:2]
    profile = (base["profile"] * (1.0 + scale)).clamp_min(0.5)
    accel = _profile_accel(profile, base["arc"])

    def segment(t0, t1, *tensors):
        """Steps ``t0 .. t1 - 1`` from the state's moving fields and flags: the fields and flags
        after them, the area and barrier they add and the actions taken."""
        ended, finish, res, prof, acc = tensors[len(MOVING):]
        agent._t = dict(base, profile=prof, accel=acc)
        st = dataclasses.replace(state, **dict(zip(MOVING, tensors[:len(MOVING)])))
        obs = core.observe(st)
        area = torch.zeros(B, dtype=residual.dtype)
        barrier = torch.zeros(B, dtype=residual.dtype)
        taken = []
        for t in range(t0, t1):
            a = core.clip_action(agent.act(obs, st) + res[t])
            taken.append(a.detach())
            st, obs, _, term, trunc, info = core.step(st, a)
            live = (~ended).to(residual.dtype)  # barriers count until the row's episode would end
            area = area + info["s"].clamp(max=goal)
            barrier = barrier + live * termination_barrier(info["cross_track"], st.x[:, DYN4.PHI], cfg.course.half_width,
                                                           cfg.roll_limit, prm.edge, prm.w_edge, prm.roll_frac, prm.w_roll)
            succ = info["success"] & ~ended
            finish = torch.where(succ, torch.full_like(finish, t), finish)
            ended = ended | term | trunc
        return (*(getattr(st, f) for f in MOVING), ended, finish, area, barrier, torch.stack(taken))

    carry = (*(getattr(state, f) for f in MOVING), torch.zeros(B, dtype=torch.bool),
             torch.full((B,), -1, dtype=torch.long))
    carry, (area, barrier), taken = _segments(segment, T, prm.segment, carry, (residual, profile, accel))
    loss = -area / (T * goal) + barrier
    return loss, carry[-1], taken


def _descend(run, variables: dict, clamp: dict, C: int, S: int, T: int, n_action: int, iters: int, lr: float,
             progress, resume: dict | None):
    """The oracles' search: Adam on ``variables`` (name -> leaf tensor, each clamped to
    ``clamp[name]`` after a step) for ``iters`` iterations after iteration 0, which drives the
    starts as they are. ``run() -> (loss (B,), score (B,), taken (T, B, n_action))``, rows
    course-major over ``C`` courses x ``S`` starts, ``score`` the harness's figure per row (lower
    is better; inf where the row did not count). The best score per course and the actions that
    reached it are kept (a start's where none counted). ``progress``/``resume``: as
    :func:`race_oracle`'s. Returns ``(best (C,), best_actions (T, C, n_action), history)``."""
    opt = torch.optim.Adam(list(variables.values()), lr=lr)
    best = np.full(C, np.inf)
    best_actions = np.zeros((T, C, n_action))
    first = 0
    if resume is not None:
        with torch.no_grad():
            for name, v in variables.items():
                v.copy_(torch.as_tensor(resume[name]))
        opt.load_state_dict(resume["adam"])
        best, best_actions, first = np.array(resume["best"]), np.array(resume["best_actions"]), int(resume["iter"])
    history = list(resume.get("history", [])) if resume is not None else []
    for it in range(first, iters + 1):  # iteration 0 drives the starts as they are
        tic = _time.perf_counter()
        opt.zero_grad()
        loss, score, taken = run()
        score = np.asarray(score, dtype=np.float64).reshape(C, S)
        taken = taken.numpy().reshape(T, C, S, n_action)
        for c in range(C):
            k = int(np.argmin(score[c]))
            if score[c, k] < best[c] or not np.isfinite(best[c]) and it == first:
                best[c] = score[c, k]
                best_actions[:, c] = taken[:, c, k]
        if it < iters:  # the last iteration only measures
            loss.sum().backward()  # rows are independent: each row's gradient is its own loss's
            opt.step()
            with torch.no_grad():
                for name, v in variables.items():
                    v.clamp_(*clamp[name])
        history.append(dict(iter=it, best=best.tolist(), loss=float(loss.detach().mean()),
                            seconds=_time.perf_counter() - tic))
        if progress is not None:
            progress(it, best.copy(), history[-1]["seconds"],
                     state=dict(**{name: v.detach().numpy().copy() for name, v in variables.items()},
                                best_actions=best_actions.copy(), best=best.copy(), iter=it + 1,
                                history=[dict(h) for h in history],
                                adam=copy.deepcopy(opt.state_dict())))  # later steps update Adam's in place
    return best, best_actions, history


def race_oracle(seeds, task: dict | None = None, env_kwargs: dict | None = None, params: OracleParams = OracleParams(),
                progress=None, resume: dict | None = None) -> OracleResult:
    """The oracle on the race ``task``'s courses of ``seeds`` (``dyn4_gym.RACE`` unless given; the
    torch engine in float64). ``progress(iter, best_times, seconds, state=...)`` is called after
    each iteration (a log line, a checkpoint: ``state`` is what ``resume`` takes to go on from
    there: the decision variables, the best sequences and times, the iteration, Adam's state)."""
    import dyn4_gym

    task = dyn4_gym.RACE if task is None else task
    core = race_core(task, env_kwargs)
    if core.driver:
        raise ValueError("the race oracle drives the acceleration action (a race task)")
    seeds = list(seeds)
    C, S = len(seeds), len(params.starts)
    rows = [s for s in seeds for _ in range(S)]  # course-major, start-minor
    starts = [p for _ in seeds for p in params.starts]
    # the starts as the harness drives them, to their episode's end: the horizon comes from them
    t_init = run_race_baseline(rows, env_kwargs, params=starts, task=task).time
    dt = core.cfg.control_dt
    start_time = t_init.reshape(C, S)[:, 0]
    finite = t_init[np.isfinite(t_init)]
    slowest = finite.max() if finite.size else core.cfg.episode_steps * dt
    T = min(core.cfg.episode_steps, int(np.ceil(slowest / dt * params.slack)))
    state0 = race_start(core, rows)
    agent = RacingLine(core, starts)
    agent.plan(state0)
    base = dict(agent._t)
    residual = torch.zeros(T, C * S, 2, dtype=torch.float64, requires_grad=True)
    scale = torch.zeros(C * S, base["profile"].shape[1], dtype=torch.float64, requires_grad=True)

    def run():
        loss, finish, taken = _rollout(core, state0, agent, base, residual, scale, params)
        f = finish.numpy()
        return loss, np.where(f >= 0, (f + 1) * dt, np.inf), taken

    best, best_actions, history = _descend(run, dict(residual=residual, scale=scale),
                                           dict(residual=(-2.0, 2.0), scale=(-0.5, 0.5)), C, S, T, 2, params.iters,
                                           params.lr, progress, resume)
    return OracleResult(time=best, start_time=start_time, actions=best_actions, history=history)


# ------------------------------------------------------------------------------------ the eco task's
@dataclass(frozen=True)
class EcoOracleParams:
    """The eco oracle's settings (fixed before any held-out course ran; none is tuned on them).

    Per course, the tracked DP speed plan (:mod:`dyn4_gym.agents.eco_plan`, the strongest
    classical eco driver) plus a free residual per step on its pedals ``(T, B, 2)`` (throttle,
    brake) and a scale per station on its speeds (``v (1 + rho)``, the plan's clock recomputed),
    improved by Adam on

        loss_b = L/100 km burnt over the course + w_late relu(goal - s(t_budget - deadline))^2
                 + the corridor's and roll's barriers (as the race oracle's),

    the fuel of every step until the row's episode ends over the course's length, and a barrier on
    the distance still to go ``deadline`` seconds before the budget (the plan's own margin), since
    arriving late does not count and the least fuel lies just before the budget."""

    iters: int = 10  # Adam iterations (each a whole-episode rollout and its backward; Race-v1's oracle ran 8)
    lr: float = 0.02  # Adam's step: pedal units for the residual, a share of the speed for the scale
    deadline: float = 0.25  # [s] before the budget: where the distance left is penalised (5 steps)
    w_late: float = 1.0  # [L/100 km per m^2] the distance left at the deadline, squared
    edge: float = 0.75  # [m] the corridor barrier starts this far inside the edge
    w_edge: float = 1.0  # [1/m^2] the corridor barrier's weight, per step
    roll_frac: float = 0.8  # the roll barrier starts at this share of the roll limit
    w_roll: float = 10.0  # [1/rad^2] the roll barrier's weight, per step
    segment: int = 50  # steps per checkpointed segment of the backward (memory, not results)
    starts: tuple = field(default_factory=lambda: (ECO_V2_PLAN_TUNED,))  # the plan's settings, one row each

    def __post_init__(self):
        if not (isinstance(self.iters, int) and self.iters >= 0):
            raise ValueError(f"EcoOracleParams.iters must be an int >= 0, got {self.iters!r}")
        for name in ("lr", "deadline", "w_late", "edge", "w_edge", "w_roll"):
            if not (np.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise ValueError(f"EcoOracleParams.{name} must be finite and >= 0, got {getattr(self, name)!r}")
        if not (isinstance(self.segment, int) and self.segment >= 1):
            raise ValueError(f"EcoOracleParams.segment must be an int >= 1, got {self.segment!r}")
        if not 0 < self.roll_frac <= 1:
            raise ValueError("EcoOracleParams.roll_frac must be in (0, 1]")
        if not self.starts or not all(isinstance(p, EcoPlanParams) for p in self.starts):
            raise ValueError("EcoOracleParams.starts must be a non-empty tuple of EcoPlanParams")


@dataclass
class EcoOracleResult:
    litres: np.ndarray  # (C,) [L/100 km] the least fuel per course among runs in the budget (inf: none was)
    start_litres: np.ndarray  # (C,) the first start's (the tuned plan's) own, as the harness measures it
    actions: np.ndarray  # (T, C, 3) the actions of the best run in the budget per course (a start's if none)
    history: list  # per iteration: dict(iter, best (C,), loss, seconds); iteration 0 the starts


def _eco_core(task: dict, env_kwargs: dict | None) -> TaskCore:
    """The eco ``task``'s torch task core in float64, ``env_kwargs`` over it."""
    kw = {k: v for k, v in task.items() if k != "engine"}
    kw.update(dtype="float64", **(env_kwargs or {}), engine="torch")
    core = TaskCore(EnvConfig.from_dict(kw))
    if not core.driver or core.cfg.time_budget is None:
        raise ValueError("the eco oracle drives the pedals toward a time budget (an eco task: action='driver', "
                         "time_budget)")
    return core


def eco_oracle(seeds, task: dict | None = None, env_kwargs: dict | None = None,
               params: EcoOracleParams = EcoOracleParams(), progress=None, resume: dict | None = None) -> EcoOracleResult:
    """The oracle on the eco ``task``'s courses of ``seeds`` (``dyn4_gym.ECO_V2`` unless given; the
    torch engine in float64): the least fuel per course, in L/100 km of progress as
    :func:`~dyn4_gym.agents.evaluation.evaluate` counts it (fuel until the episode ends over the
    progress made), among the runs that arrive within the budget. ``progress`` and ``resume`` as
    :func:`race_oracle`'s."""
    import dyn4_gym

    from .eco_plan import plan_courses, plan_policy, run_eco_plan

    task = dyn4_gym.ECO_V2 if task is None else task
    core = _eco_core(task, env_kwargs)
    cfg = core.cfg
    seeds = list(seeds)
    C, S = len(seeds), len(params.starts)
    rows = [s for s in seeds for _ in range(S)]  # course-major, start-minor
    starts = [p for _ in seeds for p in params.starts]
    # the first start as the harness measures it (the tuned plan, the classical bar)
    first, _ = run_eco_plan(seeds, params.starts[0], task=task, env_kwargs={**(env_kwargs or {}), "engine": "torch"})
    policy = plan_policy(cfg, plan_courses(cfg, rows, starts), starts)
    state0 = core.new_state(torch.as_tensor(rows, dtype=torch.long), torch.zeros(C * S, dtype=torch.long))
    dt, budget, B = cfg.control_dt, cfg.time_budget, C * S
    T = min(cfg.episode_steps, int(np.ceil(budget / dt - 1e-9)) + 1)  # a step past the budget: it cannot count
    t_dead = min(max(int(round((budget - params.deadline) / dt)) - 1, 0), T - 1)
    goal = core.goal(state0)
    km = ((goal - state0.s) / 1000.0).clamp_min(1e-3)
    per_joule = 100.0 / (core.pt.fuel_lhv * core.pt.fuel_density)  # [L/100 km per (J/km)]
    speed0 = policy.tables["speed"]
    residual = torch.zeros(T, B, 2, dtype=torch.float64, requires_grad=True)
    scale = torch.zeros(speed0.shape, dtype=torch.float64, requires_grad=True)

    def segment(t0, t1, *tensors):
        """Steps ``t0 .. t1 - 1``: the moving fields and flags after them, the fuel, progress,
        lateness and barrier they add, the actions taken."""
        ended, finish, res, spd = tensors[len(MOVING):]
        st = dataclasses.replace(state0, **dict(zip(MOVING, tensors[:len(MOVING)])))
        obs = core.observe(st)
        fuel = dist = late = barrier = torch.zeros(B, dtype=torch.float64)
        taken = []
        for t in range(t0, t1):
            pedals = torch.cat((torch.zeros_like(res[t][:, :1]), res[t]), -1)
            a = core.clip_action(policy(obs, spd) + pedals)
            taken.append(a.detach())
            st, obs, _, term, trunc, info = core.step(st, a)
            live = (~ended).to(torch.float64)  # counted until the row's episode ends, as the harness counts
            fuel = fuel + live * info["books"]["fuel"]
            dist = dist + live * info["progress"]
            barrier = barrier + live * termination_barrier(info["cross_track"], st.x[:, DYN4.PHI], cfg.course.half_width,
                                                           cfg.roll_limit, params.edge, params.w_edge, params.roll_frac,
                                                           params.w_roll)
            if t == t_dead:
                late = late + torch.relu(goal - st.s) ** 2
            finish = torch.where(info["success"] & ~ended, torch.full_like(finish, t), finish)
            ended = ended | term | trunc
        return (*(getattr(st, f) for f in MOVING), ended, finish, fuel, dist, late, barrier, torch.stack(taken))

    def run():
        speed = (speed0 * (1.0 + scale)).clamp_min(0.5)
        carry = (*(getattr(state0, f) for f in MOVING), torch.zeros(B, dtype=torch.bool),
                 torch.full((B,), -1, dtype=torch.long))
        carry, (fuel, dist, late, barrier), taken = _segments(segment, T, params.segment, carry, (residual, speed))
        loss = per_joule * fuel / km + params.w_late * late + barrier
        f = carry[-1].numpy()
        in_budget = (f >= 0) & ((f + 1) * dt <= budget)
        litres = per_joule * fuel.detach().numpy() / (np.maximum(dist.detach().numpy(), 1.0) / 1000.0)
        return loss, np.where(in_budget, litres, np.inf), taken

    best, best_actions, history = _descend(run, dict(residual=residual, scale=scale),
                                           dict(residual=(-1.0, 1.0), scale=(-0.3, 0.3)), C, S, T, 3, params.iters,
                                           params.lr, progress, resume)
    return EcoOracleResult(litres=best, start_litres=first.counted, actions=best_actions, history=history)
