"""The four-wheel plant ``dyn4_step``: 14 states, Ackermann steering, Pacejka tires in a friction
ellipse, spring-damper corners, implicit lateral and vertical steps (docs/plant.md, "The step").

One substep of ``hdt`` seconds:

1. lags of steer and drive, integrated exactly;
2. the ground's friction, height and slopes under the four wheels at the current pose;
3. corner loads and longitudinal forces (corners.py, tire.py);
4-5. the in-plane step (planar.py): ``vx`` explicit with a speed clamp, ``(vy, r)`` implicit with
   the tires' exact secants;
6. ``(z, phi, theta)`` implicit (:func:`_vertical`): springs by the implicit midpoint rule,
   dampers by backward Euler;
7. the pose from the new twist, yaw at the step's midpoint.

Choices docs/plant.md leaves open (and why):

- Ride: 1.5 Hz and damping ratio 0.5 on both axles (Jolt's defaults, inside the HMMWV's
  1.4-2.7 Hz range). Equal frequencies decouple heave and pitch.
- Dampers are passive (on each corner's rate relative to the ground under its wheel);
  ``damper="skyhook"`` keeps the seeds' dampers on the body's own rates.
- Loads are floored at ``0.01 Fz0_i`` by a softplus, so a lifted wheel keeps a small, smooth load.
- Drag: ``1/2 rho CdA vx^2`` with CdA 2.5 m^2 plus LFDM's rolling resistance 0.015; drive split
  equal over the four wheels (full-time 4WD with open differentials); brakes split by load;
  the low-speed blend of the slip angle at 0.5 m/s (tire.py).
- The brakes never reverse the car: a braking step that would cross ``vx = 0`` ends at rest
  (speed clamp, planar.py) while a wheel still rolls. There is no reverse gear, but a car without
  brakes may roll back. Once every wheel is at least half locked (tire.py, "Locked wheels") the
  clamp is off: the sliding friction opposes each patch's velocity and is smooth through
  ``vx = 0``, so the body is never held along one axis while it slides along another.
- Gravity along the ground (the grade force) is off by default, as in the seeds: the terrain
  only lifts the springs and the books show that energy on their ``ground`` line.
  ``dyn4_params(..., grade_force=True)`` adds it (:func:`dyn4_gym.plant.corners.grade_force`).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..ground import Flat, Ground
from ..model.constants import LOCKED
from .corners import Forces, ackermann, corner_sum, forces_at, grade_force, wheel_points
from .energy import contact_rates, spin_up, step_books
from .params import Dyn4Params
from .planar import check_step_args, clamp_inputs, lag, planar_step, twist_dot, wheel_frames
from ..model.state import N_DYN4
from .state import DYN4, with_entries
from .tire import driven_requests

__all__ = ["DriveWork", "dyn4_drive_step", "dyn4_step", "dyn4_rest", "dyn4_forces", "drive_work", "slip_angles"]


def dyn4_forces(x: torch.Tensor, u: torch.Tensor, p: Dyn4Params, g: Ground, hdt: float) -> Forces:
    """Stages 1-3: lagged actuators, then :func:`dyn4_gym.plant.corners.forces_at` with them."""
    d_cmd, a_cmd = clamp_inputs(u, p)
    delta = lag(x[..., DYN4.DELTA], d_cmd, p.tau_steer, hdt)
    a = lag(x[..., DYN4.A], a_cmd, p.tau_drive, hdt)
    return forces_at(x, delta, a, p, g)


def step_normal(f: Forces, p: Dyn4Params, hdt: float) -> torch.Tensor:
    """The suspension force ``(..., 4)`` [N] the grade force pushes with, at the step's midpoint.

    The springs at ``q + hdt qd / 2`` (what the vertical step applies, so the slope's
    horizontal reaction matches the vertical one it pairs with), plus, with passive dampers, the
    dampers' force: the ground does work through them (books' ``ground`` line), and their
    horizontal reaction on the slope (the ``grade`` line) cancels it.
    """
    normal = f.spring - 0.5 * hdt * p.k * f.rate
    if p.damper == "passive":
        normal = normal - p.damp * f.damper_rate
    return normal


def dyn4_step(x: torch.Tensor, u: torch.Tensor, p: Dyn4Params, g: Ground | None = None, hdt: float = 0.01,
              books: bool = False, f_ext: torch.Tensor | None = None):
    """One substep of the four-wheel plant.

    ``x`` (..., 14) state (see :mod:`dyn4_gym.plant.state`), ``u`` (..., 2) =
    ``(delta_cmd [rad], a_cmd [m/s^2])`` clamped to the actuators' range, ``p`` parameters,
    ``g`` ground sampler (default ``Flat()``), ``hdt`` [s]. Returns the next state (..., 14); with
    ``books=True``, ``(next_state, Books)``, the step's energy books (:mod:`dyn4_gym.plant.energy`).
    Computing the books does not change the next state or its gradient.

    ``f_ext`` (..., 3), the external-force port: a body-frame force ``(Fx [N], Fy [N])`` at the
    centre of mass and a yaw moment ``Mz [N m]``, held over the substep (a tow rope, wind, a
    trailer, a learned residual; docs/plant.md, "External force"). It acts on the in-plane twist
    like the grade force (at the centre of mass, so no roll or pitch moment), is differentiable,
    and its work is the books' ``external`` line. ``None`` (the default) is the plant without it,
    bit for bit.
    """
    check_step_args(x, u, N_DYN4, hdt)
    _check_f_ext(f_ext)
    g = Flat() if g is None else g
    f = dyn4_forces(x, u, p, g, hdt)
    return _advance(x, f, p, g, hdt, f.a < 0, books, f_ext)


def dyn4_drive_step(x: torch.Tensor, steer_cmd: torch.Tensor, drive: torch.Tensor, p: Dyn4Params,
                    g: Ground | None = None, hdt: float = 0.01, books: bool = False,
                    f_ext: torch.Tensor | None = None):
    """One substep driven by a powertrain's forces instead of an acceleration command.

    ``steer_cmd (...)`` [rad] (clamped and lagged as in :func:`dyn4_step`); ``drive (..., 2) =
    (F_drive, F_brake)`` [N] held over the substep: the total drive force at the contact patches
    (signed, - in reverse gear; shared by the open differentials) and the total brake force
    (>= 0, shared by load, against the travel). The state's ``a`` records
    ``(F_drive - sign(vx) F_brake) / m``. The speed clamp acts while the brakes outweigh the
    drive (``F_brake > |F_drive|``): they stop the car and hold it, in either direction.

    With ``books=True`` returns ``(x+, Books, DriveWork)``; :class:`DriveWork` splits ``supplied``
    into the drive's work, the brakes', the wheelspin (what the friction cap took) and the locked
    wheels' sliding.
    """
    if not isinstance(steer_cmd, torch.Tensor):
        raise ValueError(f"steer_cmd must be a tensor (...), got {type(steer_cmd)}")
    check_step_args(x, steer_cmd.unsqueeze(-1).expand(*steer_cmd.shape, 2), N_DYN4, hdt)
    if not isinstance(drive, torch.Tensor) or drive.shape[-1:] != (2,):
        raise ValueError(f"drive must be a tensor of shape (..., 2) = (F_drive, F_brake), got {getattr(drive, 'shape', type(drive))}")
    _check_f_ext(f_ext)
    g = Flat() if g is None else g
    d_cmd = torch.minimum(torch.maximum(steer_cmd, -p.delta_max), p.delta_max)
    delta = lag(x[..., DYN4.DELTA], d_cmd, p.tau_steer, hdt)
    vx = x[..., DYN4.VX]
    a = (drive[..., 0] - torch.sign(vx) * drive[..., 1]) / p.m
    f = forces_at(x, delta, a, p, g, drive=drive)
    braking = drive[..., 1] > drive[..., 0].abs()
    out = _advance(x, f, p, g, hdt, braking, books, f_ext, keep_planar=books, driven=True)
    if not books:
        return out
    x1, bk, pl = out
    return x1, bk, drive_work(x, x1, f, pl, drive, p, hdt)


class DriveWork(NamedTuple):
    """A driven substep's longitudinal work [J], each (...): ``supplied = drive - brakes - wheelspin
    - sliding``."""

    drive: torch.Tensor  # the drive force's work at the contact patches (before the friction cap)
    brakes: torch.Tensor  # the brakes' heat: their force at the rolling speed, on each wheel's rolling share (>= 0)
    wheelspin: torch.Tensor  # what the friction cap took from a rolling wheel's requests (>= 0 up to O(hdt^2))
    v_drive: torch.Tensor  # [m/s] the drive-share weighted rolling speed at the midpoint
    sliding: torch.Tensor  # the locked share's patch sliding: its force at the slip speed (>= 0)


def drive_work(x, x1, f: Forces, pl, drive, p: Dyn4Params, hdt: float) -> DriveWork:
    """The :class:`DriveWork` of a driven substep ``x -> x1`` (``f``, ``pl`` from the step)."""
    y = contact_rates(x, x1, pl, p)
    D, Bk = driven_requests(drive, x[..., DYN4.VX], f.Fz, p)
    v_drive = (p.drive_share * y).sum(-1)
    work = hdt * drive[..., 0] * v_drive
    # a wheel's locked share (tire.lock_share) does not turn: its brakes do no work and its patch
    # slides at the rolling speed, so what the tire takes there, (D - Fx) y, is sliding (issue 45,
    # item 5: before, it was booked as brake heat and a negative wheelspin); the rolling share's
    # lines are as they were, and the three sum to the same total
    roll = 1.0 - f.lock
    brakes = hdt * (roll * Bk * y).sum(-1)
    sliding = hdt * (f.lock * (D - f.Fx) * y).sum(-1)
    # supplied = drive - brakes - wheelspin - sliding, with supplied's share that spun up the
    # rotating parts along vx (energy.step_books): what stays is the friction cap's take, plus the
    # rotating parts' share at the wheels' own speeds less at vx (zero on a straight line at a steady pitch)
    wheelspin = hdt * (roll * (D - Bk - f.Fx) * y).sum(-1) - spin_up(f.Fx, pl, x, x1, p, hdt)
    return DriveWork(work, brakes, wheelspin, v_drive, sliding)


def _check_f_ext(f_ext) -> None:
    if f_ext is not None and (not isinstance(f_ext, torch.Tensor) or f_ext.shape[-1:] != (3,)):
        raise ValueError(f"f_ext must be a tensor of shape (..., 3) = (Fx, Fy, Mz), got {getattr(f_ext, 'shape', type(f_ext))}")


def _advance(x, f: Forces, p: Dyn4Params, g: Ground, hdt: float, braking, books: bool, f_ext, keep_planar=False,
             driven=False):
    """Stages 4-7 from the forces ``f`` (and the books): what both entry points share. ``driven``:
    the wheels turn under a powertrain's torques, so ``vx`` carries the rotating parts (``m_rot``)."""
    vx, vy, r = x[..., DYN4.VX], x[..., DYN4.VY], x[..., DYN4.R]
    q, qd = x[..., DYN4.Z:DYN4.THETA + 1], x[..., DYN4.ZD:DYN4.THETAD + 1]
    braking = braking & (f.lock.min(-1).values < LOCKED)  # the clamp holds rolling wheels only
    f_grade = grade_force(p, step_normal(f, p, hdt), f.ground) if p.grade_force else None
    port = None if f_ext is None else (f_ext[..., 0], f_ext[..., 1], f_ext[..., 2])
    if port is None or f_grade is None:
        f_all = f_grade if port is None else port
    else:
        f_all = tuple(a + b for a, b in zip(f_grade, port))
    pl = planar_step(vx, vy, r, f.delta_w, f.Fx, f.D, p, hdt, braking=braking, f_ext=f_all,
                     sliding=(f.lock, f.limit, f.k_lat), kx=p.road_share if driven else None)
    fx_b = (f.Fx * pl.cosd - pl.Fy * pl.sind).sum(-1)
    fy_b = (f.Fx * pl.sind + pl.Fy * pl.cosd).sum(-1)
    q1, qd1 = _vertical(q, qd, fx_b, fy_b, f, p, hdt)
    X1, Y1, psi1 = pose_step(x, pl.vx, pl.vy, pl.r, hdt)
    (z, phi, theta), (zd, phid, thetad) = q1.unbind(-1), qd1.unbind(-1)
    x1 = with_entries(x, {DYN4.X: X1, DYN4.Y: Y1, DYN4.PSI: psi1, DYN4.VX: pl.vx, DYN4.VY: pl.vy, DYN4.R: pl.r,
                          DYN4.Z: z, DYN4.PHI: phi, DYN4.THETA: theta, DYN4.ZD: zd, DYN4.PHID: phid,
                          DYN4.THETAD: thetad, DYN4.DELTA: f.delta, DYN4.A: f.a})
    if not books:
        return x1
    bk = step_books(x, x1, f, pl, f_grade, p, g, hdt, f_ext=port, driven=driven)
    return (x1, bk, pl) if keep_planar else (x1, bk)


def pose_step(x: torch.Tensor, vx1, vy1, r1, hdt: float) -> tuple:
    """Stage 7: the new pose ``(X, Y, psi)`` from the new twist, the yaw at the step's midpoint."""
    psi = x[..., DYN4.PSI]
    psi_m = psi + 0.5 * hdt * r1
    cm, sm = torch.cos(psi_m), torch.sin(psi_m)
    return x[..., DYN4.X] + hdt * (vx1 * cm - vy1 * sm), x[..., DYN4.Y] + hdt * (vx1 * sm + vy1 * cm), psi + hdt * r1


def _solve_sym3(A: tuple, b: tuple) -> torch.Tensor:
    """Solve the symmetric 3x3 system ``A x = b`` by cofactors (elementwise, so it fuses).

    ``A = (a00, a01, a02, a11, a12, a22)``, ``b = (b0, b1, b2)``; returns ``x (..., 3)``.
    """
    a00, a01, a02, a11, a12, a22 = A
    c00 = a11 * a22 - a12 * a12
    c01 = a02 * a12 - a01 * a22
    c02 = a01 * a12 - a02 * a11
    c11 = a00 * a22 - a02 * a02
    c12 = a01 * a02 - a00 * a12
    c22 = a00 * a11 - a01 * a01
    det = a00 * c00 + a01 * c01 + a02 * c02
    b0, b1, b2 = b
    x0 = (c00 * b0 + c01 * b1 + c02 * b2) / det
    x1 = (c01 * b0 + c11 * b1 + c12 * b2) / det
    x2 = (c02 * b0 + c12 * b1 + c22 * b2) / det
    return torch.stack(torch.broadcast_tensors(x0, x1, x2), -1)


def _vertical(q, qd, fx_b, fy_b, f: Forces, p: Dyn4Params, hdt: float):
    """Stage 6: heave, roll and pitch, implicit; returns ``(q+, qd+)``, each (..., 3).

    The springs and gravity by the implicit midpoint rule, the dampers by backward Euler:

        (M_v + hdt D + hdt^2 / 4 K) qd+ = M_v qd + hdt (Q - dV/dq(q) - hdt / 4 K qd + sum_i c_i hdot_i a_i)
        q+ = q + hdt (qd + qd+) / 2

    i.e. the springs push with their force at the step's midpoint ``(q + q+) / 2``. For the
    linear springs that force times ``q+ - q`` is exactly their energy change, so the books'
    residual has no spring-quadrature part (backward Euler's ``k hdt^2 qd^2 / 2`` per step of
    numerical damping would dominate it over hills). Undamped, the rule is neutrally stable at
    any ``hdt``; the dampers' backward Euler damps the stiff modes.
    ``dV/dq = -sum_i k_i l_i a_i + m g e_z``; ``hdot_i = 0`` for skyhook dampers.
    """
    K = corner_sum(p.k, p)
    D = corner_sum(p.damp, p)
    h2 = 0.25 * hdt * hdt
    A = tuple(hdt * d + h2 * k for d, k in zip(D, K))
    A = (A[0] + p.m, A[1], A[2], A[3] + p.Ix, A[4], A[5] + p.Iy)
    # per corner: the spring force a quarter step on (the explicit half of the midpoint force)
    # and the dampers' pull from the moving ground (the implicit part -c_i a_i . qd+ is in A)
    sp = f.spring - 0.25 * hdt * p.k * f.rate + p.damp * f.hdot
    x, y = p.x_w, p.y_w
    f_z = sp.sum(-1) - p.m * p.g
    f_phi = (sp * y).sum(-1) + p.h * fy_b
    f_theta = -(sp * x).sum(-1) - p.h * fx_b
    b = (p.m * qd[..., 0] + hdt * f_z, p.Ix * qd[..., 1] + hdt * f_phi, p.Iy * qd[..., 2] + hdt * f_theta)
    qd1 = _solve_sym3(A, b)
    return q + 0.5 * hdt * (qd + qd1), qd1


def dyn4_rest(p: Dyn4Params, g: Ground | None = None, batch_shape=(), X=0.0, Y=0.0, psi=0.0) -> torch.Tensor:
    """The settled rest state ``(*batch_shape, 14)`` at pose ``(X, Y, psi)`` on ground ``g``.

    At rest the springs carry the weight: ``K q = sum_i k_i hg_i a_i`` (the static loads balance
    ``m g`` with no moment, since ``Fz0_f lf = Fz0_r lr``), so ``q`` is one 3x3 solve, regularised
    by ``1e-12 ||K||`` where a zero track makes roll free.
    """
    g = Flat() if g is None else g
    dt, dev = p.dtype, p.device
    shape = tuple(batch_shape)
    pose = [torch.as_tensor(v, dtype=dt, device=dev).expand(shape) for v in (X, Y, psi)]
    _, hg = g(wheel_points(*pose, p))
    K = corner_sum(p.k, p)
    reg = 1e-12 * (K[0] + K[3] + K[5])
    Kr = (K[0] + reg, K[1], K[2], K[3] + reg, K[4], K[5] + reg)
    kh = p.k * hg
    q = _solve_sym3(Kr, (kh.sum(-1), (kh * p.y_w).sum(-1), -(kh * p.x_w).sum(-1)))
    bshape = q.shape[:-1]
    # by name: the pose and the settled heave, roll and pitch; every other entry (speeds, rates,
    # lag states, and any the state grows) at rest, 0
    named = {DYN4.X: pose[0], DYN4.Y: pose[1], DYN4.PSI: pose[2], DYN4.Z: q[..., 0], DYN4.PHI: q[..., 1],
             DYN4.THETA: q[..., 2]}
    zero = torch.zeros(bshape, dtype=dt, device=dev)
    return torch.stack([named[i].expand(bshape) if i in named else zero for i in DYN4], -1)


def slip_angles(x: torch.Tensor, p: Dyn4Params) -> torch.Tensor:
    """Each wheel's slip angle ``atan2(w_i, |u_i|)`` [rad] ``(..., 4)`` at state ``x`` (..., 14)."""
    _, _, gv, nv = wheel_frames(ackermann(x[..., DYN4.DELTA], p), p)
    vx, vy, r = x[..., DYN4.VX], x[..., DYN4.VY], x[..., DYN4.R]
    return torch.atan2(twist_dot(nv, vx, vy, r), twist_dot(gv, vx, vy, r).abs())
