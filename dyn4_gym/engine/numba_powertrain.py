"""The powertrain in Numba: the CPU engine's copy of :mod:`dyn4_gym.plant.powertrain` and
:func:`dyn4_gym.plant.drive.drive_step`, stage by stage and in the same order (float64).

tests/test_powertrain_engine.py holds it to the torch reference (1e-9) and to a golden file.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
from numba import njit, prange

from ..model.books import N_BOOKS, N_PT_LINES, PTB
from ..model.constants import OVERRUN, RPM
from ..model.packed import PK, PQ
from ..model.state import DYN4 as S, N_DYN4, PT
from ..model.task import ACT
from .numba_plant import (DW, N_DW, N_SCRATCH, SD, Substep, books_row, ground_point, ground_row, ground_under_row,
                          new_data, rebuild, sampler_tag, serial_and_parallel, substep_row)

__all__ = ["pack_powertrain", "drive_step_np", "PF", "N_PF"]


class PF(IntEnum):
    """One substep's powertrain forces and torques (forces_row's output, powertrain.PowertrainForces)."""

    F_DRIVE = 0  # [N] at the contact patches
    F_BRAKE = 1  # [N]
    T_ENGINE = 2  # [N m]
    T_PUMP = 3
    T_TURBINE = 4
    EFF = 5  # driveline efficiency this substep (eta, or 1 / eta backdriven)
    RATIO = 6  # gear ratio
    FUEL_POWER = 7  # [W]


N_PF = len(PF)


def pack_powertrain(pt) -> tuple:
    """``(vector, maps)`` of a :class:`PowertrainParams`: the scalars and ratios, and the four
    maps (torque, losses, capacity factor, torque ratio) as ``(n, 2)`` float64 arrays."""
    pt = pt.as_numbers()  # a field given as a 0-d tensor (dyn4_gym.fit) is packed by its value
    head = [pt.crank_inertia, pt.upshift_rpm, pt.downshift_rpm, pt.shift_delay, pt.coupling_sr, pt.brake_torque,
            pt.wheel_radius, pt.driveline_efficiency, pt.idle_rpm, pt.idle_band_rpm, pt.indicated_efficiency,
            float(pt.n_gears), pt.reverse_ratio, float(pt.fuel_cut), float(OVERRUN.index(pt.overrun)),
            float(pt.reverse_lockout)]
    assert len(head) == PQ.G1
    vec = np.asarray(head + list(pt.gear_ratios), dtype=np.float64)
    maps = tuple(np.ascontiguousarray(np.asarray(m, dtype=np.float64)) for m in
                 (pt.torque_map, pt.losses_map, pt.capacity_map, pt.torque_ratio_map))
    return vec, maps


@njit(cache=True, error_model="numpy", inline="always")
def _interp(x, m):
    """powertrain.interp: a sum of clamped ramps, term for term."""
    n = m.shape[0]
    xc = min(max(x, m[0, 0]), m[n - 1, 0])
    y = m[0, 1]
    for k in range(n - 1):
        xa, xb = m[k, 0], m[k + 1, 0]
        y = y + (m[k + 1, 1] - m[k, 1]) / (xb - xa) * min(max(xc - xa, 0.0), xb - xa)
    return y


@njit(cache=True, error_model="numpy", inline="always")
def _ratio(gear, Q):
    return Q[PQ.REV] if gear < 0 else Q[PQ.G1 + int(gear) - 1]


@njit(cache=True, error_model="numpy")
def select_gear_row(s, direction, vx, Q, hdt):
    """powertrain.select_gear for one row, in place on ``s (3,)``."""
    gear, t = s[PT.GEAR], s[PT.T_SHIFT] + hdt
    to_rev = direction < 0 and gear > 0 and not vx >= Q[PQ.LOCKOUT]
    to_fwd = direction > 0 and gear < 0 and not vx <= -Q[PQ.LOCKOUT]
    rpm_t = vx / (_ratio(gear, Q) * Q[PQ.R]) * RPM
    ready = gear > 0 and t >= Q[PQ.DELAY] and not to_rev
    up = ready and rpm_t > Q[PQ.UP] and gear < Q[PQ.NG]
    down = ready and rpm_t < Q[PQ.DOWN] and gear > 1
    g1 = -1.0 if to_rev else (1.0 if to_fwd else gear)
    g1 = g1 + (1.0 if up else 0.0) - (1.0 if down else 0.0)
    s[PT.GEAR] = g1
    s[PT.T_SHIFT] = 0.0 if (to_rev or to_fwd or up or down) else t


@njit(cache=True, error_model="numpy")
def forces_row(s, throttle, brake, vx, Q, maps, out):
    """powertrain.powertrain_forces for one row into ``out (8,)``: f_drive, f_brake, t_engine,
    t_pump, t_turbine, eff, ratio, fuel_power."""
    tq, loss, cf, tr = maps
    w_e = s[PT.OMEGA_E]
    ratio = _ratio(s[PT.GEAR], Q)
    rpm = w_e * RPM
    opening = min(max((Q[PQ.IDLE] - rpm) / Q[PQ.BAND], 0.0), 1.0)
    theta = throttle + (1.0 - throttle) * opening
    t_map = _interp(rpm, tq)
    t_comb = theta * (max(t_map, 0.0) if Q[PQ.FUEL_CUT] != 0.0 else t_map)
    t_engine = t_comb + _interp(rpm, loss)
    fuel_power = max(t_comb, 0.0) * w_e / Q[PQ.ETA_I]
    w_t = vx / (ratio * Q[PQ.R])
    sr = w_t / max(w_e, 1e-6)
    back = sr > 1.0
    w_drive = w_e
    if back and Q[PQ.OVERRUN] != 0.0:  # "turbine": the driving member drives (powertrain_forces)
        w_drive = w_t
        sigma = min(max(w_e / w_t, 0.0), 1.0)
    else:
        sigma = min(max(2.0 - sr if back else sr, 0.0), 1.0)
    fade = min((1.0 - sigma) / (1.0 - Q[PQ.COUPLE]), 1.0)
    t_pump = (w_drive / _interp(sigma, cf)) ** 2 * fade
    if back:
        t_pump = -t_pump
    t_turbine = t_pump if back else _interp(sigma, tr) * t_pump
    eff = Q[PQ.ETA] if t_turbine * w_t >= 0 else 1.0 / Q[PQ.ETA]
    out[PF.F_DRIVE] = eff * t_turbine / (ratio * Q[PQ.R])
    out[PF.F_BRAKE] = brake * (4.0 * Q[PQ.TB] / Q[PQ.R])
    out[PF.T_ENGINE], out[PF.T_PUMP], out[PF.T_TURBINE] = t_engine, t_pump, t_turbine
    out[PF.EFF], out[PF.RATIO], out[PF.FUEL_POWER] = eff, ratio, fuel_power


@njit(cache=True, error_model="numpy")
def drive_substep_row(m, pt, x, s, y, W, D, bk, pbk, pf, dwork):
    """drive.drive_step for one row (``m.drv`` set; ``pt = (Q, maps)``, :func:`pack_powertrain`):
    ``x (N_DYN4,)``, ``s (N_PT,)`` (stepped in place), the driver's commands ``D[STEER, THROTTLE,
    BRAKE, DIRECTION]`` -> ``y (N_DYN4,)``; the powertrain's forces into ``pf`` (:class:`PF`), and
    with ``m.books`` the plant's books ``bk`` and the powertrain's ``pbk`` (POWERTRAIN_LINES).
    ``W[MU..SBY]`` hold the ground at ``x`` (numba_plant.substep_row)."""
    Q, maps = pt
    hdt = m.hdt
    steer = min(max(D[SD.STEER], -1.0), 1.0)
    throttle = min(max(D[SD.THROTTLE], 0.0), 1.0)
    brake = min(max(D[SD.BRAKE], 0.0), 1.0)
    select_gear_row(s, -1.0 if D[SD.DIRECTION] < 0 else 1.0, x[S.VX], Q, hdt)
    forces_row(s, throttle, brake, x[S.VX], Q, maps, pf)
    D[SD.D_IN], D[SD.A_IN] = steer * m.P[PK.DELTA_MAX], 0.0
    D[SD.FE0], D[SD.FE1], D[SD.FE2] = 0.0, 0.0, 0.0
    D[SD.FD], D[SD.FB] = pf[PF.F_DRIVE], pf[PF.F_BRAKE]
    substep_row(m, x, y, W, D, bk, dwork)
    w0 = s[PT.OMEGA_E]
    w1 = w0 + hdt * (pf[PF.T_ENGINE] - pf[PF.T_PUMP]) / Q[PQ.J]
    s[PT.OMEGA_E] = w1
    if m.books:  # powertrain.powertrain_books; dwork is the plant's DriveWork (drive, brakes, wheelspin, v_drive, sliding)
        w_m = 0.5 * (w0 + w1)
        w_t = dwork[DW.V_DRIVE] / (pf[PF.RATIO] * Q[PQ.R])
        fuel = hdt * pf[PF.FUEL_POWER]
        engine = fuel - hdt * pf[PF.T_ENGINE] * w_m
        crank = 0.5 * Q[PQ.J] * (w1 * w1 - w0 * w0)
        converter = hdt * (pf[PF.T_PUMP] * w_m - pf[PF.T_TURBINE] * w_t)
        driveline = hdt * pf[PF.T_TURBINE] * w_t * (1.0 - pf[PF.EFF])
        pbk[PTB.FUEL], pbk[PTB.POWERTRAIN] = fuel, engine + crank + converter + driveline
        pbk[PTB.ENGINE], pbk[PTB.CRANK], pbk[PTB.CONVERTER], pbk[PTB.DRIVELINE] = engine, crank, converter, driveline
        pbk[PTB.DRIVE], pbk[PTB.BRAKES], pbk[PTB.WHEELSPIN] = dwork[DW.DRIVE], dwork[DW.BRAKES], dwork[DW.WHEELSPIN]
        pbk[PTB.SLIDING] = dwork[DW.SLIDING]


def _drive_rows_py(X0, PTS, DRV, packed, pt, hdt, want_books, T, X1, BK, PBK):
    P, grade, passive = packed
    Q, maps = pt  # unpacked, and the rows' tuples built in the loop: a prange body takes no nested tuple from outside
    for b in prange(X0.shape[0]):
        m = Substep(b, P, T, hdt, grade, passive, True, want_books)
        W = np.empty((N_SCRATCH, 4))
        pf = np.empty(N_PF)
        dwork = np.zeros(N_DW)
        D = new_data(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        D[SD.STEER], D[SD.THROTTLE], D[SD.BRAKE] = DRV[b, ACT.STEER], DRV[b, ACT.THROTTLE], DRV[b, ACT.BRAKE]
        D[SD.DIRECTION] = DRV[b, ACT.DIRECTION] if DRV.shape[1] > ACT.DIRECTION else 1.0
        ground_row(m, X0[b], X1[b], W, D)
        drive_substep_row(m, (Q, maps), X0[b], PTS[b], X1[b], W, D, BK[b], PBK[b], pf, dwork)


_drive_rows_serial, _drive_rows_parallel = serial_and_parallel(_drive_rows_py)
PARALLEL_FROM = 256


def drive_step_np(x, s, driver, packed, packed_pt, terrain, hdt: float = 0.01, books: bool = False):
    """drive_step on the CPU engine: ``x (B, 14)``, ``s (B, 3)``, ``driver (B, 3 or 4)`` float64.
    Returns ``(x+, s+)`` and, with ``books``, the plant's lines (``BOOK_LINES``) and the
    powertrain's (``POWERTRAIN_LINES``), each ``(B, n)``."""
    P, grade, passive = packed
    Q, maps = packed_pt
    x = np.ascontiguousarray(x, dtype=np.float64)
    s1 = np.array(s, dtype=np.float64, order="C", copy=True)
    d = np.ascontiguousarray(driver, dtype=np.float64)
    if (x.ndim != 2 or x.shape[1] != N_DYN4 or d.ndim != 2 or d.shape[1] not in (3, 4) or d.shape[0] != x.shape[0]
            or s1.shape != (x.shape[0], 3)):
        raise ValueError(f"drive_step_np needs x (B, {N_DYN4}), s (B, 3), driver (B, 3 or 4); got {x.shape}, "
                         f"{s1.shape}, {d.shape}")
    gear = s1[:, PT.GEAR]
    if not np.all((gear == -1.0) | ((gear >= 1.0) & (gear <= Q[PQ.NG]) & (gear == np.round(gear)))):
        # the kernel indexes its ratio table by the gear: an unknown one would read past it
        raise ValueError(f"drive_step_np: s[:, 1] (gear) must be -1 or 1..{int(Q[PQ.NG])}, got {np.unique(gear)[:8]}")
    out = np.empty_like(x)
    bk = np.zeros((x.shape[0], N_BOOKS))
    pbk = np.zeros((x.shape[0], N_PT_LINES))
    kernel = _drive_rows_parallel if x.shape[0] >= PARALLEL_FROM else _drive_rows_serial
    kernel(x, s1, d, (P, grade, passive), (Q, maps), float(hdt), books, tuple(terrain), out, bk, pbk)
    return (out, s1, bk, pbk) if books else (out, s1)


def with_sampler(ground, cache: bool) -> dict:
    """The functions that sample the ground, rebuilt with the sampler ``ground`` as their global
    ``sampler``: ``{name: build}``, by the names the entry kernels call them. A global is bound
    at compile time; a sampler passed from Python as an argument costs Numba a type lookup on
    every call (measured 4.2 us, a tenth of a single env's step). Here, beside the powertrain's
    substep that the chain ends in, so the plant's module imports nothing of this one."""
    sfx = "_" + sampler_tag(ground)
    gur = rebuild(ground_under_row, sfx, cache, sampler=ground)
    bk = rebuild(books_row, sfx, cache, ground_under_row=gur)
    sub = rebuild(substep_row, sfx, cache, books_row=bk)
    return dict(ground_under_row=gur, ground_row=rebuild(ground_row, sfx, cache, ground_under_row=gur), substep_row=sub,
                ground_point=rebuild(ground_point, sfx, cache, sampler=ground),
                drive_substep_row=rebuild(drive_substep_row, sfx, cache, substep_row=sub))
