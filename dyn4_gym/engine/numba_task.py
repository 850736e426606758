"""The whole env step in Numba: the CPU engine of the numpy faces (docs/env.md, "Engines").

The same task as :class:`dyn4_gym.envs.core.TaskCore` (the torch reference), row by row, in
float64: resets (the row's counter-based stream, its course, its rough terrain, the settled rest
state), the plant's substeps with the books (:func:`numba_plant.substep_row`), the course
projection and the progress cap, corridor and roll checks at every substep, the built-in reward
terms and the non-finite guard, and the observation. One kernel call per env step, parallel over
rows (``prange``) from ``TASK_PARALLEL_FROM`` rows; per-row scratch is allocated once per call, never
per substep.

The state is a :class:`NumbaState` of numpy arrays, stepped in place; every layout is the model
layer's (dyn4_gym.model), and the set-up that packs a task for these kernels lives on the env side
(dyn4_gym.envs.numba_setup). tests/test_engine_env.py holds this engine to the torch one over
whole episodes with resets, tests/test_engine_stages.py stage by stage (docs/engines.md).

Nothing compiles at import; the first call compiles (cached on disk by Numba, so a second
process loads it).
"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ..model.books import BOOK, N_BOOKS, N_PT_LINES, PTB
from ..model.constants import DRAW_SALT, HASH_MASK, HASH_MUL, OBS_CLIP, RPM, STREAM_SALTS
from ..model.packed import (CC, GC, PK, SC, SN, TK_BASE_MU, TK_BUMP_H, TK_BUMP_R, TK_BUMP_X, TK_BUMP_Y, TK_PATCH_MU,
                            TK_PATCH_R, TK_PATCH_X, TK_PATCH_Y, TK_WAVE_AMP, TK_WAVE_KX, TK_WAVE_KY, TK_WAVE_PHASE)
from ..model.schema import (BLOCK_FIELDS, K_AHEAD, K_CAPACITY_MAP, K_COLS, K_DRIVER, K_GRADE, K_HDT, K_LINE_HEADING,
                            K_LINE_XY, K_LOSS_MAP, K_N_SUB, K_PASSIVE, K_PT0, K_Q, K_RATIO_MAP, K_RESET_COURSE,
                            K_RESET_GROUND, K_SCALES, K_SENSE, K_STEP, K_TORQUE_MAP, K_V0, K_VT, K_WEIGHTS, K_WIDTHS,
                            ST_COURSE_HEADING, ST_COURSE_XY, ST_EPISODE, ST_IDX, ST_KEY, ST_P, ST_PREV, ST_PT, ST_S,
                            ST_T, ST_TARGET_SPEED, ST_X)
from ..model.state import DYN4 as S, N_DYN4, N_PT, PT, XY
from ..model.task import (ACT, FIG, FLAG, FLAG_COLUMNS, INFO, INFO_COLUMNS, N_FIG, N_PREVIEW, OBS, OBS_INDEX, TERM,
                          TERM_ORDER)
from .numba_plant import (N_DW, N_SCRATCH, SD, W_, Substep, advance_ground, ground_point, ground_row, ground_under_row,
                          level_ground, loads_row, new_data, rebuild, rest_row, sampler_tag, serial_and_parallel,
                          substep_row)
from .numba_powertrain import N_PF, drive_substep_row, with_sampler

__all__ = ["NumbaState", "reset_rows", "observe", "step", "step_bound", "guard_rows"]

_NT = len(TERM_ORDER)
N_OBS_ALL = len(OBS_INDEX)  # every entry a task can observe (model.task.OBS_TABLE_ALL)
_MASK = HASH_MASK
_MUL0, _MUL1 = HASH_MUL  # module constants: Numba folds them into the kernels
_SALT0, _SALT1 = STREAM_SALTS
# slice bounds as plain ints: Numba's parallel array analysis takes only integer slice bounds
_TERMS0, _BOOKS0, _PT0 = int(INFO.TERMS), int(INFO.BOOKS), int(INFO.PT_LINES)


@dataclass
class NumbaState:
    """The batch's state as numpy arrays (the fields of :class:`TaskState`), stepped in place."""

    x: np.ndarray  # (B, 14) float64
    terrain: tuple  # model.packed.TERRAIN_FIELDS arrays, (B,) or (B, K), then the patch edge [m]
    course_xy: np.ndarray  # (B, N, 2)
    course_heading: np.ndarray  # (B, N)
    idx: np.ndarray  # (B,) int64
    s: np.ndarray  # (B,)
    t: np.ndarray  # (B,) int64
    prev_action: np.ndarray  # (B, 2), (B, 3) for action="driver"
    target_speed: np.ndarray  # (B,)
    key: np.ndarray  # (B,) int64
    episode: np.ndarray  # (B,) int64
    pt: np.ndarray  # (B, 3) powertrain state (model.state.PT)
    P: np.ndarray  # (B, N_PARAMS) each row's packed parameters (numba_plant.pack_params; model.packed.PK)

    @property
    def batch_size(self) -> int:
        return self.x.shape[0]

    def block(self) -> tuple:
        """The state block the kernels take: the fields in model.schema.BLOCK_FIELDS' order (all but
        the ground, ``terrain``, which the kernels take as its own tuple)."""
        return tuple(getattr(self, n) for n in BLOCK_FIELDS)

    def copy(self) -> "NumbaState":
        return NumbaState(**{k: (tuple(a.copy() if isinstance(a, np.ndarray) else a for a in v) if k == "terrain"
                                 else v.copy()) for k, v in self.__dict__.items()})


# ------------------------------------------------------------------------------------ random streams
@njit(cache=True, error_model="numpy", inline="always")
def _hash32(x):
    # _rng.hash32 (lowbias32); int64 products wrap, and only their low 32 bits are kept
    x = x & _MASK
    x = x ^ (x >> 16)
    x = (x * _MUL0) & _MASK
    x = x ^ (x >> 15)
    x = (x * _MUL1) & _MASK
    return x ^ (x >> 16)


@njit(cache=True, error_model="numpy")
def _uniforms(key, episode, out):
    """_rng.uniform for one row: ``out[:]`` in (0, 1) from the stream ``(key, episode)``."""
    w0, w1, w2, w3 = key & _MASK, (key >> 32) & _MASK, episode & _MASK, (episode >> 32) & _MASK
    a = _hash32(_hash32(_hash32(_hash32(w0 ^ _SALT0) ^ w1) ^ w2) ^ w3)
    b = _hash32(_hash32(_hash32(_hash32(w0 ^ _SALT1) ^ w1) ^ w2) ^ w3)
    for i in range(out.shape[0]):
        x1 = _hash32(_hash32(a + i) ^ b)
        x2 = _hash32(_hash32(b + i + DRAW_SALT) ^ a)
        bits = (x1 >> 5) * (1 << 26) + (x2 >> 6)
        out[i] = (float(bits) + 0.5) / float(1 << 53)


# ------------------------------------------------------------------------------------------ resets
@njit(cache=True, error_model="numpy")
def _on_course(cxy, ch, b, frac, lo, spacing, offset):
    """DrawContext.on_course for one point of row ``b``."""
    n = cxy.shape[1]
    j = int(lo / spacing + frac * (n - 1 - lo / spacing))
    j = min(max(j, 0), n - 1)
    th = ch[b, j]
    return cxy[b, j, XY.X] - offset * math.sin(th), cxy[b, j, XY.Y] + offset * math.cos(th)


def _reset_rows_py(rows, keys, episodes, K, ST, T):
    """New episodes on ``rows`` of the state block ``ST`` and its ground ``T``: course (C,
    model.packed.CC; the given line ``LXY``, ``LH`` where ``C[CC.GIVEN_LINE]``), rough terrain (G,
    model.packed.GC), settled rest state at speed ``v0``; the task's constants ``K``."""
    PP, X, CXY, CH, IDX, SS, TT = ST[ST_P], ST[ST_X], ST[ST_COURSE_XY], ST[ST_COURSE_HEADING], ST[ST_IDX], ST[ST_S], \
        ST[ST_T]
    PREV, VT, KEY, EP, PTS = ST[ST_PREV], ST[ST_TARGET_SPEED], ST[ST_KEY], ST[ST_EPISODE], ST[ST_PT]
    C, LXY, LH, G = K[K_RESET_COURSE], K[K_LINE_XY], K[K_LINE_HEADING], K[K_RESET_GROUND]
    v0, vt, pt0 = K[K_V0], K[K_VT], K[K_PT0]
    kx, ky, amp, ph = T[TK_WAVE_KX], T[TK_WAVE_KY], T[TK_WAVE_AMP], T[TK_WAVE_PHASE]
    px, py, pr, pmu = T[TK_PATCH_X], T[TK_PATCH_Y], T[TK_PATCH_R], T[TK_PATCH_MU]
    bx, by, bh, br = T[TK_BUMP_X], T[TK_BUMP_Y], T[TK_BUMP_H], T[TK_BUMP_R]
    base_mu = T[TK_BASE_MU]
    spacing, lat_accel, wl_min, wl_max = C[CC.SPACING], C[CC.LAT_ACCEL], C[CC.WAVELENGTH_MIN], C[CC.WAVELENGTH_MAX]
    lead_in, half_width = C[CC.LEAD_IN], C[CC.HALF_WIDTH]
    nw = int(C[CC.N_WAVES])
    n = CXY.shape[1]
    nh, npch, nb = kx.shape[1], px.shape[1], bx.shape[1]
    nc = 3 * nw
    nu = nc + 4 * (nh + npch + nb)
    two_pi = 2 * math.pi
    for r in prange(rows.shape[0]):
        b = rows[r]
        u = np.empty(nu)
        _uniforms(keys[r], episodes[r], u)
        # course (course.make_courses)
        km = lat_accel / (vt * vt)
        asum = 0.0
        for k in range(nw):
            asum += 0.5 + 0.5 * u[k]
        kap = np.empty(n)
        for i in range(n):
            s = i * spacing
            w = 0.0
            for k in range(nw):
                lam = wl_min + (wl_max - wl_min) * u[nw + k]
                w += (0.5 + 0.5 * u[k]) * math.sin(two_pi * s / lam + two_pi * u[2 * nw + k])
            f = 1.0 if lead_in <= 0 else min(max(s / lead_in, 0.0), 1.0)
            f = f * f * (3 - 2 * f)
            kap[i] = km * w / asum * f
        CH[b, 0] = 0.0
        CXY[b, 0, XY.X] = 0.0
        CXY[b, 0, XY.Y] = 0.0
        for i in range(1, n):
            CH[b, i] = CH[b, i - 1] + 0.5 * (kap[i] + kap[i - 1]) * spacing
            mid = 0.5 * (CH[b, i] + CH[b, i - 1])
            CXY[b, i, XY.X] = CXY[b, i - 1, XY.X] + math.cos(mid) * spacing
            CXY[b, i, XY.Y] = CXY[b, i - 1, XY.Y] + math.sin(mid) * spacing
        if C[CC.GIVEN_LINE] != 0.0:  # a given centre line replaces the drawn one (its uniforms still drawn)
            for i in range(n):
                CXY[b, i, XY.X], CXY[b, i, XY.Y], CH[b, i] = LXY[i, XY.X], LXY[i, XY.Y], LH[i]
        # terrain (terrain.draw_rough)
        o = nc
        for k in range(nh):
            lam = G[GC.HILLS_WAVELENGTH_MIN] + (G[GC.HILLS_WAVELENGTH_MAX] - G[GC.HILLS_WAVELENGTH_MIN]) * u[o + 4 * k]
            ang = two_pi * u[o + 4 * k + 1]
            kx[b, k] = two_pi / lam * math.cos(ang)
            ky[b, k] = two_pi / lam * math.sin(ang)
            amp[b, k] = G[GC.HILLS_AMPLITUDE] / max(nh, 1) * (0.5 + u[o + 4 * k + 2])
            ph[b, k] = two_pi * u[o + 4 * k + 3]
        base_mu[b] = G[GC.BASE_MU]
        o = nc + 4 * nh
        for j in range(npch):
            px[b, j], py[b, j] = _on_course(CXY, CH, b, u[o + 4 * j], 0.0, spacing,
                                            (u[o + 4 * j + 1] - 0.5) * 2 * half_width)
            pr[b, j] = G[GC.PATCH_RADIUS_MIN] + (G[GC.PATCH_RADIUS_MAX] - G[GC.PATCH_RADIUS_MIN]) * u[o + 4 * j + 2]
            pmu[b, j] = G[GC.PATCH_MU_MIN] + (G[GC.PATCH_MU_MAX] - G[GC.PATCH_MU_MIN]) * u[o + 4 * j + 3]
        o = nc + 4 * (nh + npch)
        for q in range(nb):
            bx[b, q], by[b, q] = _on_course(CXY, CH, b, u[o + 4 * q], lead_in, spacing, (u[o + 4 * q + 1] - 0.5) * 2.0)
            bh[b, q] = G[GC.BUMP_HEIGHT_MIN] + (G[GC.BUMP_HEIGHT_MAX] - G[GC.BUMP_HEIGHT_MIN]) * u[o + 4 * q + 2]
            br[b, q] = G[GC.BUMP_RADIUS]
        # the start pose (TaskCore.new_state): on segment i0 of the course, moved off it
        i0, frac, s0 = int(C[CC.I0]), C[CC.FRAC], C[CC.S0]
        off, dpsi = C[CC.START_OFFSET], C[CC.START_HEADING]
        posx = CXY[b, i0, XY.X] + frac * (CXY[b, i0 + 1, XY.X] - CXY[b, i0, XY.X])
        posy = CXY[b, i0, XY.Y] + frac * (CXY[b, i0 + 1, XY.Y] - CXY[b, i0, XY.Y])
        th = CH[b, i0] + frac * (CH[b, i0 + 1] - CH[b, i0])
        X0, Y0, psi0 = posx - off * math.sin(th), posy + off * math.cos(th), th + dpsi
        rest_row(b, X0, Y0, psi0, PP[b], T, X[b])  # settled rest state there (dyn4.dyn4_rest)
        X[b, S.VX] = v0  # then the start speed
        IDX[b] = i0
        SS[b] = s0
        TT[b] = 0
        for i in range(PREV.shape[1]):
            PREV[b, i] = 0.0
        for i in range(N_PT):
            PTS[b, i] = pt0[i]
        VT[b] = vt
        KEY[b] = keys[r]
        EP[b] = episodes[r]


# ------------------------------------------------------------------------------- course and observe
@njit(cache=True, error_model="numpy", inline="always")
def _project(cxy, ch, b, idx, px, py, spacing):
    """course.project for row ``b``: ``(j, s, e, course heading)`` near segment ``idx``."""
    n = cxy.shape[1]
    best = math.inf
    j = min(max(idx - 2, 0), n - 2)
    for off in range(-2, 7):
        c = min(max(idx + off, 0), n - 2)
        p0x, p0y = cxy[b, c, XY.X], cxy[b, c, XY.Y]
        dx, dy = cxy[b, c + 1, XY.X] - p0x, cxy[b, c + 1, XY.Y] - p0y
        rx, ry = px - p0x, py - p0y
        lam = min(max((rx * dx + ry * dy) / (dx * dx + dy * dy), 0.0), 1.0)
        ex, ey = rx - lam * dx, ry - lam * dy
        d2 = ex * ex + ey * ey
        if d2 < best:  # the first minimum, as argmin
            best = d2
            j = c
    p0x, p0y = cxy[b, j, XY.X], cxy[b, j, XY.Y]
    dx, dy = cxy[b, j + 1, XY.X] - p0x, cxy[b, j + 1, XY.Y] - p0y
    rx, ry = px - p0x, py - p0y
    dd = dx * dx + dy * dy
    lam_free = (rx * dx + ry * dy) / dd
    lam = min(max(lam_free, 0.0), 1.0)
    cross = dx * ry - dy * rx
    if lam_free > 0.0 and lam_free < 1.0:
        e = cross / math.sqrt(dd)
    else:  # past an end: the distance to it, signed by side (course.project)
        fx, fy = rx - lam * dx, ry - lam * dy
        dist = math.sqrt(fx * fx + fy * fy)
        e = dist if cross >= 0 else -dist
    h0, h1 = ch[b, j], ch[b, j + 1]
    return j, (j + lam) * spacing, e, h0 + lam * (h1 - h0)


@njit(cache=True, error_model="numpy", inline="always")
def _wrap(a):
    return math.atan2(math.sin(a), math.cos(a))


@njit(cache=True, error_model="numpy", inline="always")
def _goal(n, C):
    """[m] The arc length that finishes a course of ``n`` points (TaskCore.goal): its length less
    the goal margin (``C``: the step constants)."""
    return (n - 1) * C[SC.SPACING] - C[SC.GOAL_MARGIN]


@njit(cache=True, error_model="numpy", inline="always")
def _observe_row(b, x, pts, idx, s, elapsed, K, ST, T, W, raw, out):
    """TaskCore.observe for row ``b`` of the state block ``ST`` at plant state ``x``, powertrain
    state ``pts``, course segment ``idx`` and arc length ``s`` [m], ``elapsed`` [s] into the
    episode, into ``out (len(cols),)`` (float32): the entries ``cols`` (model.task.OBS indices, in
    order; ``scales`` theirs) of every entry the task can observe: with the powertrain's engine
    speed and gear (``action="driver"``), the clock (``elapsed`` against the ``budget`` [s] and the
    goal's arc length [m]; ``observe_clock``), and the ground's friction at the preview points
    (``course.preview_friction``, sampled on ``T``); then the sensors ``SE`` (model.packed.SN; their
    scales after the entries' in ``scales``; :func:`_sensors_row`). ``C``: the step constants;
    ``CW (N, 2)`` the corridor's widths right and left of each course point (course.course_widths);
    all from the task's constants ``K``. ``W[MU..SBY]`` hold the ground at ``x`` (the step's last
    books, or :func:`ground_under_row`); ``raw (N_OBS_ALL,)`` is scratch. Inlined: as a called
    function it took the task's tuples of arrays by value on every row (issue 49: the env step
    at 4,096 rows 8-16 % faster inlined)."""
    P, CXY, CH, vt = ST[ST_P][b], ST[ST_COURSE_XY], ST[ST_COURSE_HEADING], ST[ST_TARGET_SPEED][b]
    passive, C, CW, ahead, scales, cols, SE = K[K_PASSIVE], K[K_STEP], K[K_WIDTHS], K[K_AHEAD], K[K_SCALES], \
        K[K_COLS], K[K_SENSE]
    budget, goal = C[SC.BUDGET], _goal(CXY.shape[1], C)
    spacing = C[SC.SPACING]
    # the loads stage reads x and W and writes W only: x stands in for the blocks it leaves alone
    loads_row(Substep(b, P, T, K[K_HDT], K[K_GRADE], passive, K[K_DRIVER], False), x, x, W, x)
    _, _, e, th = _project(CXY, CH, b, idx, x[S.X], x[S.Y], spacing)
    no = cols.shape[0]  # the entries of OBS_TABLE_ALL observed; the sensors' follow
    raw[:] = 0.0
    raw[OBS.VX], raw[OBS.VY], raw[OBS.YAW_RATE] = x[S.VX], x[S.VY], x[S.R]
    raw[OBS.ROLL], raw[OBS.PITCH], raw[OBS.ROLL_RATE], raw[OBS.PITCH_RATE] = x[S.PHI], x[S.THETA], x[S.PHID], x[S.THETAD]
    raw[OBS.STEER], raw[OBS.DRIVE] = x[S.DELTA], x[S.A]
    for i in range(4):
        raw[OBS.LOAD_FL + i] = W[W_.FZ, i] / P[PK.FZ0 + i] - 1.0
        raw[OBS.MU_FL + i] = W[W_.MU, i]
    raw[OBS.CROSS_TRACK], raw[OBS.HEADING_ERROR], raw[OBS.TARGET_SPEED] = e, _wrap(x[S.PSI] - th), vt
    n = CXY.shape[1]
    c, sn = math.cos(x[S.PSI]), math.sin(x[S.PSI])
    for k in range(N_PREVIEW):
        st = min(max(s + ahead[k], 0.0), (n - 1) * spacing)
        f = st / spacing
        j = min(max(int(math.floor(f)), 0), n - 2)
        lam = f - j
        qx = CXY[b, j, XY.X] + lam * (CXY[b, j + 1, XY.X] - CXY[b, j, XY.X])
        qy = CXY[b, j, XY.Y] + lam * (CXY[b, j + 1, XY.Y] - CXY[b, j, XY.Y])
        rx, ry = qx - x[S.X], qy - x[S.Y]
        raw[OBS.PREVIEW0_X + 2 * k] = c * rx + sn * ry
        raw[OBS.PREVIEW0_Y + 2 * k] = -sn * rx + c * ry
        if cols[no - 1] >= OBS.PREVIEW0_MU:  # the friction entries come last when observed
            raw[OBS.PREVIEW0_MU + k] = ground_point(b, qx, qy, T)[0]
    raw[OBS.ENGINE_SPEED], raw[OBS.GEAR] = pts[PT.OMEGA_E] * RPM, pts[PT.GEAR]
    if math.isfinite(budget):  # the clock (model.task.OBS_CLOCK)
        raw[OBS.TIME_LEFT], raw[OBS.LEAD] = budget - elapsed, s * (budget / goal) - elapsed
    for j in range(no):
        i = cols[j]
        v = raw[i] / (P[PK.DELTA_MAX] if i == OBS.STEER else scales[j])  # the steer entry: the row's own max steer
        if v != v:
            v = 0.0
        out[j] = min(max(v, -OBS_CLIP), OBS_CLIP)
    if out.shape[0] > no:
        _sensors_row(b, x, CXY, CH, CW, idx, T, SE, scales, out, no)


@njit(cache=True, error_model="numpy")
def _sensors_row(b, x, CXY, CH, CW, idx, T, SE, scales, out, o):
    """The sensors of row ``b`` (envs/sensors.py: range_finder, then ground_patch) into ``out[o:]``,
    each over its scale ``scales[o + i]`` and clipped as the other entries: ``SE`` packs the beams'
    angles and the patch's points (model.packed.SN), ``CW (N, 2)`` the corridor's widths right and
    left of each course point, ``idx`` is the car's course segment."""
    nb, rmax, win, npts = int(SE[SN.BEAMS]), SE[SN.RANGE], int(SE[SN.WINDOW]), int(SE[SN.POINTS])
    n = CXY.shape[1]
    ox, oy, psi = x[S.X], x[S.Y], x[S.PSI]
    raw = np.empty(nb + 2 * npts)
    used = 0
    if nb:
        # the window's edge segments, once for every beam: start (x, y) and run (x, y), the left
        # edge's then the right's (the centre line moved along its normal by the width that side).
        # Only segments that come within max_range of the car are kept: a crossing lies on its
        # segment, so one farther away cannot be nearer than max_range (the result is torch's,
        # which tests them all)
        m = 2 * win + 1
        E = np.empty((2 * m, 4))
        for i in range(m):
            c = min(max(idx - win + i, 0), n - 2)
            # a centre-line segment whose start is farther than max_range plus its length and
            # both ends' widths has no edge point within max_range: skipped before any trig
            qx, qy = CXY[b, c, XY.X] - ox, CXY[b, c, XY.Y] - oy
            lx, ly = CXY[b, c + 1, XY.X] - CXY[b, c, XY.X], CXY[b, c + 1, XY.Y] - CXY[b, c, XY.Y]
            reach = rmax + math.sqrt(lx * lx + ly * ly) + max(CW[c, 0], CW[c, 1]) + max(CW[c + 1, 0], CW[c + 1, 1])
            if qx * qx + qy * qy > reach * reach:
                continue
            nx0, ny0 = -math.sin(CH[b, c]), math.cos(CH[b, c])
            nx1, ny1 = -math.sin(CH[b, c + 1]), math.cos(CH[b, c + 1])
            for side in range(2):
                sg, col = (1.0, 1) if side == 0 else (-1.0, 0)  # left: + its width; right: - its width
                w0, w1 = CW[c, col], CW[c + 1, col]
                p0x, p0y = CXY[b, c, XY.X] + sg * (nx0 * w0), CXY[b, c, XY.Y] + sg * (ny0 * w0)
                ex = CXY[b, c + 1, XY.X] + sg * (nx1 * w1) - p0x
                ey = CXY[b, c + 1, XY.Y] + sg * (ny1 * w1) - p0y
                ee = ex * ex + ey * ey
                lam = min(max(((ox - p0x) * ex + (oy - p0y) * ey) / ee, 0.0), 1.0) if ee > 0.0 else 0.0
                fx, fy = p0x + lam * ex - ox, p0y + lam * ey - oy
                if fx * fx + fy * fy < rmax * rmax:
                    E[used, 0], E[used, 1], E[used, 2], E[used, 3] = p0x, p0y, ex, ey
                    used += 1
    for k in range(nb):
        a = psi + SE[SN.DATA + k]
        dx, dy = math.cos(a), math.sin(a)
        best = rmax
        for i in range(used):
            wx, wy, ex, ey = E[i, 0] - ox, E[i, 1] - oy, E[i, 2], E[i, 3]
            den = dx * ey - dy * ex
            if den != 0.0:  # parallel: no crossing
                t = (wx * ey - wy * ex) / den
                u = (wx * dy - wy * dx) / den
                if u >= 0.0 and u <= 1.0 and t > 0.0 and t < best:
                    best = t
        raw[k] = best
    if npts:
        c, sn = math.cos(psi), math.sin(psi)
        h0 = ground_point(b, ox, oy, T)[1]
        for q in range(npts):
            fx, fy = SE[SN.DATA + nb + q], SE[SN.DATA + nb + npts + q]
            mu, h = ground_point(b, ox + c * fx - sn * fy, oy + sn * fx + c * fy, T)
            raw[nb + q], raw[nb + npts + q] = mu, h - h0
    for i in range(raw.shape[0]):
        v = raw[i] / scales[o + i]
        if v != v:
            v = 0.0
        out[o + i] = min(max(v, -OBS_CLIP), OBS_CLIP)


def _observe_py(rows, K, ST, T, OUT):
    """The observation of ``rows`` of the state block ``ST`` (ground ``T``) into ``OUT``, with the
    task's ``K``."""
    PP, X, IDX, SS, TT, PTS = ST[ST_P], ST[ST_X], ST[ST_IDX], ST[ST_S], ST[ST_T], ST[ST_PT]
    grade, passive, dt = K[K_GRADE], K[K_PASSIVE], K[K_HDT] * K[K_N_SUB]
    for r in prange(rows.shape[0]):
        b = rows[r]
        W = np.empty((N_SCRATCH, 4))
        raw = np.empty(N_OBS_ALL)
        ground_under_row(b, X[b, S.X], X[b, S.Y], X[b, S.PSI], PP[b], passive or grade, T, W)
        _observe_row(b, X[b], PTS[b], IDX[b], SS[b], TT[b] * dt, K, ST, T, W, raw, OUT[r])


# ------------------------------------------------------------------------------------------- step
def _step_py(A, active, K, ST, T, OUT, REW, INFOS, FLAGS):
    """TaskCore.step for every active row of the state block ``ST`` (model.schema.BLOCK_FIELDS)
    on its ground ``T``, in place, with the task's constants ``K`` (model.schema.TASK_CONSTS);
    inactive rows are left as they are, their outputs zero (the caller resets them). ``driver``:
    actions are (steer, throttle, brake) through the powertrain (``Q``, ``maps``; state ``PTS``)."""
    PP, X, CXY, CH, IDX, SS, TT = ST[ST_P], ST[ST_X], ST[ST_COURSE_XY], ST[ST_COURSE_HEADING], ST[ST_IDX], ST[ST_S], \
        ST[ST_T]
    PREV, VT, PTS = ST[ST_PREV], ST[ST_TARGET_SPEED], ST[ST_PT]
    grade, passive, hdt, n_sub, C, weights = K[K_GRADE], K[K_PASSIVE], K[K_HDT], K[K_N_SUB], K[K_STEP], K[K_WEIGHTS]
    driver, Q, CW = K[K_DRIVER], K[K_Q], K[K_WIDTHS]
    maps = (K[K_TORQUE_MAP], K[K_LOSS_MAP], K[K_CAPACITY_MAP], K[K_RATIO_MAP])  # numba_powertrain.pack_powertrain's
    spacing, half_width = C[SC.SPACING], C[SC.HALF_WIDTH]
    roll_limit, episode_steps, cap = C[SC.ROLL_LIMIT], C[SC.EPISODE_STEPS], C[SC.CAP]
    n = CXY.shape[1]
    goal = _goal(n, C)  # [m] the arc length that finishes the course
    for b in prange(X.shape[0]):
        info, flags = INFOS[b], FLAGS[b]
        P = PP[b]  # the row's parameters
        delta_max, a_drive, a_brake = P[PK.DELTA_MAX], P[PK.A_DRIVE], P[PK.A_BRAKE]
        weight = P[PK.M] * P[PK.G]
        if not active[b]:
            REW[b] = 0.0
            info[:] = 0.0
            flags[:] = False
            continue
        # the row's substep constants and powertrain, built in the loop: a prange body takes no tuple
        # that holds a tuple from outside it (docs/engines.md)
        m = Substep(b, P, T, hdt, grade, passive, driver, True)
        pt = (Q, maps)
        W = np.empty((N_SCRATCH, 4))
        buf = np.empty((2, N_DYN4))
        bk = np.zeros(N_BOOKS)
        dw = np.empty(N_DW)
        pbk = np.zeros(N_PT_LINES)
        pf = np.empty(N_PF)
        sbuf = np.empty((2, N_PT))
        books = info[_BOOKS0:_BOOKS0 + N_BOOKS]
        books[:] = 0.0
        ptb = info[_PT0:_PT0 + N_PT_LINES]
        ptb[:] = 0.0
        a0 = min(max(A[b, ACT.STEER], -1.0), 1.0)
        if driver:
            a1 = min(max(A[b, ACT.THROTTLE], 0.0), 1.0)
            a2 = min(max(A[b, ACT.BRAKE], 0.0), 1.0)
        else:
            a1 = min(max(A[b, ACT.DRIVE], -1.0), 1.0)
            a2 = 0.0
        # the substep's data: the commands (numba_plant.SD), the same every substep
        D = new_data(a0 * delta_max, a1 * a_drive if a1 >= 0 else a1 * a_brake, 0.0, 0.0, 0.0, 0.0, 0.0)
        D[SD.STEER], D[SD.THROTTLE], D[SD.BRAKE], D[SD.DIRECTION] = a0, a1, a2, 1.0
        scur, snxt = sbuf[0], sbuf[1]
        for i in range(N_PT):
            scur[i] = PTS[b, i]
        # a row whose state is already non-finite steps from zeros for the bad entries, flagged
        nonfinite = False
        cur = buf[0]
        for i in range(N_DYN4):
            v = X[b, i]
            if not math.isfinite(v):
                nonfinite = True
                v = 0.0
            cur[i] = v
        nxt = buf[1]
        idx, s_prev = IDX[b], SS[b]
        progress = distance = 0.0
        e = th = 0.0
        out = rolled = False
        # the ground at cur's pose, sampled once; each substep's books sample the next pose's
        ground_row(m, cur, nxt, W, D)
        for _ in range(n_sub):
            finite = True
            if driver:
                for i in range(N_PT):
                    snxt[i] = scur[i]
                drive_substep_row(m, pt, cur, snxt, nxt, W, D, bk, pbk, pf, dw)
                for i in range(N_PT):
                    if not math.isfinite(snxt[i]):
                        finite = False
            else:
                substep_row(m, cur, nxt, W, D, bk, dw)
            for i in range(N_DYN4):
                if not math.isfinite(nxt[i]):
                    finite = False
            nonfinite = nonfinite or not finite
            if finite:  # else cur stays, and so does its ground in W
                dx, dy = nxt[S.X] - cur[S.X], nxt[S.Y] - cur[S.Y]
                cur, nxt = nxt, cur
                if driver:  # snxt is written only by the driver's substep; swapping it otherwise keeps garbage
                    scur, snxt = snxt, scur
                advance_ground(W)
            else:
                dx = dy = 0.0
            idx, s_new, e, th = _project(CXY, CH, b, idx, cur[S.X], cur[S.Y], spacing)
            # progress: the projection's advance, capped by the distance driven
            d2 = dx * dx + dy * dy
            dist = math.sqrt(d2) if d2 > 0 else 0.0
            progress += max(min(s_new - s_prev, dist), -dist)
            distance += dist
            s_prev = s_new
            lam = s_new / spacing - idx  # the corridor's widths there (course.widths_at)
            right = CW[idx, 0] + lam * (CW[idx + 1, 0] - CW[idx, 0])
            left = CW[idx, 1] + lam * (CW[idx + 1, 1] - CW[idx, 1])
            out = out or e > left or -e > right
            rolled = rolled or abs(cur[S.PHI]) > roll_limit
            if finite:
                for k in range(N_BOOKS):
                    books[k] += bk[k]
                if driver:
                    for k in range(N_PT_LINES):
                        ptb[k] += pbk[k]
        success = s_prev >= goal
        failed = out or rolled or nonfinite
        terminated = failed or success
        TT[b] += 1
        truncated = TT[b] >= episode_steps and not terminated
        he = _wrap(cur[S.PSI] - th)
        vt = VT[b]
        terms = info[_TERMS0:_TERMS0 + _NT]
        fig = np.empty(N_FIG)  # the step's figures the terms read (model.task.STEP_FIGURES)
        obs_raw = np.empty(N_OBS_ALL)  # the observation's scratch
        fig[FIG.PROGRESS], fig[FIG.CAP], fig[FIG.DT] = progress, cap * vt, hdt * n_sub
        fig[FIG.ELAPSED], fig[FIG.BUDGET], fig[FIG.PACE] = TT[b] * (hdt * n_sub), C[SC.BUDGET], C[SC.PACE]
        fig[FIG.S0], fig[FIG.S1], fig[FIG.GOAL] = SS[b], s_prev, goal
        fig[FIG.VX], fig[FIG.VT], fig[FIG.CROSS_TRACK], fig[FIG.HALF_WIDTH] = cur[S.VX], vt, e, half_width
        fig[FIG.HEADING_ERROR], fig[FIG.WEIGHT], fig[FIG.ROLL_RATE], fig[FIG.PITCH_RATE] = he, weight, cur[S.PHID], \
            cur[S.THETAD]
        fig[FIG.STEER], fig[FIG.DRIVE], fig[FIG.BRAKE] = a0, a1, a2
        fig[FIG.FAILED] = 1.0 if failed else 0.0
        terms_row(terms, fig, books, ptb, PREV[b], driver)
        reward = 0.0
        for k in range(_NT):
            reward += weights[k] * terms[k]
        info[INFO.PROGRESS], info[INFO.DISTANCE], info[INFO.S] = progress, distance, s_prev
        info[INFO.CROSS_TRACK] = e if math.isfinite(e) else (0.0 if e != e else (1.7976931348623157e308 if e > 0
                                                                                else -1.7976931348623157e308))
        info[INFO.HEADING_ERROR] = he
        flags[FLAG.TERMINATED], flags[FLAG.TRUNCATED] = terminated, truncated
        flags[FLAG.SUCCESS] = success and not failed
        flags[FLAG.OUT_OF_CORRIDOR], flags[FLAG.ROLLOVER], flags[FLAG.NONFINITE] = out, rolled, nonfinite
        if nonfinite or not math.isfinite(reward):
            reward = guard_row(info, flags, C[SC.PENALTY])
        REW[b] = reward
        for i in range(N_DYN4):
            X[b, i] = cur[i]
        IDX[b], SS[b] = idx, s_prev
        PREV[b, ACT.STEER], PREV[b, ACT.DRIVE] = a0, a1
        if driver:
            PREV[b, ACT.BRAKE] = a2
        for i in range(N_PT):
            PTS[b, i] = scur[i]
        _observe_row(b, cur, scur, idx, s_prev, TT[b] * (hdt * n_sub), K, ST, T, W, obs_raw, OUT[b])


# ------------------------------------------------------------------------------- the reward terms
@njit(cache=True, error_model="numpy", inline="always")
def terms_row(terms, fig, books, ptb, prev, driver):
    """The built-in reward terms (envs/rewards.py; model.task.REWARD_TERM_TABLE) of one step into
    ``terms (len(TERM),)`` from the step's figures ``fig`` (model.task.STEP_FIGURES): progress paid
    up to ``cap`` [m], the step's time ``dt`` [s] as target speed x dt [m] (paid again by steps
    ending past the time ``budget`` [s] at ``elapsed`` [s]), the schedule from the arc lengths
    ``s0`` -> ``s1`` [m] against the uniform pace that reaches the ``goal``'s [m] at ``pace`` [s]
    (the budget less EnvConfig.schedule_margin), the step's books ``books`` (BOOK) and powertrain
    lines ``ptb`` (PTB, read where ``driver``), the final speed, cross-track, heading error and
    rates, the clipped action against ``prev``, ``weight`` = m g [N]."""
    progress, cap, dt, elapsed, budget = fig[FIG.PROGRESS], fig[FIG.CAP], fig[FIG.DT], fig[FIG.ELAPSED], fig[FIG.BUDGET]
    pace, s0, s1, goal, vx, vt = fig[FIG.PACE], fig[FIG.S0], fig[FIG.S1], fig[FIG.GOAL], fig[FIG.VX], fig[FIG.VT]
    e, half_width, he, weight = fig[FIG.CROSS_TRACK], fig[FIG.HALF_WIDTH], fig[FIG.HEADING_ERROR], fig[FIG.WEIGHT]
    phid, thetad, a0, a1, a2 = fig[FIG.ROLL_RATE], fig[FIG.PITCH_RATE], fig[FIG.STEER], fig[FIG.DRIVE], fig[FIG.BRAKE]
    failed = fig[FIG.FAILED] != 0.0
    step_dist = vt * dt
    terms[TERM.PROGRESS] = min(progress, cap)  # paid up to the target speed's distance
    terms[TERM.SPEED] = -((vx - vt) / vt) ** 2
    terms[TERM.CROSS_TRACK] = -(e / half_width) ** 2
    terms[TERM.HEADING] = -(he ** 2)
    terms[TERM.ENERGY] = -max(books[BOOK.SUPPLIED], 0.0) / weight
    terms[TERM.FUEL] = -ptb[PTB.FUEL] / weight if driver else 0.0
    terms[TERM.TIRE_SLIP] = -books[BOOK.TIRE] / weight
    terms[TERM.DAMPER] = -books[BOOK.DAMPER] / weight
    terms[TERM.COMFORT] = -(phid ** 2 + thetad ** 2)
    rate = (a0 - prev[ACT.STEER]) ** 2 + (a1 - prev[ACT.DRIVE]) ** 2
    if driver:
        rate += (a2 - prev[ACT.BRAKE]) ** 2
    terms[TERM.ACTION_RATE] = -rate
    terms[TERM.TERMINATION] = -1.0 if failed else 0.0
    terms[TERM.TIME] = -step_dist
    terms[TERM.LATE] = -step_dist if elapsed > budget else 0.0
    if math.isinf(pace):
        terms[TERM.SCHEDULE] = 0.0
    else:  # rewards.behind at the step's end less at its start
        grow = max(elapsed - s1 * (pace / goal), 0.0) - max((elapsed - dt) - s0 * (pace / goal), 0.0)
        terms[TERM.SCHEDULE] = -vt * grow


# --------------------------------------------------------------------------------- the non-finite guard
@njit(cache=True, error_model="numpy", inline="always")
def guard_row(info, flags, penalty):
    """The one non-finite guard (TaskCore._finish's): a step whose state or reward is not finite
    ends the episode with the termination penalty alone. Rewrites the row's packed ``info`` and
    ``flags`` in place and returns its reward, ``-penalty``."""
    for k in range(_NT):
        info[INFO.TERMS + k] = 0.0
    info[INFO.TERMS + TERM.TERMINATION] = -1.0
    for k in range(N_BOOKS):
        info[INFO.BOOKS + k] = 0.0
    for k in range(N_PT_LINES):
        info[INFO.PT_LINES + k] = 0.0
    info[INFO.PROGRESS] = 0.0
    flags[FLAG.TERMINATED], flags[FLAG.TRUNCATED], flags[FLAG.SUCCESS], flags[FLAG.NONFINITE] = True, False, False, True
    return -penalty


@njit(cache=True, error_model="numpy")
def _guard_rows(rows, INFOS, FLAGS, penalty, REW):
    for r in range(rows.shape[0]):
        b = rows[r]
        REW[b] = guard_row(INFOS[b], FLAGS[b], penalty)


def guard_rows(rows: np.ndarray, info: np.ndarray, flags: np.ndarray, penalty: float, reward: np.ndarray) -> None:
    """:func:`guard_row` on ``rows`` of a step's packed outputs, in place (the Numba engine's
    reward terms that run after the kernel go through the same guard)."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    B = reward.shape[0]
    check_rows("guard_rows", rows, B)
    _check_shape("guard_rows: info", info, (B, len(INFO_COLUMNS)))
    _check_shape("guard_rows: flags", flags, (B, len(FLAG_COLUMNS)))
    if rows.size:
        _guard_rows(rows, info, flags, float(penalty), reward)


_ENTRIES = {"step": _step_py, "observe": _observe_py, "reset": _reset_rows_py}
# the entries' builds per ground sampler (None: the rough kind's, the module's own global)
_KERNELS = {None: {name: serial_and_parallel(fn) for name, fn in _ENTRIES.items()}}


def kernels(ground=None, cache: bool = True) -> dict:
    """The task's entry kernels ``{name: (serial, parallel)}`` with the ground sampler ``ground``
    (None: the rough kind's, the module's own builds). Another sampler gets its own builds of the
    chain that samples the ground (numba_powertrain.with_sampler); only the rough kind resets in the
    kernel (with :func:`~.numba_plant.level_ground`, its level draws, too). Built once per sampler; compiled on first call (on disk with ``cache``)."""
    if ground not in _KERNELS:
        chain = with_sampler(ground, cache)
        # the observation samples the ground ahead (course.preview_friction, the sensors' patch) with it too
        sensors = rebuild(_sensors_row, "_" + sampler_tag(ground), cache, ground_point=chain["ground_point"])
        chain["_observe_row"] = rebuild(_observe_row, "_" + sampler_tag(ground), cache,
                                        ground_point=chain["ground_point"], _sensors_row=sensors)
        _KERNELS[ground] = {name: serial_and_parallel(_ENTRIES[name], chain, sampler_tag(ground), cache)
                            for name in ("step", "observe")}
        if ground is level_ground:  # the rough kind's own draw, reset by the rough builds (level: the same rows)
            _KERNELS[ground]["reset"] = _KERNELS[None]["reset"]
    return _KERNELS[ground]


# An env step is heavy (~35 us a row), so threads pay from 2 rows (measured on 2 cores, same
# states: 4 rows 21k -> 61k rows/s, 16 rows 22k -> 71k). One row stays serial: single envs in
# subprocesses (AsyncVectorEnv, SubprocVecEnv) never start OpenMP, which is not fork-safe.
TASK_PARALLEL_FROM = 2


def _kernel(k, name: str, rows: int):
    serial, parallel = k.kernels[name]
    if rows < TASK_PARALLEL_FROM:
        fn = call = serial
    else:
        fn = parallel
        call = parallel if _thread_safe_layer() else functools.partial(_serialised, parallel)
    # a kernel's first call in this process compiles it, or loads Numba's disk cache: watched
    return call if fn in _CALLED else functools.partial(_first_call, fn, call)


# the kernels called in this process; the first call of each is watched (a compile says so)
_CALLED: set = set()
COMPILING = ("dyn4_gym: compiling the Numba engine's kernels (the first run after an install or an upgrade, "
             "about a minute on 2 cores; Numba caches them on disk, so later runs start in seconds)")


def _first_call(key, fn, *args):
    from .._notice import slow_notice

    with slow_notice(COMPILING):
        out = fn(*args)
    _CALLED.add(key)
    return out


# Numba's work queue (its layer where TBB does not load) is not thread-safe: two Python threads
# launching parallel kernels at once abort the process (issue 46). There the parallel kernels
# take turns; under TBB or OpenMP they run as they are.
_PARALLEL_LOCK = threading.Lock()
_LAYER_SAFE = None


def _thread_safe_layer() -> bool:
    """Whether the threading layer Numba chose takes parallel launches from several threads at
    once (TBB and OpenMP do, the work queue does not); False until a parallel kernel has run and
    the layer is known, so the first launches are serialised too."""
    global _LAYER_SAFE
    if _LAYER_SAFE is None:
        import numba

        try:
            _LAYER_SAFE = numba.threading_layer() in ("tbb", "omp")
        except ValueError:  # no parallel kernel has run in this process yet
            return False
    return _LAYER_SAFE


def _serialised(fn, *args):
    with _PARALLEL_LOCK:
        return fn(*args)


def check_rows(name: str, rows: np.ndarray, B: int) -> None:
    """The kernels index the state by these rows unchecked: each must be a row of the batch."""
    if rows.ndim != 1 or (rows.size and (rows.min() < 0 or rows.max() >= B)):
        raise ValueError(f"{name}: rows must be a 1-D array of indices in [0, {B}), got shape {rows.shape}")


def check_reset(rows, keys, episodes, B: int) -> tuple:
    """A reset's ``(rows, keys, episodes)`` as arrays, each row of the batch and one stream per
    row (both reset paths check them here: envs/numba_setup.NumbaTask.reset)."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    check_rows("reset_rows", rows, B)
    keys, episodes = np.asarray(keys), np.asarray(episodes)
    _check_shape("reset_rows: keys", keys, rows.shape)
    _check_shape("reset_rows: episodes", episodes, rows.shape)
    return rows, keys, episodes


def _check_shape(name: str, a: np.ndarray, shape: tuple) -> None:
    if a.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {a.shape}")


# The entries below are the only way into the task kernels, and each checks every array it
# hands them (the kernels run without bounds checks, so a wrong shape would read past an array).
def reset_rows(k, st: NumbaState, rows: np.ndarray, keys: np.ndarray, episodes: np.ndarray, params=None) -> None:
    """New episodes on ``rows`` (int64) of ``st`` from streams ``keys`` / ``episodes``, in place.
    ``params (len(rows), N_PARAMS)``: the rows' new packed parameters (domain randomisation);
    None keeps ``st.P``'s. ``k`` is the packed task (:class:`dyn4_gym.envs.numba_setup.NumbaTask`)."""
    rows, keys, episodes = check_reset(rows, keys, episodes, st.batch_size)
    if rows.size == 0:
        return
    if params is not None:
        _check_shape("reset_rows: params", params, (rows.size, st.P.shape[1]))
        st.P[rows] = params
    _kernel(k, "reset", rows.size)(rows, np.ascontiguousarray(keys, dtype=np.int64),
                                   np.ascontiguousarray(episodes, dtype=np.int64), k.block, st.block(),
                                   st.terrain)


def observe(k, st: NumbaState, rows: np.ndarray | None = None) -> np.ndarray:
    """The observation ``(len(rows), k.n_obs)`` float32 of ``rows`` (default: every row)."""
    rows = np.arange(st.batch_size) if rows is None else np.ascontiguousarray(rows, dtype=np.int64)
    check_rows("observe", rows, st.batch_size)
    obs = np.empty((rows.size, k.n_obs), dtype=np.float32)
    _kernel(k, "observe", rows.size)(rows, k.block, st.block(), st.terrain, obs)
    return obs


def step_bound(k, st: NumbaState, actions, active, obs, rew, info, flags) -> None:
    """:func:`step` into the caller's buffers, unchecked (the single env's step,
    ``NumbaEngine.step_one``, binds them once and checks its one action itself): the shapes and
    dtypes :func:`step` checks and allocates are the caller's promise."""
    _kernel(k, "step", st.batch_size)(actions, active, k.block, st.block(), st.terrain, obs, rew, info, flags)


def step(k, st: NumbaState, actions: np.ndarray, active: np.ndarray):
    """One env step of the active rows, in place. Returns ``(obs (B, k.n_obs) float32, reward (B,),
    info (B, len(INFO_COLUMNS)), flags (B, len(FLAG_COLUMNS)) bool)``."""
    B = st.batch_size
    _check_shape("step: actions", actions, (B, k.n_action))
    _check_shape("step: active", active, (B,))
    if actions.dtype != np.float64 or active.dtype != np.bool_:
        raise ValueError(f"step: actions must be float64 and active bool, got {actions.dtype} and {active.dtype}")
    obs = np.zeros((B, k.n_obs), dtype=np.float32)
    rew = np.empty(B)
    info = np.empty((B, len(INFO_COLUMNS)))
    flags = np.empty((B, len(FLAG_COLUMNS)), dtype=np.bool_)
    _kernel(k, "step", B)(actions, active, k.block, st.block(), st.terrain, obs, rew, info, flags)
    return obs, rew, info, flags
