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

from ..envs import TaskCore
from ..model.state import DYN4
from .barriers import termination_barrier
from .race import RACE_LINE_TUNED, RacingLine, RacingLineParams, race_core, race_start, run_race_baseline

__all__ = ["OracleParams", "OracleResult", "race_oracle", "bolder_starts", "stored_times"]

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


def _rollout(core: TaskCore, state, agent: RacingLine, base: dict, residual: torch.Tensor, scale: torch.Tensor,
             prm: OracleParams):
    """One episode from ``state`` driven by ``agent`` (its speed profile times ``1 + scale``) plus
    ``residual (T, B, 2)``, with the graph kept: the loss per row, each row's finish step (-1 if it
    ended otherwise or not at all) and the actions taken ``(T, B, 2)``.

    The episode runs in segments of ``prm.segment`` steps under activation checkpointing
    (``torch.utils.checkpoint``, its reentrant form: a segment's forward builds no graph, its
    backward recomputes it), so only the states between segments are kept. The graph of a step
    is mostly autograd's own nodes (thousands of small ops a substep), which the non-reentrant
    form keeps; measured: a 1 km course's 1,300 steps at 48 rows held 19 GB without it."""
    from torch.utils.checkpoint import checkpoint

    cfg = core.cfg
    goal = core.goal(state)
    T, B = residual.shape[:2]
    profile = (base["profile"] * (1.0 + scale)).clamp_min(0.5)
    accel = _profile_accel(profile, base["arc"])
    moving = ("x", "pt", "idx", "s", "t", "prev_action")  # what a step changes in TaskState

    def segment(t0, t1, *tensors):
        """Steps ``t0 .. t1 - 1`` from the state's moving fields: the fields after them, the area
        and barrier they add, the flags and the actions taken (tensors only: a checkpoint's I/O)."""
        ended, finish, res, prof, acc = tensors[len(moving):]
        agent._t = dict(base, profile=prof, accel=acc)
        st = dataclasses.replace(state, **dict(zip(moving, tensors[:len(moving)])))
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
        return (*(getattr(st, f) for f in moving), area, barrier, ended, finish, torch.stack(taken))

    fields = tuple(getattr(state, f) for f in moving)
    ended = torch.zeros(B, dtype=torch.bool)
    finish = torch.full((B,), -1, dtype=torch.long)
    area = torch.zeros(B, dtype=residual.dtype)
    barrier = torch.zeros(B, dtype=residual.dtype)
    taken = []
    for t0 in range(0, T, prm.segment):
        t1 = min(t0 + prm.segment, T)
        args = (t0, t1, *fields, ended, finish, residual, profile, accel)
        out = checkpoint(segment, *args, use_reentrant=True) if torch.is_grad_enabled() else segment(*args)
        fields, (da, db, ended, finish, tk) = out[:len(moving)], out[len(moving):]
        area, barrier = area + da, barrier + db
        taken.append(tk.detach())
    loss = -area / (T * goal) + barrier
    return loss, finish, torch.cat(taken)


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
    opt = torch.optim.Adam([residual, scale], lr=params.lr)
    best = np.full(C, np.inf)
    best_actions = np.zeros((T, C, 2))
    first = 0
    if resume is not None:
        with torch.no_grad():
            residual.copy_(torch.as_tensor(resume["residual"]))
            scale.copy_(torch.as_tensor(resume["scale"]))
        opt.load_state_dict(resume["adam"])
        best, best_actions, first = np.array(resume["best"]), np.array(resume["best_actions"]), int(resume["iter"])
    history = list(resume.get("history", [])) if resume is not None else []
    for it in range(first, params.iters + 1):  # iteration 0 drives the starts as they are
        tic = _time.perf_counter()
        opt.zero_grad()
        loss, finish, taken = _rollout(core, state0, agent, base, residual, scale, params)
        f = finish.numpy()
        times = np.where(f >= 0, (f + 1) * dt, np.inf).reshape(C, S)
        taken = taken.numpy().reshape(T, C, S, 2)
        for c in range(C):
            k = int(np.argmin(times[c]))
            if times[c, k] < best[c] or not np.isfinite(best[c]) and it == first:
                best[c] = times[c, k]
                best_actions[:, c] = taken[:, c, k]
        if it < params.iters:  # the last iteration only measures
            loss.sum().backward()  # rows are independent: each row's gradient is its own loss's
            opt.step()
            with torch.no_grad():
                residual.clamp_(-2.0, 2.0)
                scale.clamp_(-0.5, 0.5)
        history.append(dict(iter=it, best=best.tolist(), loss=float(loss.detach().mean()),
                            seconds=_time.perf_counter() - tic))
        if progress is not None:
            progress(it, best.copy(), history[-1]["seconds"],
                     state=dict(residual=residual.detach().numpy().copy(), scale=scale.detach().numpy().copy(),
                                best_actions=best_actions.copy(), best=best.copy(), iter=it + 1,
                                history=[dict(h) for h in history],
                                adam=copy.deepcopy(opt.state_dict())))  # later steps update Adam's in place
    return OracleResult(time=best, start_time=start_time, actions=best_actions, history=history)
