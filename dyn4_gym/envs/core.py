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

import math
from dataclasses import dataclass, fields

import torch

from .. import _rng
from ..ground import Terrain
from ..plant import HUMVEE, dyn4_params, dyn4_rest, dyn4_step
from ..plant.corners import forces_at, wheel_points
from .config import EnvConfig
from .course import make_courses, preview_points, project, wrap_angle
from .rewards import StepContext, resolve_terms

__all__ = ["TaskState", "TaskCore", "OBS_NAMES", "BOOK_LINES"]

BOOK_LINES = ("dH", "supplied", "dissipated", "tire", "damper", "drag", "lever", "grade", "ground", "limiter", "residual")

# (name, unit, scale): observation entry = value / scale, then clipped to [-10, 10]
OBS_TABLE = (
    ("vx", "m/s", 10.0), ("vy", "m/s", 2.0), ("yaw_rate", "rad/s", 1.0),
    ("roll", "rad", 0.1), ("pitch", "rad", 0.05), ("roll_rate", "rad/s", 0.5), ("pitch_rate", "rad/s", 0.5),
    ("steer", "rad", "delta_max"), ("drive", "m/s^2", 5.0),
    ("load_FL", "-", 1.0), ("load_FR", "-", 1.0), ("load_RL", "-", 1.0), ("load_RR", "-", 1.0),
    ("mu_FL", "-", 1.0), ("mu_FR", "-", 1.0), ("mu_RL", "-", 1.0), ("mu_RR", "-", 1.0),
    ("cross_track", "m", "half_width"), ("heading_error", "rad", 0.5), ("target_speed", "m/s", 10.0),
) + tuple((f"preview{k}_{c}", "m", 20.0) for k in range(5) for c in ("x", "y"))
OBS_NAMES = tuple(o[0] for o in OBS_TABLE)
OBS_CLIP = 10.0


@dataclass(frozen=True)
class TaskState:
    """Everything that evolves, per row. Leading dimension ``B`` on every tensor."""

    x: torch.Tensor  # (B, 14) plant state
    terrain: Terrain
    course_xy: torch.Tensor  # (B, N, 2)
    course_heading: torch.Tensor  # (B, N)
    idx: torch.Tensor  # (B,) long, course segment of the last projection
    s: torch.Tensor  # (B,) [m] arc length of the last projection
    t: torch.Tensor  # (B,) long, steps in this episode
    prev_action: torch.Tensor  # (B, 2)
    target_speed: torch.Tensor  # (B,)
    key: torch.Tensor  # (B,) long, the row's random stream
    episode: torch.Tensor  # (B,) long, episodes drawn on that stream

    def detach(self) -> "TaskState":
        """The same state with every tensor cut from the autograd graph."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = v.detach() if isinstance(v, (torch.Tensor, Terrain)) else v
        return TaskState(**out)

    @property
    def batch_size(self) -> int:
        return self.x.shape[0]


class TaskCore:
    """The batched task over a configuration (see :mod:`dyn4_gym.envs.config`)."""

    def __init__(self, cfg: EnvConfig):
        cfg.validate()
        self.cfg = cfg
        self.dtype = getattr(torch, cfg.dtype)
        self.device = torch.device(cfg.device)
        self.p = dyn4_params(HUMVEE, dtype=self.dtype, device=self.device, **cfg.vehicle)
        self.terms, self.weights = resolve_terms(cfg.reward_weights, cfg.reward_terms)
        self.n_sub = cfg.substeps
        self.hdt = cfg.hdt
        self._ahead = torch.tensor(cfg.course.preview, dtype=self.dtype, device=self.device)
        p = self.p
        self._scales = torch.tensor(
            [float(p.delta_max) if sc == "delta_max" else (cfg.course.half_width if sc == "half_width" else sc)
             for _, _, sc in OBS_TABLE], dtype=self.dtype, device=self.device)
        self._weight = p.m * p.g

    # ------------------------------------------------------------------ resets
    def _draws(self, key, episode):
        c, g = self.cfg.course, self.cfg.ground
        counts = dict(course=3 * c.n_waves, hills=4 * g.n_hills, patches=4 * g.n_patches, bumps=4 * g.n_bumps)
        u = _rng.uniform(key, episode, sum(counts.values()), dtype=self.dtype)
        out, i = {}, 0
        for name, n in counts.items():
            out[name] = u[:, i:i + n]
            i += n
        return out

    def new_state(self, key: torch.Tensor, episode: torch.Tensor) -> TaskState:
        """Fresh episodes for rows with streams ``key (B,)`` at ``episode (B,)``."""
        c, g = self.cfg.course, self.cfg.ground
        key = key.to(self.device)
        episode = episode.to(self.device)
        B = key.shape[0]
        dt, dev = self.dtype, self.device
        d = self._draws(key, episode)
        v_t = torch.full((B,), self.cfg.target_speed, dtype=dt, device=dev)
        xy, heading = make_courses(d["course"], c, v_t)
        n = xy.shape[1]
        # hills: plane waves, random direction, wavelength, phase
        h = d["hills"].reshape(B, g.n_hills, 4)
        lam = g.hills_wavelength_min + (g.hills_wavelength_max - g.hills_wavelength_min) * h[..., 0]
        ang = 2 * math.pi * h[..., 1]
        amp = g.hills_amplitude / max(g.n_hills, 1) * (0.5 + h[..., 2])
        # patches and bumps sit on the course at drawn arc lengths
        def on_course(frac, lo):
            j = (lo / c.spacing + frac * (n - 1 - lo / c.spacing)).long().clamp(0, n - 1)
            pts = torch.gather(xy, 1, j.unsqueeze(-1).expand(*j.shape, 2))
            th = torch.gather(heading, 1, j)
            return pts, th
        pt = d["patches"].reshape(B, g.n_patches, 4)
        ppts, pth = on_course(pt[..., 0], 0.0)
        poff = (pt[..., 1] - 0.5) * 2 * c.half_width
        bt = d["bumps"].reshape(B, g.n_bumps, 4)
        bpts, bth = on_course(bt[..., 0], c.lead_in)
        boff = (bt[..., 1] - 0.5) * 2.0
        terrain = Terrain(
            wave_kx=2 * math.pi / lam * torch.cos(ang), wave_ky=2 * math.pi / lam * torch.sin(ang),
            wave_amp=amp, wave_phase=2 * math.pi * h[..., 3],
            base_mu=torch.full((B,), g.base_mu, dtype=dt, device=dev),
            patch_x=ppts[..., 0] - poff * torch.sin(pth), patch_y=ppts[..., 1] + poff * torch.cos(pth),
            patch_r=g.patch_radius_min + (g.patch_radius_max - g.patch_radius_min) * pt[..., 2],
            patch_mu=g.patch_mu_min + (g.patch_mu_max - g.patch_mu_min) * pt[..., 3],
            bump_x=bpts[..., 0] - boff * torch.sin(bth), bump_y=bpts[..., 1] + boff * torch.cos(bth),
            bump_h=g.bump_height_min + (g.bump_height_max - g.bump_height_min) * bt[..., 2],
            bump_r=torch.full((B, g.n_bumps), g.bump_radius, dtype=dt, device=dev),
        )
        x = dyn4_rest(self.p, terrain, (B,))
        v0 = self.cfg.target_speed if self.cfg.start_speed is None else self.cfg.start_speed
        x = torch.cat((x[:, :3], torch.full((B, 1), v0, dtype=dt, device=dev), x[:, 4:]), -1)
        zeros_l = torch.zeros(B, dtype=torch.long, device=dev)
        return TaskState(x=x, terrain=terrain, course_xy=xy, course_heading=heading, idx=zeros_l,
                         s=torch.zeros(B, dtype=dt, device=dev), t=zeros_l,
                         prev_action=torch.zeros(B, 2, dtype=dt, device=dev), target_speed=v_t, key=key,
                         episode=episode)

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
        out = {}
        for f in fields(state):
            a, b = getattr(state, f.name), getattr(sub, f.name)
            if isinstance(a, Terrain):
                out[f.name] = Terrain(**{g.name: (getattr(a, g.name).index_copy(0, rows, getattr(b, g.name))
                                                  if isinstance(getattr(a, g.name), torch.Tensor) else getattr(a, g.name))
                                         for g in fields(a)})
            elif f.name == "key":
                out[f.name] = key
            elif f.name == "episode":
                out[f.name] = episode
            else:
                out[f.name] = a.index_copy(0, rows, b)
        return TaskState(**out)

    @staticmethod
    def select(mask: torch.Tensor, new: TaskState, old: TaskState) -> TaskState:
        """Rows of ``new`` where ``mask (B,)``, of ``old`` elsewhere (a select, never in place)."""
        out = {}
        for f in fields(old):
            a, b = getattr(old, f.name), getattr(new, f.name)
            if isinstance(a, Terrain):
                out[f.name] = a.select(mask, b)
            else:
                m = mask.reshape(-1, *([1] * (a.ndim - 1)))
                out[f.name] = torch.where(m, b, a)
        return TaskState(**out)

    # ------------------------------------------------------------------ observation
    def observe(self, state: TaskState) -> torch.Tensor:
        """The observation ``(B, 30)`` (table in ``OBS_TABLE``): value / scale, clipped to +-10; NaN -> 0."""
        x, p = state.x, self.p
        f = forces_at(x, x[:, 12], x[:, 13], p, state.terrain)
        _, _, e, th = project(state.course_xy, state.course_heading, state.idx, x[:, :2], self.cfg.course.spacing)
        pts = preview_points(state.course_xy, state.s, self._ahead, self.cfg.course.spacing)
        rel = pts - x[:, None, :2]
        c, s = torch.cos(x[:, 2:3]), torch.sin(x[:, 2:3])
        bx, by = c * rel[..., 0] + s * rel[..., 1], -s * rel[..., 0] + c * rel[..., 1]
        raw = torch.cat((x[:, [3, 4, 5, 7, 8, 10, 11]], x[:, 12:14], f.Fz / p.Fz0 - 1.0, f.mu_ground,
                         e[:, None], wrap_angle(x[:, 2] - th)[:, None], state.target_speed[:, None],
                         torch.stack((bx, by), -1).reshape(-1, 10)), -1)
        # a non-finite plant state (flagged in info["nonfinite"]) never leaks a NaN observation
        raw = torch.nan_to_num(raw / self._scales, nan=0.0, posinf=OBS_CLIP, neginf=-OBS_CLIP)
        return raw.clamp(-OBS_CLIP, OBS_CLIP)

    # ------------------------------------------------------------------ step
    def action_to_input(self, action: torch.Tensor) -> torch.Tensor:
        """``[-1, 1]^2`` (clipped) -> plant input ``(delta_cmd [rad], a_cmd [m/s^2])``."""
        a = action.clamp(-1.0, 1.0)
        p = self.p
        lon = torch.where(a[:, 1] >= 0, a[:, 1] * p.a_drive, a[:, 1] * p.a_brake)
        return torch.stack((a[:, 0] * p.delta_max, lon), -1)

    def step(self, state: TaskState, action: torch.Tensor):
        cfg, p = self.cfg, self.p
        a = action.to(self.dtype).clamp(-1.0, 1.0)
        u = self.action_to_input(a)
        x, idx, s_prev = state.x, state.idx, state.s
        B = x.shape[0]
        progress = torch.zeros(B, dtype=self.dtype, device=self.device)
        books = {k: torch.zeros_like(progress) for k in BOOK_LINES}
        out = torch.zeros(B, dtype=torch.bool, device=self.device)
        rolled, nonfinite = out.clone(), out.clone()
        for _ in range(self.n_sub):
            x_new, b = dyn4_step(x, u, p, state.terrain, self.hdt, books=True)
            finite = torch.isfinite(x_new).all(-1)
            nonfinite = nonfinite | ~finite
            x = torch.where(finite[:, None], x_new, x)
            idx, s_new, e, th = project(state.course_xy, state.course_heading, idx, x[:, :2], cfg.course.spacing)
            progress = progress + (s_new - s_prev)
            s_prev = s_new
            out = out | (e.abs() > cfg.course.half_width)
            rolled = rolled | (x[:, 7].abs() > cfg.roll_limit)
            for k in BOOK_LINES:
                v = getattr(b, k)
                books[k] = books[k] + torch.where(finite, v, torch.zeros_like(v))
        length = (state.course_xy.shape[1] - 1) * cfg.course.spacing
        success = s_prev >= length - cfg.course.goal_margin
        failed = out | rolled | nonfinite
        terminated = failed | (success & ~failed)
        t = state.t + 1
        truncated = (t >= cfg.episode_steps) & ~terminated
        heading_error = wrap_angle(x[:, 2] - th)
        ctx = StepContext(progress=progress, speed=x[:, 3], target_speed=state.target_speed, cross_track=e,
                          half_width=cfg.course.half_width, heading_error=heading_error, books=books,
                          weight=self._weight, action=a, prev_action=state.prev_action, roll_rate=x[:, 10],
                          pitch_rate=x[:, 11], failed=failed, success=success & ~failed)
        terms = {name: term(ctx) for name, term in self.terms.items()}
        reward = sum(self.weights[name] * v for name, v in terms.items())
        new = TaskState(x=x, terrain=state.terrain, course_xy=state.course_xy, course_heading=state.course_heading,
                        idx=idx, s=s_prev, t=t, prev_action=a, target_speed=state.target_speed, key=state.key,
                        episode=state.episode)
        info = dict(reward_terms=terms, books=books, success=success & ~failed, out_of_corridor=out,
                    rollover=rolled, nonfinite=nonfinite, progress=progress, s=s_prev, cross_track=e)
        return new, self.observe(new), reward, terminated, truncated, info

    def step_fn(self):
        """The step the numpy faces use: :meth:`compiled_step` if the config asks for it."""
        return self.compiled_step() if self.cfg.compile else self.step

    def compiled_step(self):
        """``step`` compiled with ``torch.compile`` (one graph for all substeps), same signature.

        The state is passed as a flat tuple of tensors so the compiled graph sees tensors only.
        Compiling takes minutes on a small CPU and then runs the 4096-row batch about 4x and a
        single row about 30x faster than eager (``benchmarks/env.py``); each new batch size
        compiles again. Falls back to eager, with a warning, where compilation fails.
        """
        import warnings

        names = [f.name for f in fields(TaskState) if f.name != "terrain"]
        tnames = [f.name for f in fields(Terrain) if f.name != "patch_edge"]

        def unflat(ts):
            k = len(names)
            return TaskState(terrain=Terrain(**dict(zip(tnames, ts[k:]))), **dict(zip(names, ts[:k])))

        def flat_step(action, *ts):
            st, obs, r, te, tr, info = self.step(unflat(ts), action)
            return tuple(getattr(st, n) for n in names) + tuple(getattr(st.terrain, n) for n in tnames), obs, r, te, tr, info

        fast = torch.compile(flat_step, dynamic=False)

        def step(state: TaskState, action: torch.Tensor):
            ts = tuple(getattr(state, n) for n in names) + tuple(getattr(state.terrain, n) for n in tnames)
            try:
                flat, obs, r, te, tr, info = fast(action, *ts)
            except Exception as exc:  # pragma: no cover - platform dependent
                warnings.warn(f"torch.compile failed ({type(exc).__name__}); using the eager step", RuntimeWarning)
                return self.step(state, action)
            return unflat(flat), obs, r, te, tr, info

        return step

    @property
    def course_length(self) -> float:
        return (int(round(self.cfg.course.length / self.cfg.course.spacing))) * self.cfg.course.spacing

    def wheel_points(self, state: TaskState) -> torch.Tensor:
        return wheel_points(state.x[:, 0], state.x[:, 1], state.x[:, 2], self.p)
