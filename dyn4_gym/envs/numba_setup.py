"""The Numba engine's set-up: a :class:`TaskCore`'s task packed for the kernels
(dyn4_gym.engine.numba_task), by the model layer's layouts (dyn4_gym.model.packed).

This is the env side of the engine: it reads the env's config, reward terms and powertrain, so
the kernels import only the model, the plant and the ground (docs/engines.md).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from .. import _rng
from .._tree import tree_map
from ..engine.numba_plant import level_ground, pack_params
from ..engine.numba_powertrain import pack_powertrain
from ..engine import numba_task
from ..engine.numba_task import NumbaState
from ..engine.numba_ground import ROUGH_KERNEL, check_packed, checked_sampler, ground_kernel, is_built_in
from ..ground.terrain import RoughConfig
from ..model.constants import PATCH_EDGE
from ..model.packed import COURSE_CONSTS, GROUND_CONSTS, SN, STEP_CONSTS
from ..model.schema import TASK_CONSTS, TASK_FIELDS, row_shape
from ..model.task import OBS_INDEX, TERM_ORDER, beam_angles, patch_points, range_window
from ..plant.powertrain import powertrain_at
from .core import TaskCore
from .course import centre_line_course, course_points
from .rewards import REWARD_TERMS_BUILTIN

__all__ = ["NumbaTask"]

# the fields a reset writes besides the ground and the parameters (TaskState's, by name)
_COPIED = tuple(f.name for f in TASK_FIELDS if f.name not in ("terrain", "P"))


def _packed(names: tuple, **values) -> np.ndarray:
    """A float64 vector of ``values`` in the layout ``names`` (every name exactly once)."""
    if set(values) != set(names):
        raise KeyError(f"packed constants: expected {names}, got {tuple(values)}")
    return np.array([float(values[n]) for n in names], dtype=np.float64)


def _pack_rows(p, n: int) -> np.ndarray:
    """``(n, N_PARAMS)``: rows' own parameters (a Dyn4Params with ``(n,)``-leading fields), packed."""
    return np.stack([pack_params(tree_map(lambda t, i=i: t[i], p))[0] for i in range(n)])


class NumbaTask:
    """A :class:`TaskCore`'s task packed for the kernels: parameters, config constants, weights.

    Raises ``ValueError`` for what the kernels do not model (a terrain kind without a
    :class:`GroundKernel`). The rough kind draws its episodes in the kernel; any other kind draws
    them on a float64 torch twin of the task (the same streams, so the same episodes as the torch
    engine), copied into the rows, and steps in the kernel through its sampler.
    """

    def __init__(self, core):
        cfg = core.cfg
        g = cfg.ground
        self.kernel = ground_kernel(core.terrain_kind)
        if self.kernel is None:
            raise ValueError(f"the terrain kind {g.kind!r} has no ground for the kernels (TerrainKind.kernel, "
                             "docs/engines.md)")
        # the kernels with the kind's sampler bound (the rough kind's are the module's own; a
        # user's is checked for non-finite output, engine.numba_ground.checked_sampler)
        self.user_kind = None if is_built_in(self.kernel) else g.kind
        self.in_kernel = self.kernel is ROUGH_KERNEL and type(g) is RoughConfig
        # level rough ground (the Flat tasks') skips sampling: the same numbers (numba_plant.level_ground)
        sampler = (level_ground if g.level else None) if self.in_kernel else (
            None if self.kernel is ROUGH_KERNEL else checked_sampler(self.kernel))
        self.kernels = numba_task.kernels(sampler, self.kernel.cache)
        self.core = core
        self.P, self.grade, self.passive = pack_params(core.p)
        self.driver, self.n_action, self.n_obs = core.driver, core.n_action, len(core.obs_names)
        # the powertrain's scalars and its four maps, one by one (the constants block is flat)
        self.Q, (self.torque_map, self.loss_map, self.capacity_map, self.ratio_map) = pack_powertrain(core.pt)
        c = cfg.course
        self.hdt, self.n_sub = float(cfg.hdt), int(cfg.substeps)
        self.n_points = course_points(c)
        if self.in_kernel:
            self.shape = dict(n_hills=g.n_hills, n_patches=g.n_patches, n_bumps=g.n_bumps)
            self.patch_edge = PATCH_EDGE
            self.reset_ground = _packed(GROUND_CONSTS, **{n: getattr(g, n) for n in GROUND_CONSTS})
        else:
            self.torch_core = core if core.dtype == torch.float64 and core.device.type == "cpu" else TaskCore(
                dataclasses.replace(cfg, dtype="float64", device="cpu"))
            # one row's packed ground: the arrays' shapes, or the ground itself when shared
            self.ground_template = self._pack(
                self.torch_core.new_state(torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long)).terrain, 1)
        cap = math.inf if cfg.progress_cap is None else cfg.progress_cap * cfg.control_dt
        self.step_consts = _packed(STEP_CONSTS, spacing=c.spacing, half_width=c.half_width, goal_margin=c.goal_margin,
                                   roll_limit=cfg.roll_limit, episode_steps=cfg.episode_steps, cap=cap,
                                   penalty=core.weights["termination"],
                                   budget=cfg.budget, pace=cfg.pace)
        i0, frac, s0 = core.start_index()  # the start pose (TaskCore.new_state)
        self.reset_course = _packed(COURSE_CONSTS, spacing=c.spacing, lat_accel=c.lat_accel,
                                    wavelength_min=c.wavelength_min, wavelength_max=c.wavelength_max,
                                    lead_in=c.lead_in, half_width=c.half_width, n_waves=c.n_waves, i0=i0, frac=frac,
                                    s0=s0, start_offset=cfg.start_offset, start_heading=cfg.start_heading,
                                    given_line=c.centre_line is not None)
        # a given centre line, resampled as the torch engine does (course.centre_line_course)
        if c.centre_line is not None:
            self.line_xy, self.line_heading = (np.ascontiguousarray(a) for a in centre_line_course(c.centre_line,
                                                                                                   c.spacing))
        else:
            self.line_xy, self.line_heading = np.zeros((0, 2)), np.zeros(0)
        self.vt = float(cfg.target_speed)
        self.v0 = float(cfg.target_speed if cfg.start_speed is None else cfg.start_speed)
        self.ahead = np.asarray(c.preview, dtype=np.float64)
        sn = cfg.sensors
        self.scales = np.array(core.obs_scales())
        self.cols = np.array([OBS_INDEX[n] for n in core.obs_names[:core.n_fixed]], dtype=np.int64)  # what the kernel observes
        # the sensors (model.packed.SN): the header, the beams' angles, the patch points' x then y
        pts = np.asarray(patch_points(sn.patch_rows, sn.patch_cols, sn.patch_start, sn.patch_length, sn.patch_width),
                         dtype=np.float64).reshape(-1, 2)
        header = np.zeros(SN.DATA)
        header[SN.BEAMS], header[SN.RANGE], header[SN.WINDOW] = sn.beams, sn.max_range, range_window(sn.max_range,
                                                                                                      c.spacing)
        header[SN.POINTS] = len(pts)
        self.widths = np.ascontiguousarray(core.widths)  # (N, 2) the corridor's right and left of each point
        self.sense = np.concatenate((header, beam_angles(sn.beams, sn.fan), pts[:, 0], pts[:, 1]))
        # every row starts at the same speed, so in the same powertrain state
        self.pt0 = powertrain_at(core.pt, torch.tensor(self.v0, dtype=torch.float64)).numpy()
        # the kernel's built-in terms, weighted; a name the user re-registered is evaluated in
        # torch after the kernel (with the other custom terms), so its built-in weight here is 0
        self.weights = np.array([core.weights[n] if core.terms.get(n) is REWARD_TERMS_BUILTIN[n] else 0.0
                                 for n in TERM_ORDER])
        self.custom = {n: t for n, t in core.terms.items() if REWARD_TERMS_BUILTIN.get(n) is not t}
        if not self.in_kernel:  # drawn in torch (reset): the kernel's reset constants unused, typed alike
            self.reset_ground = np.zeros(len(GROUND_CONSTS))
        # the constants bound once into the kernels' block (model.schema.TASK_CONSTS; arrays the
        # task changes later, step_consts' episode limit, are changed in place)
        self.block = tuple(getattr(self, n) for n in TASK_CONSTS)

    def empty_state(self, B: int) -> NumbaState:
        z = np.zeros
        if self.in_kernel:
            sh = self.shape
            terrain = tuple(z((B, sh[k])) for k in ("n_hills",) * 4) + (z(B),) + tuple(
                z((B, sh["n_patches"])) for _ in range(4)) + tuple(z((B, sh["n_bumps"])) for _ in range(4))
            terrain += (self.patch_edge,)
        elif self.kernel.shared:
            terrain = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in self.ground_template)
        else:
            terrain = tuple(z((B,) + a.shape[1:]) if isinstance(a, np.ndarray) else a for a in self.ground_template)
        # every other field from the declared schema (model.schema.TASK_FIELDS), zeros
        sizes = {"n_points": self.n_points, "n_action": self.n_action}
        arrays = {f.name: z((B,) + row_shape(f, sizes), dtype=f.dtype) for f in TASK_FIELDS if f.shape is not None}
        arrays["P"][:] = self.P  # the task's parameters on every row (vehicle_ranges: the reset's own)
        return NumbaState(terrain=terrain, **arrays)

    def reset(self, st: NumbaState, rows: np.ndarray, keys: np.ndarray, episodes: np.ndarray) -> None:
        """New episodes on ``rows`` of ``st``, in place: the one way the Numba engine resets (its
        first reset, a vector env's autoreset, a masked reset). With ``vehicle_ranges`` each row's
        vehicle is drawn from its stream first (TaskCore.reset_rows's order)."""
        keys, episodes = np.asarray(keys), np.asarray(episodes)
        if not self.in_kernel:
            self._reset_in_torch(st, rows, keys, episodes)
            return
        params = self.row_params(keys, episodes) if self.core.ranges and len(keys) else None
        numba_task.reset_rows(self, st, rows, keys, episodes, params)

    def _reset_in_torch(self, st: NumbaState, rows, keys: np.ndarray, episodes: np.ndarray) -> None:
        """A kind drawn in torch: the float64 twin's new episodes, copied into ``rows``."""
        rows, keys, episodes = numba_task.check_reset(rows, keys, episodes, st.batch_size)
        if rows.size == 0:
            return
        ts = self.torch_core.new_state(torch.as_tensor(keys, dtype=torch.long),
                                       torch.as_tensor(episodes, dtype=torch.long))
        for name in _COPIED:
            getattr(st, name)[rows] = getattr(ts, name).numpy()
        if ts.p is not None:  # vehicle_ranges: each row's own parameters
            st.P[rows] = _pack_rows(ts.p, rows.size)
        if not self.kernel.shared:
            for a, new in zip(st.terrain, self._pack(ts.terrain, rows.size)):
                if isinstance(a, np.ndarray):
                    a[rows] = new

    def _pack(self, ground, rows: int) -> tuple:
        """The kind's packed ground of ``rows`` rows; a user kind's checked (rows, dtype, finite)."""
        packed = self.kernel.pack(ground, rows)
        return packed if self.user_kind is None else check_packed(self.user_kind, packed, rows, self.kernel.shared)

    def row_params(self, keys: np.ndarray, episodes: np.ndarray) -> np.ndarray:
        """``(n, len(P))``: the packed parameters of rows reset with these streams, drawn as
        ``TaskCore.row_params`` draws them (float64 uniforms, the stream's last draws)."""
        n_course, n_ground, n_vehicle = self.core.uniform_counts()
        u = _rng.uniform(torch.as_tensor(keys), torch.as_tensor(episodes), n_course + n_ground + n_vehicle,
                         dtype=torch.float64)
        return _pack_rows(self.core.row_params(u[:, n_course + n_ground:]), len(keys))
