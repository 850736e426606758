"""The four-wheel plant's substep in Numba: the forward engine for CPU (docs/plant.md, "The step").

The same equations as :func:`dyn4_gym.plant.dyn4_step` (the torch reference), stage by stage and
in the same order, compiled with ``@njit(cache=True, error_model="numpy")`` and parallel over rows (``prange``), in
float64 with no allocation per wheel. :func:`dyn4_step_np` steps a batch of states on the batched
terrain of the ``"rough"`` kind (hills, friction discs, bumps; ``Flat`` is the kind with no hills,
patches or bumps) and returns the next states and every books line. tests/test_engine.py holds
the two engines together (1e-12 relative, float64) and to the golden file.

Nothing compiles at import; the first call compiles (cached on disk by Numba for the next
process).
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
from collections import namedtuple

import numpy as np

from enum import IntEnum

from numba import njit, prange

from ..model.books import BOOK, N_BOOKS
from ..model.constants import (A_BLEND, DEFAULT_MU, ELLIPSE_EPS, FLOOR_SHARE, LOCK_WIDTH, LOCKED, MU_FLOOR,
                               MU_FLOOR_SCALE, N_SECANT, PATCH_EDGE, SERIES_BELOW, SLIDE_ANGLE, SLOPE_STEP, SOFTCAP_WIDTH,
                               SOFTPLUS_LINEAR, SOFTPLUS_MIN)
from ..model.packed import (N_PARAMS, PARAM_NAMES, PK, TERRAIN_FIELDS, TK_BASE_MU, TK_BUMP_H, TK_BUMP_R, TK_BUMP_X,
                            TK_BUMP_Y, TK_EDGE, TK_PATCH_MU, TK_PATCH_R, TK_PATCH_X, TK_PATCH_Y, TK_WAVE_AMP, TK_WAVE_KX,
                            TK_WAVE_KY, TK_WAVE_PHASE, WHEEL_PARAM_NAMES)
from ..model.state import DYN4 as S, N_DYN4
from .numba_math import sincos_v

__all__ = ["pack_params", "unpack_params", "pack_terrain", "rough_ground", "dyn4_step_np", "substep_row", "Substep", "W_",
           "N_SCRATCH", "SD", "N_SD", "DW", "N_DW", "STAGE_WRITES"]


def pack_params(p) -> tuple:
    """``(vector (18 + 36,), grade_force, passive)`` of a :class:`Dyn4Params` with scalar fields."""
    vals = []
    for n in PARAM_NAMES:
        v = np.asarray((p.lf + p.lr) if n == "L" else getattr(p, n), dtype=np.float64)
        if v.ndim != 0:
            raise ValueError(f"the numba engine needs scalar parameters; {n} has shape {v.shape}")
        vals.append(float(v))
    for n in WHEEL_PARAM_NAMES:
        v = np.asarray(getattr(p, n).detach().cpu(), dtype=np.float64)
        if v.shape != (4,):
            raise ValueError(f"the numba engine needs per-wheel parameters of shape (4,); {n} has {v.shape}")
        vals.extend(v.tolist())
    P = np.asarray(vals, dtype=np.float64)
    assert P.shape == (N_PARAMS,)
    return P, bool(p.grade_force), p.damper == "passive"


def unpack_params(P: np.ndarray, base):
    """The rows' :class:`Dyn4Params` from packed rows ``P (B, n)`` (:func:`pack_params`'s layout),
    over ``base`` for the flags and the dtype: the inverse the torch view of a Numba state needs."""
    import torch

    def t(a):
        return torch.as_tensor(np.ascontiguousarray(a), dtype=base.m.dtype)

    vals = {n: t(P[:, j]) for j, n in enumerate(PARAM_NAMES) if n != "L"}
    n0 = len(PARAM_NAMES)
    vals.update({n: t(P[:, n0 + 4 * j:n0 + 4 * j + 4]) for j, n in enumerate(WHEEL_PARAM_NAMES)})
    vals.update(lf=vals["x_w"][:, 0], lr=-vals["x_w"][:, 2])
    return dataclasses.replace(base, **vals)


def pack_terrain(t, batch: int) -> tuple:
    """The rough kind's :class:`Terrain` (or a ``Flat``) as float64 arrays for the kernel."""
    from ..ground import Flat

    if isinstance(t, Flat):
        if t.height0 != 0.0:
            raise ValueError("the numba engine's Flat ground sits at height 0")
        # no hills, patches or bumps: every field (B, 0) but the base friction, by name
        z = np.zeros((batch, 0))
        return tuple(np.full(batch, t.mu) if n == "base_mu" else z for n in TERRAIN_FIELDS) + (PATCH_EDGE,)
    arrs = tuple(np.ascontiguousarray(getattr(t, n).detach().cpu().numpy(), dtype=np.float64) for n in TERRAIN_FIELDS)
    return arrs + (float(t.patch_edge),)


@njit(cache=True, error_model="numpy", inline="always")
def _atanc(x, atan_x):
    """``atan(x) / x`` (a series near 0), from ``atan_x = atan(x)`` already at hand."""
    if abs(x) < SERIES_BELOW:  # _math.atanc's series
        x2 = x * x
        return 1.0 - x2 / 3.0 + x2 * x2 / 5.0
    return atan_x / x


@njit(cache=True, error_model="numpy", inline="always")
def _sinc(x):
    y = x / math.pi  # torch.sinc(x / pi), as the torch plant computes it
    if y == 0.0:
        return 1.0
    t = math.pi * y
    return math.sin(t) / t


@njit(cache=True, error_model="numpy", inline="always")
def _softplus_floor(x, scale):
    z = x / scale
    sp = z if z > SOFTPLUS_LINEAR else math.log1p(math.exp(z))
    return scale * max(sp, SOFTPLUS_MIN)


@njit(cache=True, error_model="numpy", inline="always")
def _softcap(x, limit):
    width = SOFTCAP_WIDTH
    s = x / limit
    a = abs(s)
    if a <= 1.0 - width:
        return x
    f = 1.0 if a >= 1.0 + width else 1.0 - (1.0 + width - a) ** 2 / (4.0 * width)
    sg = 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)
    return sg * limit * f


@njit(cache=True, error_model="numpy", inline="always")
def _ellipse(r2):
    eps = ELLIPSE_EPS
    rem = max(1.0 - r2, 0.0)
    e2 = eps * eps
    return (math.sqrt(rem + e2) - eps) / ((1.0 + e2) ** 0.5 - eps)


@njit(cache=True, error_model="numpy", inline="always")
def _secant(w, u, D, B, C, E, v_lat):
    ubar = math.sqrt(u * u + v_lat * v_lat)
    ratio = w / ubar
    alpha = math.atan(ratio)
    ba = B * alpha
    atan_ba = math.atan(ba)
    psi = ba - E * (ba - atan_ba)
    phi = math.atan(psi)
    psi_over_alpha = B * (1.0 - E) + E * B * _atanc(ba, atan_ba)
    alpha_over_w = _atanc(ratio, alpha) / ubar
    return D * _sinc(C * phi) * C * _atanc(psi, phi) * psi_over_alpha * alpha_over_w


@njit(cache=True, error_model="numpy", inline="always")
def _sliding_secant(u, w, limit, k_lat, v_lat):
    """tire.sliding_secant: ``|F| / |v|`` of a sliding patch moving at ``(u, w)``."""
    v2 = u * u + w * w + v_lat * v_lat
    return limit * (u * u + k_lat * (w * w + v_lat * v_lat)) / (v2 * math.sqrt(v2))


@njit(cache=True, error_model="numpy", inline="always")
def height_at(b, X, Y, T):
    """The height [m] of row ``b``'s rough terrain ``T`` (:func:`pack_terrain`) at world point ``(X, Y)``."""
    kx, ky, amp, ph = T[TK_WAVE_KX], T[TK_WAVE_KY], T[TK_WAVE_AMP], T[TK_WAVE_PHASE]
    bx, by, bh, br = T[TK_BUMP_X], T[TK_BUMP_Y], T[TK_BUMP_H], T[TK_BUMP_R]
    h = 0.0
    for k in range(kx.shape[1]):
        if amp[b, k] != 0.0:  # a hill of no height adds exactly 0 (the flat task's): skip its sine
            h += amp[b, k] * math.sin(X * kx[b, k] + Y * ky[b, k] + ph[b, k])
    hb = 0.0
    for q in range(bx.shape[1]):
        d2 = ((X - bx[b, q]) ** 2 + (Y - by[b, q]) ** 2) / br[b, q] ** 2
        if d2 < 1.0:  # outside, the bump adds exactly 0
            hb += bh[b, q] * (1.0 - d2) ** 2
    return h + hb


@njit(cache=True, error_model="numpy", inline="always")
def friction_at(b, X, Y, T):
    """The friction of row ``b``'s rough terrain ``T`` at world point ``(X, Y)`` (Terrain.friction)."""
    base_mu, edge = T[TK_BASE_MU], T[TK_EDGE]
    px, py, pr, pmu = T[TK_PATCH_X], T[TK_PATCH_Y], T[TK_PATCH_R], T[TK_PATCH_MU]
    mu = base_mu[b]
    for j in range(px.shape[1]):
        r = pr[b, j]
        d2 = (X - px[b, j]) ** 2 + (Y - py[b, j]) ** 2
        z = (d2 - r * r) / (2.0 * r * edge)
        if z > 22.0:  # tanh is exactly 1 there: the disc covers nothing
            continue
        cover = 0.5 * (1.0 - (-1.0 if z < -22.0 else math.tanh(z)))
        mu = mu + cover * (pmu[b, j] - mu)
    return DEFAULT_MU + 1.0 * (mu - DEFAULT_MU)


@njit(cache=True, error_model="numpy", inline="always")
def height_slope_at(b, X, Y, T):
    """``(h, dh/dX, dh/dY)`` of row ``b``'s rough terrain at ``(X, Y)`` (Terrain.height and
    Terrain.height_gradient): each hill's sine and cosine of one phase, each bump's polynomial."""
    kx, ky, amp, ph = T[TK_WAVE_KX], T[TK_WAVE_KY], T[TK_WAVE_AMP], T[TK_WAVE_PHASE]
    bx, by, bh, br = T[TK_BUMP_X], T[TK_BUMP_Y], T[TK_BUMP_H], T[TK_BUMP_R]
    h = hx = hy = 0.0
    for k in range(kx.shape[1]):
        a = amp[b, k]
        if a == 0.0:  # adds exactly 0 to the height and the slope
            continue
        sn, cs = sincos_v(X * kx[b, k] + Y * ky[b, k] + ph[b, k])  # one reduction for both (numba_math)
        h += a * sn
        ac = a * cs
        hx += ac * kx[b, k]
        hy += ac * ky[b, k]
    hb = gbx = gby = 0.0
    for q in range(bx.shape[1]):
        dx, dy, r2 = X - bx[b, q], Y - by[b, q], br[b, q] ** 2
        d2 = (dx * dx + dy * dy) / r2
        if d2 < 1.0:  # outside, the bump and its slope are exactly 0
            w = 1.0 - d2
            hb += bh[b, q] * w ** 2
            f = -4.0 * bh[b, q] * w / r2
            gbx += f * dx
            gby += f * dy
    return h + hb, hx + gbx, hy + gby


@njit(cache=True, error_model="numpy", inline="always")
def rough_ground(b, X, Y, T, slope_step):
    """The rough kind's ground sampler (the kernels' contract for every terrain kind, docs/engines.md):
    ``(mu, h [m], dh/dX, dh/dY)`` of row ``b`` at world point ``(X, Y)``; the slopes are exact
    (Terrain.height_gradient), and 0 when ``slope_step`` is 0 (the plant needs no slopes)."""
    mu = friction_at(b, X, Y, T)
    if slope_step > 0.0:
        h, hx, hy = height_slope_at(b, X, Y, T)
        return mu, h, hx, hy
    return mu, height_at(b, X, Y, T), 0.0, 0.0


@njit(cache=True, error_model="numpy", inline="always")
def level_ground(b, X, Y, T, slope_step):
    """The rough kind's sampler where its draw is level everywhere (``RoughConfig.level``: no hill
    height, patches or bumps; the Flat tasks'): :func:`rough_ground`'s numbers there, the row's
    base friction blended as friction_at blends it, height and slopes 0, without its loops. Issue
    49: sampling level ground took 0.22 of a row-substep's 1.43 us."""
    return DEFAULT_MU + 1.0 * (T[TK_BASE_MU][b] - DEFAULT_MU), 0.0, 0.0, 0.0


# the ground sampler of the functions below (the rough kind's); numba_powertrain.with_sampler rebuilds them with another
sampler = rough_ground


class W_(IntEnum):
    """Rows of one substep's per-wheel scratch ``W (N_SCRATCH, 4)`` (nothing is allocated per wheel)."""

    MU = 0  # friction of the ground under the wheel
    HG = 1  # [m] its height
    SBX = 2  # body-frame slopes
    SBY = 3
    RATE = 4  # [m/s] corner rate a_i . qd
    HDOT = 5  # [m/s] ground rate under the moving patch (0 for skyhook dampers)
    SPRING = 6  # [N] unfloored spring force
    FZ = 7  # [N] floored load
    FX = 8  # [N] longitudinal force
    DP = 9  # [N] lateral peak inside the friction ellipse
    COSD = 10  # wheel frames: cos and sin of the wheel's steer ...
    SIND = 11
    G0 = 12  # ... its heading g and lateral normal n in twist space
    G1 = 13
    G2 = 14
    N0 = 15
    N1 = 16
    N2 = 17
    SEC = 18  # [N s/m] lateral secants
    FY0 = 19  # [N] start-of-step lateral forces
    FY = 20  # [N] final lateral forces
    MU1 = 21  # the ground under the wheels at the step's end (the books'; the next substep's
    HG1 = 22  # ground when the caller hands it on, advance_ground), in MU..SBY's order
    SBX1 = 23
    SBY1 = 24
    LOCK = 25  # 0..1 how locked the wheel is (tire.lock_share)
    LIMIT = 26  # [N] its friction bound mu Fz
    KLAT = 27  # the lateral law's full slide over its peak (tire.slide_friction), where LOCK != 0


N_SCRATCH = len(W_)


class DW(IntEnum):
    """A driven substep's DriveWork (dyn4.DriveWork) as the kernel writes it."""

    DRIVE = 0  # [J] the drive force's work at the contact patches
    BRAKES = 1  # [J]
    WHEELSPIN = 2  # [J]
    V_DRIVE = 3  # [m/s] the drive-share weighted rolling speed at the midpoint
    SLIDING = 4  # [J] the locked shares' patches sliding


N_DW = len(DW)


class SD(IntEnum):
    """Entries of one substep's data ``D (N_SD,)``, MJX's ``d`` beside the per-wheel ``W``: the
    inputs the caller writes, then what each stage hands the next (:data:`STAGE_WRITES`)."""

    D_IN = 0  # [rad] steer command (the caller's)
    A_IN = 1  # [m/s^2] acceleration command (the caller's; undriven)
    FE0 = 2  # external port (Fx [N], Fy [N], Mz [N m]), body frame (the caller's)
    FE1 = 3
    FE2 = 4
    FD = 5  # [N] the powertrain's drive and brake forces at the patches (driven; the powertrain's)
    FB = 6
    DELTA = 7  # [rad] lagged steer (lags)
    A = 8  # [m/s^2] lagged (or driven) acceleration (lags)
    BRAKING = 9  # 1 where the command brakes (lags); the clamp also needs a rolling wheel (planar)
    FZ_SUM = 10  # [N] sum of the loads (longitudinal)
    SGN = 11  # sign(vx) (longitudinal)
    GR0 = 12  # grade force (Fx [N], Fy [N], Mz [N m]) (grade)
    GR1 = 13
    GR2 = 14
    VX1 = 15  # [m/s, m/s, rad/s] the new twist (planar)
    VY1 = 16
    R1 = 17
    VX_FREE = 18  # [m/s] vx before the speed clamp (planar)
    DRAG = 19  # [N] drag and rolling resistance (planar)
    STEER = 20  # the driver's commands through a powertrain (the caller's; numba_powertrain.drive_substep_row):
    THROTTLE = 21  # steer -1..1, throttle 0..1, brake 0..1, direction (-1: reverse)
    BRAKE = 22
    DIRECTION = 23


N_SD = len(SD)

Substep = namedtuple("Substep", "b P T hdt grade passive drv books")
Substep.__doc__ = """One substep's constants, MJX's ``m``: the row ``b`` (its ground's row in
``T``), its packed parameters ``P`` (:func:`pack_params`), the packed ground ``T``
(:func:`pack_terrain`), the step ``hdt`` [s], the grade force and passive-damper flags, ``drv``
(driven by a powertrain's ``SD.FD, SD.FB`` instead of ``SD.A_IN``) and ``books`` (write the books).
Every stage of the substep is ``stage(m, x, y, W, D)``: the state ``x (N_DYN4,)`` (read), the next
state ``y``, the per-wheel scratch ``W`` (:class:`W_`) and the substep's data ``D`` (:class:`SD`);
each writes only its own fields (:data:`STAGE_WRITES`). The books stage also writes the lines."""

# what each stage of the substep writes, by block and name (the stage tests fill everything else
# with NaN and check it is left alone); the state entries by their names in model.state.DYN4
STAGE_WRITES = {
    "ground": {"W": ("MU", "HG", "SBX", "SBY")},
    "lags": {"D": ("DELTA", "A", "BRAKING")},
    "loads": {"W": ("RATE", "HDOT", "SPRING", "FZ")},
    "frames": {"W": ("COSD", "SIND", "G0", "G1", "G2", "N0", "N1", "N2")},
    "longitudinal": {"W": ("FX", "DP", "LOCK", "LIMIT", "KLAT"), "D": ("FZ_SUM", "SGN")},
    "grade": {"D": ("GR0", "GR1", "GR2")},
    "planar": {"W": ("SEC", "FY0", "FY"), "D": ("VX1", "VY1", "R1", "VX_FREE", "DRAG")},
    "vertical": {"y": ("Z", "PHI", "THETA", "ZD", "PHID", "THETAD")},
    "pose": {"y": ("X", "Y", "PSI", "VX", "VY", "R", "DELTA", "A")},
    "books": {"W": ("MU1", "HG1", "SBX1", "SBY1")},  # and the books' lines and DriveWork, every one
}


@njit(cache=True, error_model="numpy", inline="always")
def road_share(P, drv):
    """``Dyn4Params.road_share`` when driven by a powertrain (``drv``), else 1: the acceleration
    command is a servo at the contact patches (docs/plant.md, "Rotating inertia")."""
    return P[PK.M] / (P[PK.M] + P[PK.M_ROT]) if drv else 1.0


# --------------------------------------------------------------- stage 1: lags (planar.lag, clamp_inputs)
@njit(cache=True, error_model="numpy", inline="always")
def lags_row(m, x, y, W, D):
    """The clamped commands through the exact first-order lags into ``D[DELTA, A, BRAKING]``;
    driven (``m.drv``), the steer lags as in dyn4_step and the acceleration is the powertrain's
    ``D[FD, FB]``, recorded as a command (dyn4.dyn4_drive_step)."""
    P, hdt = m.P, m.hdt
    D[SD.DELTA] = lag(x[S.DELTA], min(max(D[SD.D_IN], -P[PK.DELTA_MAX]), P[PK.DELTA_MAX]), P[PK.TAU_STEER], hdt)
    if m.drv:
        fd, fb = D[SD.FD], D[SD.FB]
        D[SD.A] = (fd - _sign(x[S.VX]) * fb) / P[PK.M]
        D[SD.BRAKING] = 1.0 if fb > abs(fd) else 0.0
    else:
        a = lag(x[S.A], min(max(D[SD.A_IN], -P[PK.A_BRAKE]), P[PK.A_DRIVE]), P[PK.TAU_DRIVE], hdt)
        D[SD.A] = a
        D[SD.BRAKING] = 1.0 if a < 0 else 0.0


@njit(cache=True, error_model="numpy", inline="always")
def lag(state, cmd, tau, hdt):
    """planar.lag: a first-order lag integrated exactly over ``hdt``; ``tau = 0`` passes ``cmd``."""
    return cmd + (state - cmd) * (math.exp(-hdt / tau) if tau > 0 else 0.0)


@njit(cache=True, error_model="numpy", inline="always")
def _sign(v):
    return 1.0 if v > 0 else (-1.0 if v < 0 else 0.0)


# ------------------------------------------------------- stage 2: the ground under the wheels (corners.ground_under)
@njit(cache=True, error_model="numpy", inline="always")
def ground_under_row(b, Xp, Yp, psi, P, slopes, T, W, row=W_.MU):
    """Friction, height and body-frame slopes under the wheels into ``W[MU, HG, SBX, SBY]`` (or
    the four rows from ``row``, in that order), from the terrain kind's sampler on its packed
    ground ``T`` (the module's global ``sampler``, :func:`rough_ground`; :func:`~.numba_powertrain.with_sampler`
    rebuilds this chain with another). The slope step is the torch plant's central
    difference step (corners.ground_under), for samplers without an exact gradient."""
    c_psi, s_psi = math.cos(psi), math.sin(psi)
    step = SLOPE_STEP * P[PK.L] if slopes else 0.0
    for i in range(4):
        xw, yw = P[PK.X_W + i], P[PK.Y_W + i]
        wx = Xp + c_psi * xw - s_psi * yw
        wy = Yp + s_psi * xw + c_psi * yw
        mu, h, hx, hy = sampler(b, wx, wy, T, step)  # the module's global (numba_powertrain.with_sampler)
        W[row, i] = mu
        W[row + 1, i] = h
        if slopes:  # the world-frame slope turned into the body frame
            W[row + 2, i] = c_psi * hx + s_psi * hy
            W[row + 3, i] = -s_psi * hx + c_psi * hy
        else:
            W[row + 2, i] = 0.0
            W[row + 3, i] = 0.0


@njit(cache=True, error_model="numpy", inline="always")
def ground_row(m, x, y, W, D):
    """Stage 2 as a stage: the ground under the wheels at ``x``'s pose into ``W[MU..SBY]`` (the
    slopes where the passive dampers or the grade force need them)."""
    ground_under_row(m.b, x[S.X], x[S.Y], x[S.PSI], m.P, m.passive or m.grade, m.T, W)


@njit(cache=True, error_model="numpy", inline="always")
def advance_ground(W):
    """Hand the ground the books sampled at the step's end (``W[MU1..SBY1]``) to the next substep
    or the observation (``W[MU..SBY]``): the same points, so the same values as sampling again."""
    for k in range(4):
        for i in range(4):
            W[W_.MU + k, i] = W[W_.MU1 + k, i]


# ------------------------------------------------- stage 3: loads, friction, forces (corners.forces_at)
@njit(cache=True, error_model="numpy", inline="always")
def loads_row(m, x, y, W, D):
    """Corner rates, ground rates, spring forces and floored loads into ``W[RATE, HDOT, SPRING, FZ]``."""
    P, passive = m.P, m.passive
    vx, vy, r = x[S.VX], x[S.VY], x[S.R]
    for i in range(4):
        xw, yw, Fz0 = P[PK.X_W + i], P[PK.Y_W + i], P[PK.FZ0 + i]
        rate = x[S.ZD] + yw * x[S.PHID] - xw * x[S.THETAD]
        hdot = W[W_.SBX, i] * (vx - r * yw) + W[W_.SBY, i] * (vy + r * xw) if passive else 0.0
        spring = Fz0 + P[PK.K + i] * (W[W_.HG, i] - (x[S.Z] + yw * x[S.PHI] - xw * x[S.THETA]))
        W[W_.RATE, i], W[W_.HDOT, i], W[W_.SPRING, i] = rate, hdot, spring
        W[W_.FZ, i] = _softplus_floor(spring - P[PK.DAMP + i] * (rate - hdot), FLOOR_SHARE * Fz0)


@njit(cache=True, error_model="numpy", inline="always")
def longitudinal_row(m, x, y, W, D):
    """Load-sensitive friction, the longitudinal forces, the lateral peaks and the locked wheels
    into ``W[FX, DP, LOCK, LIMIT, KLAT]`` (tire.longitudinal_forces at ``D[A]``, or, driven,
    tire.driven_forces with the powertrain's ``D[FD, FB]`` [N]; then corners.forces_at's sliding
    share), on the wheel frames ``W[G0..N2]``; the sum of loads and ``sign(vx)`` into
    ``D[FZ_SUM, SGN]``. ``KLAT`` is 0 on a wheel with ``LOCK`` 0 (nothing reads it there)."""
    P, drv, a, fd, fb = m.P, m.drv, D[SD.A], D[SD.FD], D[SD.FB]
    vx, vy, r = x[S.VX], x[S.VY], x[S.R]
    sgn = _sign(vx)
    mass = P[PK.M]
    kx = road_share(P, drv)
    fz_sum = W[W_.FZ, 0] + W[W_.FZ, 1] + W[W_.FZ, 2] + W[W_.FZ, 3]
    if a >= 0:
        total = mass * a / (1.0 + (mass * a * vx / P[PK.POWER]) ** 4) ** 0.25
    else:
        total = mass * a * sgn
    s = min(max((a + A_BLEND) / (2 * A_BLEND), 0.0), 1.0)
    s = s * s * (3.0 - 2.0 * s)
    for i in range(4):
        Fz, Fz0, share_d = W[W_.FZ, i], P[PK.FZ0 + i], P[PK.DRIVE_SHARE + i]
        factor = 1.0 - P[PK.EPS_LOAD] * (Fz - Fz0) / Fz0
        mu_i = W[W_.MU, i] * (MU_FLOOR + _softplus_floor(factor - MU_FLOOR, MU_FLOOR_SCALE))
        sl = Fz / fz_sum
        limit = mu_i * Fz
        if drv:  # drive by the differentials' shares, brakes by load; kx of it reaches the road
            fx = _softcap(kx * (fd * share_d - fb * sl * sgn), limit)
            demand = kx * (fb * sl)
        else:
            share = sl + s * (share_d - sl)
            fx = _softcap(total * share, limit)
            demand = (mass * max(-a, 0.0)) * share
        W[W_.DP, i] = limit * _ellipse((fx / limit) ** 2)
        lk = min(max((demand / limit - 1.0) / LOCK_WIDTH, 0.0), 1.0)
        lam = lk * lk * (3.0 - 2.0 * lk)
        W[W_.KLAT, i] = 0.0
        if lam != 0.0:  # the locked share slides against the patch's velocity (at lam = 0 torch's blend is fx)
            ba = P[PK.B + i] * SLIDE_ANGLE  # tire.slide_friction
            k_lat = math.sin(P[PK.C + i] * math.atan(ba - P[PK.E + i] * (ba - math.atan(ba))))
            u0 = W[W_.G0, i] * vx + W[W_.G1, i] * vy + W[W_.G2, i] * r
            w0 = W[W_.N0, i] * vx + W[W_.N1, i] * vy + W[W_.N2, i] * r
            fx = (1.0 - lam) * fx - lam * (_sliding_secant(u0, w0, limit, k_lat, P[PK.V_LAT]) * u0)
            W[W_.KLAT, i] = k_lat  # read by the secants only where lam != 0
        W[W_.FX, i], W[W_.LOCK, i], W[W_.LIMIT, i] = fx, lam, limit
    D[SD.FZ_SUM], D[SD.SGN] = fz_sum, sgn


@njit(cache=True, error_model="numpy", inline="always")
def frames_row(m, x, y, W, D):
    """Ackermann's per-wheel steer at ``D[DELTA]`` (corners.ackermann) and the wheel frames
    (planar.wheel_frames) into ``W[COSD, SIND, G0..G2, N0..N2]``."""
    P, delta = m.P, D[SD.DELTA]
    L = P[PK.L]
    for i in range(4):
        xw, yw = P[PK.X_W + i], P[PK.Y_W + i]
        dw = math.atan2(L * math.sin(delta), L * math.cos(delta) - yw * math.sin(delta)) if i < 2 else 0.0
        cd, sd = math.cos(dw), math.sin(dw)
        W[W_.COSD, i], W[W_.SIND, i] = cd, sd
        W[W_.G0, i], W[W_.G1, i], W[W_.G2, i] = cd, sd, xw * sd - yw * cd
        W[W_.N0, i], W[W_.N1, i], W[W_.N2, i] = -sd, cd, xw * cd + yw * sd


@njit(cache=True, error_model="numpy", inline="always")
def forces_row(m, x, y, W, D):
    """Stage 3 (corners.forces_at) and the wheel frames, on the ground ``W[MU..SBY]`` holds at
    ``x``'s pose (stage 2, :func:`ground_under_row`)."""
    loads_row(m, x, y, W, D)
    frames_row(m, x, y, W, D)
    longitudinal_row(m, x, y, W, D)


@njit(cache=True, error_model="numpy", inline="always")
def grade_row(m, x, y, W, D):
    """The grade force ``(fx, fy, mz)`` (corners.grade_force at dyn4.step_normal) into ``D[GR0..GR2]``;
    0 without ``m.grade``."""
    P, passive, hdt = m.P, m.passive, m.hdt
    gr0 = gr1 = gr2 = 0.0
    for i in range(4 if m.grade else 0):
        normal = W[W_.SPRING, i] - 0.5 * hdt * P[PK.K + i] * W[W_.RATE, i]
        if passive:
            normal = normal - P[PK.DAMP + i] * (W[W_.RATE, i] - W[W_.HDOT, i])
        fxi, fyi = -normal * W[W_.SBX, i], -normal * W[W_.SBY, i]
        gr0 += fxi
        gr1 += fyi
        gr2 += P[PK.X_W + i] * fyi - P[PK.Y_W + i] * fxi
    D[SD.GR0], D[SD.GR1], D[SD.GR2] = gr0, gr1, gr2


# ---------------------------------------------------------- stages 4-5: the in-plane step (planar.planar_step)
@njit(cache=True, error_model="numpy", inline="always")
def _secants(vx, vy, r, P, W):
    for i in range(4):
        w = W[W_.N0, i] * vx + W[W_.N1, i] * vy + W[W_.N2, i] * r
        uu = W[W_.G0, i] * vx + W[W_.G1, i] * vy + W[W_.G2, i] * r
        sec = _secant(w, uu, W[W_.DP, i], P[PK.B + i], P[PK.C + i], P[PK.E + i], P[PK.V_LAT])
        lam = W[W_.LOCK, i]
        if lam != 0.0:  # planar_step's sliding share (exactly sec at lam = 0)
            sec = (1.0 - lam) * sec + lam * _sliding_secant(uu, w, W[W_.LIMIT, i], W[W_.KLAT, i], P[PK.V_LAT])
        W[W_.SEC, i] = sec


@njit(cache=True, error_model="numpy", inline="always")
def planar_row(m, x, y, W, D):
    """``vx`` explicit with the speed clamp, ``(vy, r)`` implicit with the tires' secants, under the
    grade force and the external port (``D[GR0..GR2] + D[FE0..FE2]``); the lateral forces into
    ``W[SEC, FY0, FY]``, ``(vx+, vy+, r+, vx_free, drag)`` into ``D[VX1, VY1, R1, VX_FREE, DRAG]``.
    The clamp holds where ``D[BRAKING]`` and a wheel still rolls (dyn4._advance: off once every
    wheel is LOCKED). The road share ``kx`` (:func:`road_share`): 1 for the acceleration command,
    ``m / (m + m_rot)`` driven."""
    P, hdt = m.P, m.hdt
    kx = road_share(P, m.drv)
    braking = D[SD.BRAKING] != 0.0 and min(min(W[W_.LOCK, 0], W[W_.LOCK, 1]),
                                           min(W[W_.LOCK, 2], W[W_.LOCK, 3])) < LOCKED
    ext0, ext1, ext2 = D[SD.GR0] + D[SD.FE0], D[SD.GR1] + D[SD.FE1], D[SD.GR2] + D[SD.FE2]
    mass, Iz = P[PK.M], P[PK.IZ]
    vx, vy, r = x[S.VX], x[S.VY], x[S.R]
    _secants(vx, vy, r, P, W)
    fx_body = 0.0
    for i in range(4):
        W[W_.FY0, i] = -W[W_.SEC, i] * (W[W_.N0, i] * vx + W[W_.N1, i] * vy + W[W_.N2, i] * r)
        fx_body += W[W_.FX, i] * W[W_.G0, i] + kx * W[W_.FY0, i] * W[W_.N0, i]
    drag = P[PK.C_DRAG] * vx * abs(vx) + P[PK.F_ROLL] * math.tanh(vx / P[PK.V_ROLL])
    vx_free = vx + hdt * ((fx_body - kx * drag + kx * ext0) / mass + kx * r * vy)
    vx1 = 0.0 if (braking and vx * vx_free <= 0) else vx_free
    fx_gy = ext1
    fx_gr = ext2
    for i in range(4):
        fx_gy += W[W_.FX, i] * W[W_.G1, i]
        fx_gr += W[W_.FX, i] * W[W_.G2, i]
    vy1 = vy
    r1 = r
    for it in range(N_SECANT + 1):
        if it > 0:
            _secants(vx1, vy1, r1, P, W)
        Pp = Qq = Cc = S10 = S20 = 0.0
        for i in range(4):
            sec, n0, n1, n2 = W[W_.SEC, i], W[W_.N0, i], W[W_.N1, i], W[W_.N2, i]
            Pp += sec * n1 * n1
            Qq += sec * n2 * n2
            Cc += sec * n1 * n2
            S10 += sec * n1 * n0
            S20 += sec * n2 * n0
        a00 = mass + hdt * Pp
        a01 = hdt * (mass * vx1 + Cc)
        a10 = hdt * Cc
        a11 = Iz + hdt * Qq
        b0 = mass * vy + hdt * (fx_gy - vx1 * S10)
        b1 = Iz * r + hdt * (fx_gr - vx1 * S20)
        det = a00 * a11 - a01 * a10
        vy1 = (a11 * b0 - a01 * b1) / det
        r1 = (a00 * b1 - a10 * b0) / det
    for i in range(4):
        W[W_.FY, i] = -W[W_.SEC, i] * (W[W_.N0, i] * vx1 + W[W_.N1, i] * vy1 + W[W_.N2, i] * r1)
    D[SD.VX1], D[SD.VY1], D[SD.R1], D[SD.VX_FREE], D[SD.DRAG] = vx1, vy1, r1, vx_free, drag


# --------------------------------------------------------------- stage 6: heave, roll, pitch (dyn4._vertical)
@njit(cache=True, error_model="numpy", inline="always")
def vertical_row(m, x, y, W, D):
    """Midpoint springs, backward-Euler dampers: ``y[Z..THETAD]`` from ``x`` and the forces."""
    P, hdt = m.P, m.hdt
    mass, h, Ix, Iy = P[PK.M], P[PK.H], P[PK.IX], P[PK.IY]
    fx_b = fy_b = 0.0
    for i in range(4):
        fx, fy, cd, sd = W[W_.FX, i], W[W_.FY, i], W[W_.COSD, i], W[W_.SIND, i]
        fx_b += fx * cd - fy * sd
        fy_b += fx * sd + fy * cd
    K0, K1, K2, K3, K4, K5 = corner_sum(P, PK.K)
    D0, D1, D2, D3, D4, D5 = corner_sum(P, PK.DAMP)
    fz = fphi = fth = 0.0
    for i in range(4):
        sp = W[W_.SPRING, i] - 0.25 * hdt * P[PK.K + i] * W[W_.RATE, i] + P[PK.DAMP + i] * W[W_.HDOT, i]
        fz += sp
        fphi += sp * P[PK.Y_W + i]
        fth -= sp * P[PK.X_W + i]
    h2 = 0.25 * hdt * hdt
    A00 = hdt * D0 + h2 * K0 + mass
    A01 = hdt * D1 + h2 * K1
    A02 = hdt * D2 + h2 * K2
    A11 = hdt * D3 + h2 * K3 + Ix
    A12 = hdt * D4 + h2 * K4
    A22 = hdt * D5 + h2 * K5 + Iy
    bb0 = mass * x[S.ZD] + hdt * (fz - mass * P[PK.G])
    bb1 = Ix * x[S.PHID] + hdt * (fphi + h * fy_b)
    bb2 = Iy * x[S.THETAD] + hdt * (fth - h * fx_b)
    qd0, qd1, qd2 = solve_sym3(A00, A01, A02, A11, A12, A22, bb0, bb1, bb2)
    y[S.Z] = x[S.Z] + 0.5 * hdt * (x[S.ZD] + qd0)
    y[S.PHI] = x[S.PHI] + 0.5 * hdt * (x[S.PHID] + qd1)
    y[S.THETA] = x[S.THETA] + 0.5 * hdt * (x[S.THETAD] + qd2)
    y[S.ZD], y[S.PHID], y[S.THETAD] = qd0, qd1, qd2


# ----------------------------------------------------------------------------------- stage 7: the pose
@njit(cache=True, error_model="numpy", inline="always")
def pose_row(m, x, y, W, D):
    """The pose from the new twist ``D[VX1, VY1, R1]``, yaw at the step's midpoint; the twist and the
    lags ``D[DELTA, A]`` into ``y``."""
    hdt, vx1, vy1, r1 = m.hdt, D[SD.VX1], D[SD.VY1], D[SD.R1]
    psi = x[S.PSI]
    psi_m = psi + 0.5 * hdt * r1
    cm, sm = math.cos(psi_m), math.sin(psi_m)
    y[S.X] = x[S.X] + hdt * (vx1 * cm - vy1 * sm)
    y[S.Y] = x[S.Y] + hdt * (vx1 * sm + vy1 * cm)
    y[S.PSI] = psi + hdt * r1
    y[S.VX], y[S.VY], y[S.R] = vx1, vy1, r1
    y[S.DELTA], y[S.A] = D[SD.DELTA], D[SD.A]


# ------------------------------------------------------------------- the books (energy.step_books)
@njit(cache=True, error_model="numpy", inline="always")
def corner_sum(P, block):
    """``(zz, zp, zt, pp, pt, tt)`` of ``sum_i w_i a_i a_i^T``, ``a_i = (1, y_i, -x_i)``, for the
    per-wheel parameter ``w`` at ``P[block:block + 4]`` (corners.corner_sum)."""
    s0 = s1 = s2 = s3 = s4 = s5 = 0.0
    for i in range(4):
        w, xw, yw = P[block + i], P[PK.X_W + i], P[PK.Y_W + i]
        s0 += w
        s1 += w * yw
        s2 -= w * xw
        s3 += w * yw * yw
        s4 -= w * xw * yw
        s5 += w * xw * xw
    return s0, s1, s2, s3, s4, s5


@njit(cache=True, error_model="numpy", inline="always")
def solve_sym3(a00, a01, a02, a11, a12, a22, b0, b1, b2):
    """The symmetric 3x3 system ``A x = b`` by cofactors (dyn4._solve_sym3, term for term)."""
    c00 = a11 * a22 - a12 * a12
    c01 = a02 * a12 - a01 * a22
    c02 = a01 * a12 - a02 * a11
    c11 = a00 * a22 - a02 * a02
    c12 = a01 * a02 - a00 * a12
    c22 = a00 * a11 - a01 * a01
    det = a00 * c00 + a01 * c01 + a02 * c02
    return ((c00 * b0 + c01 * b1 + c02 * b2) / det, (c01 * b0 + c11 * b1 + c12 * b2) / det,
            (c02 * b0 + c12 * b1 + c22 * b2) / det)


@njit(cache=True, error_model="numpy", inline="always")
def rest_row(b, X0, Y0, psi, P, T, x):
    """The settled rest state at pose ``(X0, Y0, psi)`` [m, m, rad] on row ``b``'s rough ground
    ``T`` into ``x (N_DYN4,)`` (dyn4.dyn4_rest, term for term): the springs carry the weight,
    ``K q = sum_i k_i hg_i a_i`` with ``a_i = (1, y_i, -x_i)``, one 3x3 solve regularised by
    ``1e-12 ||K||``; every entry but the pose and ``q`` (heave, roll, pitch) 0, whatever the state's
    length."""
    K0, K1, K2, K3, K4, K5 = corner_sum(P, PK.K)
    cp, sp = math.cos(psi), math.sin(psi)
    r0 = r1 = r2 = 0.0
    for i in range(4):
        xw, yw = P[PK.X_W + i], P[PK.Y_W + i]
        kh = P[PK.K + i] * height_at(b, X0 + cp * xw - sp * yw, Y0 + sp * xw + cp * yw, T)
        r0 += kh
        r1 += kh * yw
        r2 -= kh * xw
    reg = 1e-12 * (K0 + K3 + K5)
    q0, q1, q2 = solve_sym3(K0 + reg, K1, K2, K3 + reg, K4, K5 + reg, r0, r1, r2)
    for i in range(x.shape[0]):
        x[i] = 0.0
    x[S.X], x[S.Y], x[S.PSI] = X0, Y0, psi
    x[S.Z], x[S.PHI], x[S.THETA] = q0, q1, q2


@njit(cache=True, error_model="numpy", inline="always")
def energy_row(x, P, hg, drv):
    """The port-Hamiltonian energy [J] of state ``x`` over ground heights ``hg (4,)``
    (energy.dyn4_energy; ``drv``: with the rotating parts' ``1/2 m_rot vx^2``)."""
    m = P[PK.M]
    vx, vy, r, zd, pd, td = x[S.VX], x[S.VY], x[S.R], x[S.ZD], x[S.PHID], x[S.THETAD]
    kin = 0.5 * (m * (vx * vx + vy * vy + zd * zd) + P[PK.IZ] * r * r + P[PK.IX] * pd * pd + P[PK.IY] * td * td)
    if drv:
        kin = kin + 0.5 * P[PK.M_ROT] * vx * vx
    pot = 0.0
    for i in range(4):
        kk = P[PK.K + i]
        sp = P[PK.FZ0 + i] + kk * (hg[i] - (x[S.Z] + P[PK.Y_W + i] * x[S.PHI] - P[PK.X_W + i] * x[S.THETA]))
        pot += 0.5 * sp * sp / kk
    return kin + pot + m * P[PK.G] * x[S.Z]


@njit(cache=True, error_model="numpy", inline="always")
def books_row(m, x, y, W, D, bk, dwork):
    """The substep ``x -> y``'s lines into ``bk`` (BOOK), from its forces (``W``) and data (``D``);
    driven, its DriveWork ``(drive, brakes, wheelspin, v_drive, sliding)`` into ``dwork``. The ground at the
    step's end goes to ``W[MU1..SBY1]``."""
    b, P, T, hdt, grade, passive, drv = m.b, m.P, m.T, m.hdt, m.grade, m.passive, m.drv
    fd, fb, fz_sum, sgn, vx_free, drag = D[SD.FD], D[SD.FB], D[SD.FZ_SUM], D[SD.SGN], D[SD.VX_FREE], D[SD.DRAG]
    gr0, gr1, gr2, fe0, fe1, fe2 = D[SD.GR0], D[SD.GR1], D[SD.GR2], D[SD.FE0], D[SD.FE1], D[SD.FE2]
    h = P[PK.H]
    vx1, vy1, r1 = y[S.VX], y[S.VY], y[S.R]
    vxm, vym, rm = 0.5 * (x[S.VX] + vx1), 0.5 * (x[S.VY] + vy1), 0.5 * (x[S.R] + r1)
    qd0, qd1, qd2 = y[S.ZD], y[S.PHID], y[S.THETAD]
    pdm, tdm = 0.5 * (x[S.PHID] + qd1), 0.5 * (x[S.THETAD] + qd2)
    supplied = tire = lever = damper = through = spun = 0.0
    v_drive = w_brake = w_spin = w_slide = 0.0
    for i in range(4):
        xw, yw, cd, sd = P[PK.X_W + i], P[PK.Y_W + i], W[W_.COSD, i], W[W_.SIND, i]
        fx, fy, hdot, cc = W[W_.FX, i], W[W_.FY, i], W[W_.HDOT, i], P[PK.DAMP + i]
        yi = W[W_.G0, i] * vxm + W[W_.G1, i] * vym + W[W_.G2, i] * rm + h * (sd * pdm - cd * tdm)
        supplied += fx * yi
        spun += fx * W[W_.G0, i]
        if drv:
            di, bi = fd * P[PK.DRIVE_SHARE + i], fb * (W[W_.FZ, i] / fz_sum) * sgn
            v_drive += P[PK.DRIVE_SHARE + i] * yi
            lam = W[W_.LOCK, i]  # dyn4.drive_work: the locked share slides, its brakes do no work
            w_brake += (1.0 - lam) * bi * yi
            w_spin += (1.0 - lam) * (di - bi - fx) * yi
            w_slide += lam * (di - fx) * yi
        tire += W[W_.FY0, i] * W[W_.N0, i] * vxm + fy * (W[W_.N1, i] * vym + W[W_.N2, i] * rm)
        lever += fy * h * (cd * pdm + sd * tdm)
        rel1 = qd0 + yw * qd1 - xw * qd2 - hdot
        relm = (0.5 * (x[S.ZD] + qd0) + yw * pdm - xw * tdm) - hdot
        damper += cc * rel1 * relm
        through += cc * rel1 * hdot
    supplied *= hdt
    spun = hdt * (P[PK.M_ROT] / P[PK.M]) * spun * vxm if drv else 0.0  # energy.spin_up
    supplied += spun
    tire *= -hdt
    lever *= hdt
    damper *= hdt
    through *= -hdt
    dragw = hdt * drag * vxm
    gradew = hdt * (gr0 * vxm + gr1 * vym + gr2 * rm) if grade else 0.0
    external = hdt * (fe0 * vxm + fe1 * vym + fe2 * rm)
    limiter = ((P[PK.M] + P[PK.M_ROT]) if drv else P[PK.M]) * (vx1 - vx_free) * vxm
    hg, hg1 = W[W_.HG], W[W_.HG1]
    H0 = energy_row(x, P, hg, drv)
    H1_old = energy_row(y, P, hg, drv)
    ground_under_row(b, y[S.X], y[S.Y], y[S.PSI], P, passive or grade, T, W, W_.MU1)
    H1 = energy_row(y, P, hg1, drv)
    ground = H1 - H1_old + through
    dH = H1 - H0
    dissipated = tire + damper + dragw
    bk[BOOK.DH], bk[BOOK.SUPPLIED], bk[BOOK.DISSIPATED], bk[BOOK.TIRE] = dH, supplied, dissipated, tire
    bk[BOOK.DAMPER], bk[BOOK.DRAG], bk[BOOK.LEVER], bk[BOOK.GRADE] = damper, dragw, lever, gradew
    bk[BOOK.GROUND], bk[BOOK.LIMITER], bk[BOOK.EXTERNAL] = ground, limiter, external
    bk[BOOK.RESIDUAL] = dH - (supplied - dissipated + lever + gradew + ground + limiter + external)
    if drv:
        dwork[DW.DRIVE], dwork[DW.BRAKES], dwork[DW.WHEELSPIN] = hdt * fd * v_drive, hdt * w_brake, hdt * w_spin - spun
        dwork[DW.V_DRIVE], dwork[DW.SLIDING] = v_drive, hdt * w_slide


# ---------------------------------------------------------------------------------- the whole substep
@njit(cache=True, error_model="numpy")
def substep_row(m, x, y, W, D, bk, dwork):
    """One substep of row ``m.b`` (dyn4.dyn4_step, stage by stage; MJX-style, every stage
    ``stage(m, ...)`` over the named blocks): state ``x (N_DYN4,)`` and the inputs in ``D``
    (:class:`SD`: the command ``D_IN, A_IN``, the external port ``FE0..FE2`` = (Fx, Fy, Mz)) ->
    ``y (N_DYN4,)`` and, with ``m.books``, the books ``bk`` (BOOK). ``W (N_SCRATCH, 4)`` is the
    per-wheel scratch, ``D`` the substep's data (each stage's outputs, :data:`STAGE_WRITES`).

    Driven (``m.drv``): by the powertrain's forces ``D[FD, FB]`` [N] instead of ``A_IN``
    (dyn4.dyn4_drive_step); with ``m.books`` its DriveWork goes to ``dwork (N_DW,)``.
    The caller samples the ground at ``x`` into ``W[MU..SBY]`` first (stage 2,
    :func:`ground_under_row`), or hands on what the previous substep's books sampled at the same
    pose (:func:`advance_ground`): the ground is sampled once per substep.

    Every entry of ``x`` the stages below do not write is carried over to ``y`` (as torch's
    plant.state.with_entries): a state grown past today's passes through (issue 49)."""
    for i in range(x.shape[0]):
        y[i] = x[i]
    lags_row(m, x, y, W, D)
    forces_row(m, x, y, W, D)
    grade_row(m, x, y, W, D)
    planar_row(m, x, y, W, D)
    vertical_row(m, x, y, W, D)
    pose_row(m, x, y, W, D)
    if m.books:
        books_row(m, x, y, W, D, bk, dwork)


@njit(cache=True, error_model="numpy", inline="always")
def new_data(d_in, a_in, fe0, fe1, fe2, fd, fb):
    """A substep's data block ``D (N_SD,)`` with the caller's inputs (:class:`SD`) and every stage's
    entries NaN until the stage writes them."""
    D = np.full(N_SD, np.nan)
    D[SD.D_IN], D[SD.A_IN], D[SD.FE0], D[SD.FE1], D[SD.FE2], D[SD.FD], D[SD.FB] = d_in, a_in, fe0, fe1, fe2, fd, fb
    return D


def _step_rows_py(X0, U, FE, P, grade, passive, hdt, want_books, T, X1, BK):
    for b in prange(X0.shape[0]):
        m = Substep(b, P, T, hdt, grade, passive, False, want_books)
        W = np.empty((N_SCRATCH, 4))
        dw = np.empty(N_DW)
        D = new_data(U[b, 0], U[b, 1], FE[b, 0], FE[b, 1], FE[b, 2], 0.0, 0.0)
        ground_row(m, X0[b], X1[b], W, D)
        substep_row(m, X0[b], X1[b], W, D, BK[b], dw)


def rebuild(fn, suffix: str, cache: bool, parallel: bool = False, **names):
    """A Numba build of the ``@njit`` function (or plain function) ``fn`` with its own options,
    ``parallel`` if asked, and its globals ``names`` replaced (another sampler, the rebuilt
    functions it calls), under a renamed copy: Numba's disk cache keys a function by its name
    and would hand one build to all."""
    py = getattr(fn, "py_func", fn)
    twin = types.FunctionType(py.__code__, {**py.__globals__, **names}, py.__name__ + suffix, py.__defaults__,
                              py.__closure__)
    twin.__qualname__ = py.__qualname__ + suffix
    opts = {k: v for k, v in getattr(fn, "targetoptions", {}).items() if k in ("error_model", "inline")}
    opts.setdefault("error_model", "numpy")
    return njit(cache=cache, parallel=parallel, **opts)(twin)


def sampler_tag(ground) -> str:
    """The name a sampler's builds carry: its module and name, so two samplers called alike
    (``sample`` in two users' modules) never share an entry of Numba's disk cache."""
    py = getattr(ground, "py_func", ground)
    return re.sub(r"\W", "_", f"{py.__module__}_{py.__qualname__}")


@njit(cache=True, error_model="numpy", inline="always")
def ground_point(b, X, Y, T):
    """The ground's ``(friction, height [m])`` at one world point ``(X, Y)`` [m] of row ``b`` (the
    bound sampler's)."""
    mu, h, _, _ = sampler(b, X, Y, T, 0.0)
    return mu, h


def serial_and_parallel(fn, names=None, suffix: str = "", cache: bool = True):
    """One serial and one row-parallel (``prange``) build of the entry ``fn``, its globals
    ``names`` replaced (:func:`rebuild`): a thread pool's start costs more than a small batch's
    whole step."""
    sfx = "_" + suffix if suffix else ""
    return (rebuild(fn, sfx, cache, **(names or {})),
            rebuild(fn, sfx + "_parallel", cache, parallel=True, **(names or {})))


_step_rows_serial, _step_rows_parallel = serial_and_parallel(_step_rows_py)
PARALLEL_FROM = 256  # rows


def dyn4_step_np(x, u, packed, terrain, hdt: float = 0.01, books: bool = False, f_ext=None):
    """One substep on the CPU engine: ``x (B, 14)``, ``u (B, 2)`` float64 arrays, ``packed`` from
    :func:`pack_params`, ``terrain`` from :func:`pack_terrain`, ``f_ext (B, 3)`` the external
    port's ``(Fx, Fy, Mz)`` (None: zero). Returns ``x+ (B, 14)`` and, with ``books``,
    ``(B, N_BOOKS)`` lines in ``BOOK_LINES``."""
    P, grade, passive = packed
    x = np.ascontiguousarray(x, dtype=np.float64)
    u = np.ascontiguousarray(u, dtype=np.float64)
    fe = np.zeros((x.shape[0], 3)) if f_ext is None else np.ascontiguousarray(
        np.broadcast_to(np.asarray(f_ext, dtype=np.float64), (x.shape[0], 3)))
    if x.ndim != 2 or x.shape[1] != N_DYN4 or u.shape != (x.shape[0], 2):
        raise ValueError(f"dyn4_step_np needs x (B, {N_DYN4}) and u (B, 2), got {x.shape} and {u.shape}")
    out = np.empty_like(x)
    bk = np.zeros((x.shape[0], N_BOOKS))
    kernel = _step_rows_parallel if x.shape[0] >= PARALLEL_FROM else _step_rows_serial
    kernel(x, u, fe, P, grade, passive, float(hdt), books, tuple(terrain), out, bk)
    return (out, bk) if books else out
