"""The task core: one batched, functional torch implementation that every env face wraps.

``core.reset(key, episode) -> (state, obs)`` draws a course, a terrain and a start for each row
from its own random stream; ``core.step(state, action) -> (state, obs, reward, terminated,
truncated, info)`` runs the plant's substeps and scores them. Nothing is written in place:
resets are selects (:meth:`TaskCore.select`), so the same code runs with gradients on. Progress
is integrated over the substeps as the change in projected arc length, and the corridor and roll
limits are checked at every substep, so a car that leaves the road and comes back between
policy steps has still left it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from .. import _rng
from .._tree import put_rows, select_rows, tree_map
from ..ground.terrain import TERRAIN_KINDS, DrawContext
from ..plant import DYN4, dyn4_params, dyn4_rest, dyn4_step
from ..plant.drive import drive_step
from ..plant.powertrain import POWERTRAIN_LINES, PT, powertrain_at
from ..plant.presets import PRESETS
from ..plant.corners import forces_at
from ..model.books import BOOK_LINES
from ..model.constants import OBS_CLIP
from ..model.task import (OBS_INDEX, OBS_NAMES, OBS_NAMES_DRIVER, OBS_TABLE, OBS_TABLE_DRIVER,  # noqa: F401 (re-exported)
                          beam_angles, obs_names, obs_scale, patch_points, range_window, sensor_names, sensor_scales)
from .._checks import ConfigError
from .config import EnvConfig
from .vehicle import validate_powertrain, vehicle_range_box
from .course import (FLOAT32_REACH, course_reach, course_widths, goal_arc, make_courses, preview_points, project,
                     widths_at, wrap_angle)
from .rewards import StepContext, evaluate_term, resolve_terms
from .sensors import ground_patch, range_finder

__all__ = ["TaskState", "TaskCore", "OBS_TABLE", "OBS_TABLE_DRIVER", "OBS_NAMES", "OBS_NAMES_DRIVER", "OBS_INDEX", "BOOK_LINES", "obs_scale"]

# plant state entries observed directly, in OBS_TABLE's order
_OBS_STATE = (("vx", DYN4.VX), ("vy", DYN4.VY), ("yaw_rate", DYN4.R), ("roll", DYN4.PHI), ("pitch", DYN4.THETA),
              ("roll_rate", DYN4.PHID), ("pitch_rate", DYN4.THETAD), ("steer", DYN4.DELTA), ("drive", DYN4.A))


class _FiniteRowsGrad(torch.autograd.Function):
    """The identity forward; backward, each row's gradient where all of it is finite, 0 where not."""

    @staticmethod
    def forward(ctx, t):
        return t.clone()

    @staticmethod
    def backward(ctx, g):
        ok = torch.isfinite(g).flatten(1).all(-1)
        return torch.where(ok.view(-1, *[1] * (g.dim() - 1)), g, torch.zeros_like(g))


def finite_rows_grad(t: torch.Tensor) -> torch.Tensor:
    """``t`` (rows first), through a gate that passes a row's gradient only where it is finite
    (TaskCore.step's substeps); ``t`` itself where nothing needs its gradient."""
    return _FiniteRowsGrad.apply(t) if t.requires_grad else t


@dataclass(frozen=True, eq=False)
class TaskState:
    """Everything that evolves, per row. Leading dimension ``B`` on every tensor. The fields, their
    order and per-row shapes are model.schema.TASK_FIELDS' (a test holds them together)."""

    x: torch.Tensor  # (B, N_DYN4) plant state
    terrain: object  # the row's batched ground (a registered terrain kind's, dyn4_gym.ground.terrain)
    course_xy: torch.Tensor  # (B, N, 2)
    course_heading: torch.Tensor  # (B, N)
    idx: torch.Tensor  # (B,) long, course segment of the last projection
    s: torch.Tensor  # (B,) [m] arc length of the last projection
    t: torch.Tensor  # (B,) long, steps in this episode
    prev_action: torch.Tensor  # (B, 2), (B, 3) for action="driver"
    target_speed: torch.Tensor  # (B,)
    key: torch.Tensor  # (B,) long, the row's random stream
    episode: torch.Tensor  # (B,) long, episodes drawn on that stream
    pt: torch.Tensor  # (B, 3) powertrain state (omega_e, gear, t_shift); used by action="driver"
    p: object = None  # the rows' own Dyn4Params, (B,)-leading fields, with vehicle_ranges; None: the task's

    def detach(self) -> "TaskState":
        """The same state with every tensor cut from the autograd graph."""
        return tree_map(torch.Tensor.detach, self)

    @property
    def batch_size(self) -> int:
        return self.x.shape[0]


class TaskCore:
    """The batched task over a configuration (see :mod:`dyn4_gym.envs.config`)."""

    def __init__(self, cfg: EnvConfig, path: str = "config"):
        """Everything here is checked before any state exists: a bad config raises ``ConfigError``
        (its message starts with ``path``, ``options`` for ``reset(options=...)``)."""
        cfg.validate(path)
        self.cfg = cfg
        self.dtype = getattr(torch, cfg.dtype)
        self.device = torch.device(cfg.device)
        try:
            self.spec, self.pt = PRESETS[cfg.preset]  # the vehicle's spec sheet and its powertrain
            if cfg.powertrain:  # EnvConfig.powertrain's overrides (a fitted car's): both engines take self.pt
                self.pt = dataclasses.replace(self.pt, **validate_powertrain(cfg.powertrain, f"{path}.powertrain"))
            self.p = dyn4_params(self.spec, dtype=self.dtype, device=self.device, **cfg.vehicle)
        except (ValueError, TypeError) as exc:  # a sheet the bounds allow but the derivation refuses
            raise ConfigError(f"{path}.vehicle: {exc}") from None
        self.terms, self.weights = resolve_terms(cfg.reward_weights, cfg.reward_terms, path)
        self.n_sub = cfg.substeps
        self.hdt = cfg.hdt
        self.terrain_kind = TERRAIN_KINDS[cfg.ground.kind]
        self._ahead = torch.tensor(cfg.course.preview, dtype=self.dtype, device=self.device)
        self.driver = cfg.action == "driver"
        self.obs_names = obs_names(self.driver, cfg.course.preview_friction, cfg.observe_clock)
        sn = cfg.sensors  # the optional sensors' entries come last (model.task.sensor_names)
        self.n_fixed = len(self.obs_names)
        self.obs_names += sensor_names(sn.beams, sn.patch_rows, sn.patch_cols)
        self._beams = torch.tensor(beam_angles(sn.beams, sn.fan), dtype=self.dtype, device=self.device)
        self._window = range_window(sn.max_range, cfg.course.spacing)
        # the corridor's widths right and left of each course point (the same for every row)
        self.widths = course_widths(cfg.course)
        self._widths = torch.as_tensor(self.widths, dtype=self.dtype, device=self.device)
        self._patch = torch.tensor(patch_points(sn.patch_rows, sn.patch_cols, sn.patch_start, sn.patch_length,
                                                sn.patch_width), dtype=self.dtype, device=self.device).reshape(-1, 2)
        # the action box: (steer, accel) in [-1, 1]^2, or (steer, throttle, brake) in [-1, 1] x [0, 1]^2
        low = [-1.0, 0.0, 0.0] if self.driver else [-1.0, -1.0]
        self._act_low = torch.tensor(low, dtype=self.dtype, device=self.device)
        self._act_high = torch.ones_like(self._act_low)
        self.n_action = len(low)
        self.book_lines = BOOK_LINES + (POWERTRAIN_LINES if self.driver else ())
        self._scales = torch.tensor(self.obs_scales(), dtype=self.dtype, device=self.device)
        # domain randomisation (EnvConfig.vehicle_ranges, validated above): the keys in sorted order, their boxes
        self.ranges = vehicle_range_box(cfg.vehicle_ranges, cfg.vehicle, f"{path}.vehicle_ranges")
        self._steer = self.obs_names.index("steer")
        # issue 46: refused at the first reset (the Numba engine's core never draws in its dtype)
        self._reach = course_reach(cfg.course)
        self._far_in_float32 = self.dtype != torch.float64 and self._reach > FLOAT32_REACH

    def obs_scales(self) -> list[float]:
        """Each observation entry's scale (observation = value / scale), in ``obs_names``' order:
        the task's entries' (model.task.obs_scale), then the sensors'; both engines take them here."""
        sn, c = self.cfg.sensors, self.cfg.course
        return ([obs_scale(n, float(self.p.delta_max), c.half_width) for n in self.obs_names[:self.n_fixed]]
                + list(sensor_scales(sn.beams, sn.patch_rows, sn.patch_cols, sn.max_range)))

    def spaces(self):
        """The single env's ``(action_space, observation_space)`` (Gymnasium boxes, float32)."""
        import numpy as np
        from gymnasium import spaces

        low = self._act_low.cpu().numpy().astype(np.float32)
        act = spaces.Box(low, np.ones_like(low), dtype=np.float32)
        obs = spaces.Box(-OBS_CLIP, OBS_CLIP, (len(self.obs_names),), np.float32)
        return act, obs

    # ------------------------------------------------------------------ resets
    def new_state(self, key: torch.Tensor, episode: torch.Tensor) -> TaskState:
        """Fresh episodes for rows with streams ``key (B,)`` at ``episode (B,)``.

        Each row's uniforms come from its own stream: the course's first, then the terrain
        kind's, so a seed gives the same course whatever the terrain.
        """
        c = self.cfg.course
        if self._far_in_float32:
            raise ConfigError(f"config.course reaches {self._reach:.6g} m from the origin: float32 positions "
                              f"there are rounded to {self._reach * 6e-8:.2g} m a substep (the torch engine's "
                              f"dtype {self.cfg.dtype}); use dtype='float64' (or the Numba engine), or move the "
                              f"course within {FLOAT32_REACH:g} m of the origin")
        key = key.to(self.device)
        episode = episode.to(self.device)
        B = key.shape[0]
        dt, dev = self.dtype, self.device
        n_course, n_ground, n_vehicle = self.uniform_counts()
        u = _rng.uniform(key, episode, n_course + n_ground + n_vehicle, dtype=dt)
        p = self.row_params(u[:, n_course + n_ground:])
        v_t = torch.full((B,), self.cfg.target_speed, dtype=dt, device=dev)
        xy, heading = make_courses(u[:, :n_course], c, v_t)
        ctx = DrawContext(u=u[:, n_course:], course_xy=xy, course_heading=heading, spacing=c.spacing,
                          half_width=c.half_width, lead_in=c.lead_in)
        # contiguous leaves: a compiled substep guards on strides, and rows reset later
        # (put_rows) come back contiguous, so a view here would compile the step a second time
        terrain = tree_map(torch.Tensor.contiguous, self.terrain_kind.draw(self.cfg.ground, ctx))
        i0, frac, s0 = self.start_index()
        # the start pose: a point of the course's segment i0, moved start_offset to its left
        pos = xy[:, i0] + frac * (xy[:, i0 + 1] - xy[:, i0])
        th = heading[:, i0] + frac * (heading[:, i0 + 1] - heading[:, i0])
        off = self.cfg.start_offset
        x = dyn4_rest(self.p if p is None else p, terrain, (B,), X=pos[:, 0] - off * torch.sin(th),
                      Y=pos[:, 1] + off * torch.cos(th), psi=th + self.cfg.start_heading)  # params_of's rule
        v0 = self.cfg.target_speed if self.cfg.start_speed is None else self.cfg.start_speed
        x = x.index_fill(-1, torch.tensor([DYN4.VX], device=dev), v0)
        zeros_l = torch.zeros(B, dtype=torch.long, device=dev)
        return TaskState(x=x, terrain=terrain, course_xy=xy, course_heading=heading, idx=torch.full_like(zeros_l, i0),
                         s=torch.full((B,), s0, dtype=dt, device=dev), t=zeros_l,
                         prev_action=torch.zeros(B, self.n_action, dtype=dt, device=dev), target_speed=v_t, key=key,
                         episode=episode, pt=powertrain_at(self.pt, x[:, DYN4.VX]), p=p)

    def uniform_counts(self) -> tuple[int, int, int]:
        """How many uniforms a row draws at a reset, in stream order: the course's, the ground
        kind's, the vehicle's (one per ``vehicle_ranges`` key). Both engines read the layout here."""
        return 3 * self.cfg.course.n_waves, self.terrain_kind.n_uniforms(self.cfg.ground), len(self.ranges)

    def row_params(self, u: torch.Tensor):
        """Each row's parameters from its vehicle uniforms ``u (B, len(ranges))``: the spec sheet
        with the row's draw of every ``vehicle_ranges`` key, derived row by row (a reset's cost,
        0.16 ms a row measured; steps never derive); None without ranges."""
        if not self.ranges:
            return None
        lo = torch.tensor([r[0] for r in self.ranges.values()], dtype=torch.float64)
        hi = torch.tensor([r[1] for r in self.ranges.values()], dtype=torch.float64)
        values = (lo + (hi - lo) * u.detach().to(torch.float64).cpu()).tolist()
        rows = [dyn4_params(self.spec, dtype=self.dtype, device=self.device, **self.cfg.vehicle,
                            **dict(zip(self.ranges, v))) for v in values]
        return tree_map(lambda *leaves: torch.stack(leaves), rows[0], *rows[1:])

    def params_of(self, state: TaskState):
        """The parameters ``state``'s rows drive with: their own, or the task's."""
        return self.p if state.p is None else state.p

    def start_index(self) -> tuple[int, float, float]:
        """``(i0, frac, s0)``: the start's course segment, its fraction along it and its arc length
        [m] (``start_s``); both engines place the car from these numbers."""
        c = self.cfg.course
        n = int(round(c.length / c.spacing)) + 1
        i0 = min(int(math.floor(self.cfg.start_s / c.spacing)), n - 2)
        frac = self.cfg.start_s / c.spacing - i0
        return i0, frac, (i0 + frac) * c.spacing

    def reset(self, key: torch.Tensor, episode: torch.Tensor):
        state = self.new_state(key, episode)
        return state, self.observe(state)

    def reset_rows(self, state: TaskState, mask: torch.Tensor, key: torch.Tensor | None = None,
                   episode: torch.Tensor | None = None) -> TaskState:
        """Fresh episodes on the rows where ``mask (B,)``; the other rows are kept.

        ``key`` / ``episode`` (B,) give the new rows' streams (default: the same stream, next
        episode). Only the masked rows are drawn; they are placed with an out-of-place
        ``index_copy``, so the state stays differentiable.
        """
        key = state.key if key is None else key.to(self.device)
        episode = state.episode + mask.long() if episode is None else episode.to(self.device)
        rows = mask.nonzero().squeeze(-1)
        if rows.numel() == 0:
            return state
        sub = self.new_state(key[rows], episode[rows])
        out = put_rows(state, rows, sub)
        return dataclasses.replace(out, key=key, episode=episode)

    def reset_where(self, state: TaskState, mask: torch.Tensor) -> TaskState:
        """:meth:`reset_rows` with the default streams, without a host sync: every row's next
        episode is drawn and selected where ``mask (B,)`` (no ``nonzero``, no branch on the
        mask), so a step with its resets stays one program for a GPU's queue or a CUDA graph
        (issue 49). The same state as :meth:`reset_rows`, row for row (a row's draw reads its own
        stream only); it draws every row, so it costs one :meth:`new_state` a call."""
        episode = state.episode + mask.long()
        out = select_rows(mask, self.new_state(state.key, episode), state)
        return dataclasses.replace(out, episode=episode)

    def restart_finished(self, state: TaskState, obs: torch.Tensor, done: torch.Tensor):
        """``(state, obs)`` with the rows where ``done (B,)`` restarted (:meth:`reset_where`) and
        their observations those of the new episodes: the autoreset with no host sync."""
        state = self.reset_where(state, done)
        return state, torch.where(done[:, None], self.observe(state), obs)

    def whole_step(self, state: TaskState, action: torch.Tensor, bad: torch.Tensor | None = None):
        """:meth:`step` with the autoreset inside: ``(state, obs, reward, terminated, truncated,
        info)``, finished rows restarted (:meth:`restart_finished`; ``info["final_obs"]`` the
        observation they finished with); ``bad`` as :meth:`step`'s. One program with no host
        sync and no graph break: :meth:`compiled_whole_step` compiles it whole (issue 49;
        benchmarks/whole_step.py measures it against eager)."""
        state, obs, reward, term, trunc, info = self.step(state, action, bad=bad)
        info["final_obs"] = obs
        state, obs = self.restart_finished(state, obs, term | trunc)
        return state, obs, reward, term, trunc, info

    @staticmethod
    def select(mask: torch.Tensor, new: TaskState, old: TaskState) -> TaskState:
        """Rows of ``new`` where ``mask (B,)``, of ``old`` elsewhere (a select, never in place)."""
        return select_rows(mask, new, old)

    def goal(self, state) -> float:
        """[m] The arc length that finishes the course of ``state`` (a :class:`TaskState`, or the
        Numba engine's): course.goal_arc of the config, since every state of it has the same
        points; the Numba kernels compute the same from the course's points."""
        return goal_arc(self.cfg.course)

    # ------------------------------------------------------------------ observation
    def observe(self, state: TaskState) -> torch.Tensor:
        """The observation ``(B, len(obs_names))`` (``OBS_TABLE_ALL``'s entries this env observes,
        model.task.obs_names): value / scale, clipped to +-10; NaN -> 0."""
        x, p = state.x, self.params_of(state)
        f = forces_at(x, x[:, DYN4.DELTA], x[:, DYN4.A], p, state.terrain)
        _, _, e, th = project(state.course_xy, state.course_heading, state.idx, x[:, DYN4.X:DYN4.Y + 1], self.cfg.course.spacing)
        pts = preview_points(state.course_xy, state.s, self._ahead, self.cfg.course.spacing)
        rel = pts - x[:, None, DYN4.X:DYN4.Y + 1]
        c, s = torch.cos(x[:, DYN4.PSI:DYN4.PSI + 1]), torch.sin(x[:, DYN4.PSI:DYN4.PSI + 1])
        bx, by = c * rel[..., 0] + s * rel[..., 1], -s * rel[..., 0] + c * rel[..., 1]
        values = {name: x[:, i] for name, i in _OBS_STATE}
        load = f.Fz / p.Fz0 - 1.0
        for w, wheel in enumerate(("FL", "FR", "RL", "RR")):
            values[f"load_{wheel}"] = load[:, w]
            values[f"mu_{wheel}"] = f.mu_ground[:, w]
        values.update(cross_track=e, heading_error=wrap_angle(x[:, DYN4.PSI] - th), target_speed=state.target_speed,
                      engine_speed=state.pt[:, PT.OMEGA_E] * (30.0 / torch.pi), gear=state.pt[:, PT.GEAR])
        for k in range(bx.shape[1]):
            values[f"preview{k}_x"], values[f"preview{k}_y"] = bx[:, k], by[:, k]
        if self.cfg.observe_clock:  # the clock against the budget (model.task.OBS_CLOCK)
            budget, elapsed = self.cfg.time_budget, state.t.to(x.dtype) * (self.hdt * self.n_sub)
            values.update(time_left=budget - elapsed, lead=state.s * (budget / self.goal(state)) - elapsed)
        if self.cfg.course.preview_friction:  # the ground's friction at the preview points
            mu_ahead = state.terrain(pts)[0]
            for k in range(bx.shape[1]):
                values[f"preview{k}_mu"] = mu_ahead[:, k]
        raw = torch.stack([values[name] for name in self.obs_names[:self.n_fixed]], -1)
        sn = self.cfg.sensors
        if sn.beams:
            raw = torch.cat((raw, range_finder(state.course_xy, state.course_heading, state.idx, self._widths,
                                               x[:, DYN4.X:DYN4.Y + 1], x[:, DYN4.PSI],
                                               self._beams, sn.max_range, self._window)), -1)
        if sn.patch_rows:
            raw = torch.cat((raw, *ground_patch(state.terrain, x[:, DYN4.X:DYN4.Y + 1], x[:, DYN4.PSI], self._patch)),
                            -1)
        # a non-finite plant state (flagged in info["nonfinite"]) never leaks a NaN observation
        scales = self._scales
        if state.p is not None:  # the steer entry's scale is the row's own max steer
            scales = scales.expand(x.shape[0], -1).index_copy(1, torch.tensor([self._steer], device=x.device),
                                                             state.p.delta_max.to(scales.dtype)[:, None])
        raw = torch.nan_to_num(raw / scales, nan=0.0, posinf=OBS_CLIP, neginf=-OBS_CLIP)
        return raw.clamp(-OBS_CLIP, OBS_CLIP)

    # ------------------------------------------------------------------ step
    def clip_action(self, action: torch.Tensor) -> torch.Tensor:
        """The action clipped to its box (:meth:`spaces`)."""
        return torch.clamp(action.to(self.dtype), self._act_low, self._act_high)

    def action_to_input(self, a: torch.Tensor, p=None) -> torch.Tensor:
        """An action in ``[-1, 1]^2`` (already clipped) -> plant input ``(delta_cmd [rad], a_cmd [m/s^2])``;
        the driver's action ``(steer, throttle, brake)`` is the powertrain's input as it is."""
        if self.driver:
            return a
        p = self.p if p is None else p
        lon = torch.where(a[:, 1] >= 0, a[:, 1] * p.a_drive, a[:, 1] * p.a_brake)
        return torch.stack((a[:, 0] * p.delta_max, lon), -1)

    def step(self, state: TaskState, action: torch.Tensor, parts=None, bad: torch.Tensor | None = None):
        """One env step of every row: ``(state, obs, reward, terminated, truncated, info)``.

        The step is :meth:`_advance` once per substep, then :meth:`_finish`; ``parts`` replaces
        that pair (same signatures): :meth:`compiled_step` passes their compiled twins.
        ``bad (B,)`` bool: rows whose action is not to be used (non-finite, found without a host
        sync): they step from a zero action cut from the graph and end flagged non-finite with
        the termination penalty, as a row whose state is non-finite does.
        """
        advance, finish = (self._advance, self._finish) if parts is None else parts
        if bad is not None:  # a select: the bad rows' NaN never meets a multiplication, forward or back
            action = torch.where(bad[:, None], torch.zeros_like(action), action)
        a = self.clip_action(action)
        u = self.action_to_input(a, self.params_of(state))
        x = state.x
        B = x.shape[0]
        zero = torch.zeros(B, dtype=self.dtype, device=self.device)
        flag = torch.zeros(B, dtype=torch.bool, device=self.device)
        # the substeps' sums: progress, distance, left the corridor, rolled over, books lines
        acc = (zero, zero, flag, flag, {k: zero for k in self.book_lines})
        # a row whose state is already non-finite is stepped from a safe stand-in (zeros for the
        # bad entries, no gradient) and ends this step flagged, with the termination penalty
        nonfinite = ~torch.isfinite(x).all(-1)
        if bad is not None:
            nonfinite = nonfinite | bad
        x = torch.where(nonfinite[:, None], torch.nan_to_num(x.detach(), nan=0.0, posinf=0.0, neginf=0.0), x)
        track = torch.is_grad_enabled() and (x.requires_grad or u.requires_grad)
        if track and parts is not None:
            # the compiled parts guard on each input's requires_grad: a window's first step (its
            # state detached), a step's first substep (its sums fresh zeros) and the rest would
            # each compile their own graph and backward (five in all, minutes each on a CPU). As
            # leaves that require grad, the same values make one pattern, one graph each (and
            # each sum its own tensor: the guards also tell shared inputs from distinct ones)
            def fresh():
                return torch.zeros_like(zero).requires_grad_()

            x = _grad_leaf(x)
            acc = (fresh(), fresh(), flag, flag.clone(), {k: fresh() for k in self.book_lines})
            state = _with_grad_leaves(state)
            carry = (x, state.pt, state.idx, state.s, fresh(), fresh(), acc)
        else:
            carry = (x, state.pt, state.idx, state.s, zero, zero, acc)  # the last two: cross-track, course heading
        for _ in range(self.n_sub):
            if track:
                # a row that turns non-finite in this substep keeps its state (_advance), but the
                # backward through the substep's arithmetic meets its infinities (0 x inf): each
                # row's gradient into the substep's inputs passes only where it is finite, so no
                # NaN reaches the finite rows' (or a policy's) gradients, and no host sync is needed
                # to find those rows first (issue 49)
                x_in, pt_in, *rest = carry
                carry = (finite_rows_grad(x_in), finite_rows_grad(pt_in), *rest)
                new, finite = advance(carry, finite_rows_grad(u), nonfinite, state, track)
            else:
                new, finite = advance(carry, u, nonfinite, state, track)
            nonfinite = nonfinite | ~finite
            carry = new
        return finish(state, a, carry, nonfinite)

    def _advance(self, carry, u, cut, state: TaskState, track: bool):
        """One substep and its bookkeeping: ``carry -> (carry, finite (B,))``. The plant (or the
        powertrain and the plant) steps, rows that turn non-finite keep their state, the course
        projection advances, and progress, distance, the corridor and roll checks and the books
        accumulate. Rows in ``cut`` step from inputs cut from the graph (with ``track``)."""
        cfg = self.cfg
        x, pt, idx, s_prev, _, _, (progress, distance, out, rolled, books) = carry
        x_new, pt_new, b = self._substep(x, pt, u, cut, state.terrain, track, self.params_of(state))
        finite = torch.isfinite(x_new).all(-1) & torch.isfinite(pt_new).all(-1)
        x_prev, x = x, torch.where(finite[:, None], x_new, x)
        pt = torch.where(finite[:, None], pt_new, pt)
        idx, s_new, e, th = project(state.course_xy, state.course_heading, idx, x[:, DYN4.X:DYN4.Y + 1],
                                    cfg.course.spacing)
        # progress is the projection's advance, but never more than the distance driven: far
        # from a curved centre line the foot point moves faster than the car
        d2 = ((x[:, DYN4.X:DYN4.Y + 1] - x_prev[:, DYN4.X:DYN4.Y + 1]) ** 2).sum(-1)
        moved = d2 > 0
        dist = torch.where(moved, torch.sqrt(torch.where(moved, d2, torch.ones_like(d2))), torch.zeros_like(d2))
        progress = progress + torch.maximum(torch.minimum(s_new - s_prev, dist), -dist)
        distance = distance + dist
        right, left = widths_at(self._widths, idx, s_new, cfg.course.spacing)
        out = out | (e > left) | (-e > right)
        rolled = rolled | (x[:, DYN4.PHI].abs() > cfg.roll_limit)
        books = {k: books[k] + torch.where(finite, b[k], torch.zeros_like(b[k])) for k in self.book_lines}
        return (x, pt, idx, s_new, e, th, (progress, distance, out, rolled, books)), finite

    def _finish(self, state: TaskState, a: torch.Tensor, carry, nonfinite: torch.Tensor):
        """After the substeps: the end checks, the reward terms, the non-finite guard, the new
        state and its observation (``step``'s return value)."""
        cfg = self.cfg
        x, pt, idx, s_prev, e, th, (progress, distance, out, rolled, books) = carry
        B = x.shape[0]
        goal = self.goal(state)
        success = s_prev >= goal
        failed = out | rolled | nonfinite
        terminated = failed | (success & ~failed)
        t = state.t + 1
        truncated = (t >= cfg.episode_steps) & ~terminated
        heading_error = wrap_angle(x[:, DYN4.PSI] - th)
        p = self.params_of(state)
        ctx = self.context(x=x, progress=progress, target_speed=state.target_speed, cross_track=e,
                           heading_error=heading_error, books=books, weight=p.m * p.g, action=a,
                           prev_action=state.prev_action, failed=failed, success=success & ~failed, t=t, s=s_prev,
                           s_start=state.s)
        terms = {name: evaluate_term(name, term, ctx, B, self.dtype) for name, term in self.terms.items()}
        reward = sum(self.weights[name] * v for name, v in terms.items())
        # rewards are finite by construction: a non-finite state or reward ends the episode with
        # the termination penalty alone, and info["nonfinite"] says so
        bad = nonfinite | ~torch.isfinite(reward)
        terms = {name: torch.where(bad, torch.full_like(v, -1.0 if name == "termination" else 0.0), v)
                 for name, v in terms.items()}
        reward = torch.where(bad, torch.full_like(reward, -self.weights["termination"]), reward)
        nonfinite, terminated, truncated = nonfinite | bad, terminated | bad, truncated & ~bad
        failed = failed | bad
        progress = torch.where(bad, torch.zeros_like(progress), progress)
        books = {k: torch.where(bad, torch.zeros_like(v), v) for k, v in books.items()}
        new = TaskState(x=x, terrain=state.terrain, course_xy=state.course_xy, course_heading=state.course_heading,
                        idx=idx, s=s_prev, t=t, prev_action=a, target_speed=state.target_speed, key=state.key,
                        episode=state.episode, pt=pt, p=state.p)
        info = dict(reward_terms=terms, books=books, success=success & ~failed, out_of_corridor=out,
                    rollover=rolled, nonfinite=nonfinite, progress=progress, distance=distance, s=s_prev,
                    cross_track=torch.nan_to_num(e, nan=0.0))
        return new, self.observe(new), reward, terminated, truncated, info

    def _substep(self, x, pt, u, cut, terrain, track, p):
        """One plant substep (through the powertrain for the driver) -> ``(x+, pt+, books dict)``;
        with ``track``, rows in ``cut`` step from inputs cut from the graph."""
        if track:
            x = torch.where(cut[:, None], x.detach(), x)
            pt = torch.where(cut[:, None], pt.detach(), pt)
            u = torch.where(cut[:, None], u.detach(), u)
        if self.driver:
            x1, pt1, bk, pb = drive_step(x, pt, u, p, self.pt, terrain, self.hdt, books=True)
            return x1, pt1, {**bk.as_dict(), **pb.as_dict()}
        x1, bk = dyn4_step(x, u, p, terrain, self.hdt, books=True)
        return x1, pt, bk.as_dict()

    def context(self, *, x, progress, target_speed, cross_track, heading_error, books, weight, action, prev_action,
                failed, success, t, s, s_start) -> StepContext:
        """The step's :class:`StepContext` from its arrays (torch, ``(B,)`` unless noted: ``x`` the
        ``(B, 14)`` state at the step's end, ``t`` its step count [-], ``s`` / ``s_start`` the arc
        length [m] at its end / start) and this config (the corridor, the clock, the goal, the
        pace). The one builder of a context: both engines call it (:meth:`_finish`,
        ``NumbaEngine._custom_terms``), so a field reaches users' terms alike on both, and every
        argument is required, so an engine that misses one fails loudly."""
        dt = self.hdt * self.n_sub  # one env step [s], as the kernel takes it
        return StepContext(progress=progress, speed=x[:, DYN4.VX], target_speed=target_speed, cross_track=cross_track,
                           half_width=self.cfg.course.half_width, heading_error=heading_error, books=books,
                           weight=weight, action=action, prev_action=prev_action, roll_rate=x[:, DYN4.PHID],
                           pitch_rate=x[:, DYN4.THETAD], failed=failed, success=success,
                           progress_cap=self.progress_cap(target_speed), control_dt=dt,
                           elapsed=t.to(progress.dtype) * dt, time_budget=self.cfg.budget, s=s, s_start=s_start,
                           goal=goal_arc(self.cfg.course), pace=self.cfg.pace, state=x)

    def progress_cap(self, target_speed: torch.Tensor) -> torch.Tensor:
        """``(B,)`` [m]: the most progress one step is paid for (inf when ``progress_cap`` is None)."""
        cap = self.cfg.progress_cap
        return torch.full_like(target_speed, torch.inf) if cap is None else cap * self.cfg.control_dt * target_speed


    def step_fn(self):
        """The step the numpy and differentiable faces use: :meth:`compiled_step` if the config
        asks for it (``compile=True``)."""
        return self.compiled_step() if self.cfg.compile else self.step

    def compiled_whole_step(self):
        """:meth:`whole_step` compiled by ``torch.compile`` as one program (``fullgraph=True``:
        the substeps unrolled, the reset inside, with its backward when gradients are on), same
        signature and results; what ``Dyn4DiffEnv(compile=True, sync_free=True)`` steps with (a
        GPU's path: no host sync, so the program can also go into a CUDA graph). Compiling takes
        minutes (208 s cold on a 2-core CPU for 256 rows without gradients, 11 s from Inductor's
        disk cache); falls back to eager with a warning where compilation fails, as
        :meth:`compiled_step`."""
        fast = _guarded(torch.compile(self.whole_step, fullgraph=True, dynamic=False), self.whole_step, [])

        def step(state: TaskState, action: torch.Tensor, bad: torch.Tensor | None = None):
            if torch.is_grad_enabled() and (action.requires_grad or state.x.requires_grad):
                # one program for a window's first step (its state detached) and the rest, as
                # compiled_step's parts (the inputs' requires_grad are guarded)
                state = _with_grad_leaves(state)
            return fast(state, action, bad)

        return step

    def compiled_step(self):
        """``step`` with its two parts compiled by ``torch.compile``, same signature and results.

        The parts are :meth:`_advance` (one plant substep, or the powertrain's and the plant's,
        with the course projection and the sums: one graph reused for every substep) and
        :meth:`_finish` (the end checks, reward terms and observation), each with its backward
        when gradients are on. Between them, eager, only the substep loop and the gradient gate
        (:func:`finite_rows_grad`), which reads no tensor's value: the step makes no host sync.
        Compiling takes minutes on two cores, once per batch size, dtype and grad mode (with
        gradients, every input that may carry one enters as a leaf that does, so a window's
        first step and a step's first substep reuse the graphs the rest compiled); Inductor caches the
        result on disk (its FX-graph and AOTAutograd caches, on by default), so a second process
        pays seconds. Falls back to eager, with a warning, where compilation fails (a user's reward
        term that torch.compile cannot trace, say).
        """
        broken: list = []

        def guarded(fast, eager):
            return _guarded(fast, eager, broken)

        parts = (guarded(torch.compile(self._advance, dynamic=False), self._advance),
                 guarded(torch.compile(self._finish, dynamic=False), self._finish))

        def step(state: TaskState, action: torch.Tensor):
            return self.step(state, action, parts=parts)

        return step


# the state's fields that carry a gradient within a window (the plant's and powertrain's states,
# the course projection's arc length, the last action); the rest never do
_GRAD_FIELDS = ("x", "pt", "s", "prev_action")


def _grad_leaf(t: torch.Tensor) -> torch.Tensor:
    """``t`` if it requires grad, else its values as a leaf that does (a gradient into it goes
    nowhere: the values and every other gradient are the same)."""
    return t if t.requires_grad else t.detach().requires_grad_()


def _with_grad_leaves(state: TaskState) -> TaskState:
    """``state`` with each of ``_GRAD_FIELDS`` a :func:`_grad_leaf`: what the compiled steps pass
    their programs, so every step meets one ``requires_grad`` pattern."""
    return dataclasses.replace(state, **{k: _grad_leaf(getattr(state, k)) for k in _GRAD_FIELDS})


def _guarded(fast, eager, broken: list):
    """``fast`` (a ``torch.compile`` of ``eager``), and ``eager`` from the first failure on, with
    one ``RuntimeWarning``; ``broken`` is shared by the functions that fall back together."""
    import warnings

    def call(*args, **kwargs):
        if not broken:
            try:
                return fast(*args, **kwargs)
            except Exception as exc:  # pragma: no cover - platform dependent
                warnings.warn(f"torch.compile failed ({type(exc).__name__}: {str(exc)[:200]}); "
                              "using the eager step", RuntimeWarning)
                broken.append(exc)
        return eager(*args, **kwargs)
    return call
