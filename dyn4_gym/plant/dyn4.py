"""The four-wheel plant ``dyn4_step``: 14 states, Ackermann steering, Pacejka tires in a friction
ellipse, spring-damper corners, implicit lateral and vertical steps (PLANT.md, "The step").

One substep of ``hdt`` seconds:

1. lags of steer and drive, integrated exactly;
2. the ground's friction and height under the four wheels at the current pose;
3. corner loads ``Fz_i = softplus_floor(k_i l_i - c_i (a_i . qd))`` with spring compression
   ``l_i = Fz0_i / k_i + hg_i - a_i . q`` and ``a_i = (1, y_i, -x_i)`` the corner's lever on
   ``q = (z, phi, theta)``; then load-sensitive friction and longitudinal forces (tire.py);
4-5. the in-plane step (planar.py): ``vx`` explicit with a speed clamp, ``(vy, r)`` implicit with
   the tires' exact secants;
6. ``(z, phi, theta)`` implicit: ``(M_v + hdt D + hdt^2 K) qd+ = M_v qd + hdt (Q - dV/dq)``,
   ``q+ = q + hdt qd+``, with ``M_v = diag(m, Ix, Iy)``, ``K = sum k_i a_i a_i^T``,
   ``D = sum c_i a_i a_i^T``, ``V = sum 1/2 k_i l_i^2 + m g z`` and the tire forces' moments about
   the CG ``Q = (0, +h sum F_y,body, -h sum F_x,body)`` (contact patches are ``h`` below the CG);
7. the pose from the new twist, yaw at the step's midpoint.

Choices the contract leaves open (and why):

- Ride: 1.5 Hz and damping ratio 0.5 on both axles (Jolt's defaults, inside the HMMWV's
  1.4-2.7 Hz range). Equal frequencies decouple heave and pitch.
- Dampers are skyhook (on the body's own vertical rates), as in the seeds.
- Loads are floored at ``0.01 Fz0_i`` by a softplus, so a lifted wheel keeps a small, smooth load.
- Drag: ``1/2 rho CdA vx^2`` with CdA 2.5 m^2 plus LFDM's rolling resistance 0.015; drive split
  equal over the four wheels (full-time 4WD with open differentials); brakes split by load and
  fading in below 0.25 m/s; the low-speed blend of the slip angle at 0.5 m/s (tire.py).
- The brakes never reverse the car: a braking step that would cross ``vx = 0`` ends at rest
  (speed clamp, planar.py). There is no reverse gear, but a car without brakes may roll back.
- Gravity along the ground (the grade force) is off by default, as in the seeds: the terrain
  only lifts the springs and the books show that energy on their ``ground`` line.
  ``dyn4_params(..., grade_force=True)`` adds it (:func:`grade_force`).
"""

from __future__ import annotations

import torch

from ..ground import Flat, Ground
from .._math import softplus_floor
from .params import Dyn4Params
from .planar import clamp_inputs, lag, planar_step
from .tire import lateral_peak, load_sensitive_mu, longitudinal_forces

__all__ = ["dyn4_step", "dyn4_rest", "dyn4_forces", "forces_at", "grade_force", "slip_angles", "wheel_points", "check_step_args"]

FLOOR_SHARE = 0.01  # load floor scale, share of the static load


def check_step_args(x: torch.Tensor, u: torch.Tensor, n_state: int, hdt: float) -> None:
    """Shape and value checks shared by the plants (cheap: no tensor data is read)."""
    if not isinstance(x, torch.Tensor) or x.shape[-1:] != (n_state,):
        raise ValueError(f"state must be a tensor of shape (..., {n_state}), got {getattr(x, 'shape', type(x))}")
    if not isinstance(u, torch.Tensor) or u.shape[-1:] != (2,):
        raise ValueError(f"input must be a tensor of shape (..., 2) = (delta_cmd, a_cmd), got {getattr(u, 'shape', type(u))}")
    if not (isinstance(hdt, (int, float)) and 0 < hdt <= 0.1):
        raise ValueError(f"hdt must be a substep in (0, 0.1] s, got {hdt!r}")


def wheel_points(X, Y, psi, p) -> torch.Tensor:
    """World points ``(..., n, 2)`` [m] of the contact patches (roll and pitch neglected)."""
    c, s = torch.cos(psi).unsqueeze(-1), torch.sin(psi).unsqueeze(-1)
    px = X.unsqueeze(-1) + c * p.x_w - s * p.y_w
    py = Y.unsqueeze(-1) + s * p.x_w + c * p.y_w
    return torch.stack((px, py), -1)


def corner_dot(q: torch.Tensor, p) -> torch.Tensor:
    """``a_i . q`` ``(..., 4)`` for ``q (..., 3)`` = (heave, roll, pitch) or their rates,
    ``a_i = (1, y_i, -x_i)``: each corner's vertical displacement (or rate)."""
    return q[..., 0:1] + p.y_w * q[..., 1:2] - p.x_w * q[..., 2:3]


def ackermann(delta: torch.Tensor, p) -> torch.Tensor:
    """Per-wheel steer ``(..., 4)``: front pair at ``atan2(L sin d, L cos d - y_i sin d)``, rear 0.

    Exactly ``cot(d_right) - cot(d_left) = 2 tf / L``.
    """
    L = p.L.unsqueeze(-1) if p.L.ndim else p.L
    d = delta.unsqueeze(-1)
    yf = p.y_w[..., :2]
    front = torch.atan2(L * torch.sin(d), L * torch.cos(d) - yf * torch.sin(d))
    return torch.cat((front, torch.zeros_like(front)), -1)


def _u(t: torch.Tensor) -> torch.Tensor:
    """A scalar parameter made broadcastable against per-wheel tensors."""
    return t.unsqueeze(-1) if t.ndim else t


def dyn4_forces(x: torch.Tensor, u: torch.Tensor, p: Dyn4Params, g: Ground, hdt: float):
    """Steps 1-3: lagged actuators, then :func:`forces_at` with them."""
    d_cmd, a_cmd = clamp_inputs(u, p)
    delta = lag(x[..., 12], d_cmd, p.tau_steer, hdt)
    a = lag(x[..., 13], a_cmd, p.tau_drive, hdt)
    return forces_at(x, delta, a, p, g)


def forces_at(x: torch.Tensor, delta: torch.Tensor, a: torch.Tensor, p: Dyn4Params, g: Ground) -> dict:
    """Steps 2-3 at steer ``delta`` and drive ``a``: ground, loads, friction, longitudinal forces.

    Returns a dict with ``delta``, ``a``, ``delta_w`` (per-wheel steer), ``mu_ground``, ``hg``
    (ground heights), ``spring`` (unfloored spring forces ``k_i l_i``), ``Fz``, ``mu``, ``Fx``,
    ``D`` (peak lateral force inside the ellipse), ``limit`` (``mu Fz``), ``disp`` and ``rate``
    (each corner's vertical displacement ``a_i . q`` and its rate).
    """
    X, Y, psi, vx = x[..., 0], x[..., 1], x[..., 2], x[..., 3]
    q = x[..., 6:9]
    qd = x[..., 9:12]
    mu_g, hg = g(wheel_points(X, Y, psi, p))
    disp = corner_dot(q, p)
    rate = corner_dot(qd, p)
    spring = p.Fz0 + p.k * (hg - disp)
    Fz = softplus_floor(spring - p.damp * rate, FLOOR_SHARE * p.Fz0)
    mu = load_sensitive_mu(mu_g, Fz, p.Fz0, _u(p.eps_load))
    Fx, limit = longitudinal_forces(a, vx, Fz, mu, p)
    return dict(delta=delta, a=a, delta_w=ackermann(delta, p), mu_ground=mu_g, hg=hg, spring=spring,
                Fz=Fz, mu=mu, Fx=Fx, D=lateral_peak(Fx, limit), limit=limit, disp=disp, rate=rate)


def grade_force(x: torch.Tensor, p: Dyn4Params, g: Ground, spring: torch.Tensor):
    """The springs' horizontal reaction on the slopes under the wheels (opt-in, issue 3).

    Each corner pushes on the ground with its spring force ``F_i = k_i l_i`` along the terrain
    normal; its horizontal part on the body is ``-F_i grad h(P_i)``. Returned as the generalised
    force ``(fx, fy, mz)`` on the twist ``(vx, vy, r)``, body frame. It equals ``-dH/d(X, Y, psi)``
    (``H`` the plant's Hamiltonian), so it is conservative. Slopes are central differences of the
    sampler over ``1e-3 L``, so any sampler works.
    """
    X, Y, psi = x[..., 0], x[..., 1], x[..., 2]
    P = wheel_points(X, Y, psi, p)  # (..., 4, 2)
    eps = 1e-3 * p.L
    e = eps.unsqueeze(-1) if eps.ndim else eps
    zero = torch.zeros_like(P[..., 0])
    dx = torch.stack((e + zero, zero), -1)
    dy = torch.stack((zero, e + zero), -1)
    _, h = g(torch.stack((P + dx, P - dx, P + dy, P - dy), -2))  # (..., 4, 4)
    hx = (h[..., 0] - h[..., 1]) / (2 * e)
    hy = (h[..., 2] - h[..., 3]) / (2 * e)
    c, s = torch.cos(psi).unsqueeze(-1), torch.sin(psi).unsqueeze(-1)
    bx, by = c * hx + s * hy, -s * hx + c * hy  # body-frame slopes
    fx, fy = -spring * bx, -spring * by
    return fx.sum(-1), fy.sum(-1), (p.x_w * fy - p.y_w * fx).sum(-1)


def dyn4_step(x: torch.Tensor, u: torch.Tensor, p: Dyn4Params, g: Ground | None = None, hdt: float = 0.01,
              books: bool = False):
    """One substep of the four-wheel plant.

    ``x`` (..., 14) state (see :mod:`dyn4_gym.plant.state`), ``u`` (..., 2) =
    ``(delta_cmd [rad], a_cmd [m/s^2])`` clamped to the actuators' range, ``p`` parameters,
    ``g`` ground sampler (default ``Flat()``), ``hdt`` [s]. Returns the next state (..., 14); with
    ``books=True``, ``(next_state, Books)``, the step's energy books (:mod:`dyn4_gym.plant.energy`).
    Computing the books does not change the next state or its gradient.
    """
    check_step_args(x, u, 14, hdt)
    g = Flat() if g is None else g
    f = dyn4_forces(x, u, p, g, hdt)
    vx, vy, r = x[..., 3], x[..., 4], x[..., 5]
    q, qd = x[..., 6:9], x[..., 9:12]
    f_ext = None
    if p.grade_force:
        # the springs' force at the step's predicted end, q + hdt qd: what the implicit vertical
        # step applies, so the slope's horizontal reaction matches the vertical one it pairs with
        f_ext = grade_force(x, p, g, f["spring"] - hdt * p.k * f["rate"])
    vx1, vy1, r1, pl = planar_step(vx, vy, r, f["delta_w"], f["Fx"], f["D"], p, hdt,
                                   braking=f["a"] < 0, f_ext=f_ext)
    cosd, sind = pl["frames"][0], pl["frames"][1]
    Fx, Fy = f["Fx"], pl["Fy"]
    fx_b = (Fx * cosd - Fy * sind).sum(-1)
    fy_b = (Fx * sind + Fy * cosd).sum(-1)
    qd1 = _vertical(q, qd, fx_b, fy_b, f, p, hdt)
    q1 = q + hdt * qd1
    psi = x[..., 2]
    psi_m = psi + 0.5 * hdt * r1
    cm, sm = torch.cos(psi_m), torch.sin(psi_m)
    X1 = x[..., 0] + hdt * (vx1 * cm - vy1 * sm)
    Y1 = x[..., 1] + hdt * (vx1 * sm + vy1 * cm)
    psi1 = psi + hdt * r1
    x1 = torch.cat((torch.stack((X1, Y1, psi1, vx1, vy1, r1), -1), q1, qd1,
                    torch.stack((f["delta"], f["a"]), -1)), -1)
    if not books:
        return x1
    from .energy import step_books

    return x1, step_books(x, x1, f, pl, f_ext, p, g, hdt)


def _sym3(w: torch.Tensor, p) -> tuple:
    """The 6 entries ``(zz, zp, zt, pp, pt, tt)`` of ``sum_i w_i a_i a_i^T``, ``a_i = (1, y_i, -x_i)``."""
    x, y = p.x_w, p.y_w
    return ((w).sum(-1), (w * y).sum(-1), -(w * x).sum(-1),
            (w * y * y).sum(-1), -(w * x * y).sum(-1), (w * x * x).sum(-1))


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


def _vertical(q, qd, fx_b, fy_b, f, p: Dyn4Params, hdt: float):
    """Step 6: the implicit 3x3 step of heave, roll and pitch; returns ``qd+`` (..., 3).

    ``(M_v + hdt D + hdt^2 K) qd+ = M_v qd + hdt (Q - dV/dq)`` with
    ``dV/dq = -sum_i k_i l_i a_i + m g e_z``.
    """
    K = _sym3(p.k, p)
    D = _sym3(p.damp, p)
    h2 = hdt * hdt
    A = tuple(hdt * d + h2 * k for d, k in zip(D, K))
    A = (A[0] + p.m, A[1], A[2], A[3] + p.Ix, A[4], A[5] + p.Iy)
    sp = f["spring"]
    x, y = p.x_w, p.y_w
    # Q - dV/dq, row by row: heave, roll, pitch
    f_z = sp.sum(-1) - p.m * p.g
    f_phi = (sp * y).sum(-1) + p.h * fy_b
    f_theta = -(sp * x).sum(-1) - p.h * fx_b
    b = (p.m * qd[..., 0] + hdt * f_z, p.Ix * qd[..., 1] + hdt * f_phi, p.Iy * qd[..., 2] + hdt * f_theta)
    return _solve_sym3(A, b)


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
    K = _sym3(p.k, p)
    reg = 1e-12 * (K[0] + K[3] + K[5])
    Kr = (K[0] + reg, K[1], K[2], K[3] + reg, K[4], K[5] + reg)
    kh = p.k * hg
    q = _solve_sym3(Kr, (kh.sum(-1), (kh * p.y_w).sum(-1), -(kh * p.x_w).sum(-1)))
    bshape = q.shape[:-1]
    zeros = torch.zeros(*bshape, 3, dtype=dt, device=dev)
    pose_t = torch.stack([v.expand(bshape) for v in pose], -1)
    x = torch.cat((pose_t, zeros, q, zeros, zeros[..., :2]), -1)
    return x


def slip_angles(x: torch.Tensor, p: Dyn4Params) -> torch.Tensor:
    """Each wheel's slip angle ``atan2(w_i, |u_i|)`` [rad] ``(..., 4)`` at state ``x`` (..., 14)."""
    from .planar import twist_dot, wheel_frames

    _, _, gv, nv = wheel_frames(ackermann(x[..., 12], p), p)
    vx, vy, r = x[..., 3], x[..., 4], x[..., 5]
    return torch.atan2(twist_dot(nv, vx, vy, r), twist_dot(gv, vx, vy, r).abs())
