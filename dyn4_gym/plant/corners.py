"""What the four-wheel step and its books share: the corners, the ground under them, their forces.

docs/plant.md, "The step", stages 2-3. Both :mod:`dyn4_gym.plant.dyn4` (the step) and
:mod:`dyn4_gym.plant.energy` (the port-Hamiltonian form and the books) import from here, and this
module imports neither, so there is no import cycle.

Corner ``i`` in FL, FR, RL, RR sits at body point ``(x_i, y_i)``; its lever on the vertical
coordinates ``q = (z, phi, theta)`` is ``a_i = (1, y_i, -x_i)``, so ``a_i . q`` is the corner's
vertical displacement [m] and ``a_i . qd`` its vertical rate [m/s].

Dampers (``Dyn4Params.damper``):

- ``"passive"`` (default): each damper acts on its corner's rate relative to the ground under
  its wheel, ``a_i . qd - hdot_i``, as a real car's does. ``hdot_i = grad h(P_i) . Pdot_i`` is
  the rate at which the ground rises under the moving contact patch (the sampler's exact slope
  where it has one, :meth:`Ground.height_gradient`, else central differences, so any sampler works). On
  a steady climb the body rises with the ground and the dampers carry nothing.
- ``"skyhook"``: on the body's own rate ``a_i . qd`` (``hdot`` taken as 0), as in the seeds. On
  a climb they push the body down and the springs, and so the grade force, grow.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .._math import softplus_floor
from ..model.constants import FLOOR_SHARE, SLOPE_STEP
from ..model.state import DYN4, VERTICAL, VERTICAL_RATES
from .params import Dyn4Params
from .planar import twist_dot, wheel_frames
from .tire import (driven_forces, lateral_peak, load_sensitive_mu, lock_share, longitudinal_forces, slide_friction,
                   sliding_secant)

__all__ = ["FLOOR_SHARE", "SLOPE_STEP", "Forces", "GroundUnder", "ackermann", "corner_dot", "corner_sum",
           "forces_at", "ground_rate", "ground_under", "grade_force", "needs_slopes", "wheel_points"]



def _u(t: torch.Tensor) -> torch.Tensor:
    """A scalar parameter made broadcastable against per-wheel tensors."""
    return t.unsqueeze(-1) if t.ndim else t


def wheel_points(X, Y, psi, p) -> torch.Tensor:
    """World points ``(..., n, 2)`` [m] of the contact patches (roll and pitch neglected)."""
    c, s = torch.cos(psi).unsqueeze(-1), torch.sin(psi).unsqueeze(-1)
    px = X.unsqueeze(-1) + c * p.x_w - s * p.y_w
    py = Y.unsqueeze(-1) + s * p.x_w + c * p.y_w
    return torch.stack((px, py), -1)


def corner_dot(q: torch.Tensor, p) -> torch.Tensor:
    """``a_i . q`` ``(..., 4)`` for ``q (..., 3)`` = (heave, roll, pitch) or their rates."""
    return q[..., 0:1] + p.y_w * q[..., 1:2] - p.x_w * q[..., 2:3]


def corner_sum(w: torch.Tensor, p) -> tuple:
    """The 6 entries ``(zz, zp, zt, pp, pt, tt)`` of ``sum_i w_i a_i a_i^T`` for ``w (..., 4)``."""
    x, y = p.x_w, p.y_w
    return (w.sum(-1), (w * y).sum(-1), -(w * x).sum(-1),
            (w * y * y).sum(-1), -(w * x * y).sum(-1), (w * x * x).sum(-1))


def ackermann(delta: torch.Tensor, p) -> torch.Tensor:
    """Per-wheel steer ``(..., 4)``: front pair at ``atan2(L sin d, L cos d - y_i sin d)``, rear 0.

    Exactly ``cot(d_right) - cot(d_left) = 2 tf / L``.
    """
    L = _u(p.L)
    d = delta.unsqueeze(-1)
    yf = p.y_w[..., :2]
    front = torch.atan2(L * torch.sin(d), L * torch.cos(d) - yf * torch.sin(d))
    return torch.cat((front, torch.zeros_like(front)), -1)


class GroundUnder(NamedTuple):
    """The ground under the four contact patches, each ``(..., 4)``."""

    mu: torch.Tensor  # peak friction coefficient
    h: torch.Tensor  # [m] height
    bx: torch.Tensor  # body-frame slope dh/dx_body
    by: torch.Tensor  # body-frame slope dh/dy_body


def ground_under(x: torch.Tensor, p, g, slopes: bool = True) -> GroundUnder:
    """Friction, height and (if ``slopes``) body-frame slopes under the wheels at state ``x``.

    One call of the sampler on the 4 points; the slopes from the sampler's exact gradient
    (:meth:`Ground.height_gradient`: the rough kind's terrain, ``Flat``) or, where it has none, by central
    differences of its height over 4 neighbours ``SLOPE_STEP L`` away from each wheel.
    """
    X, Y, psi = x[..., DYN4.X], x[..., DYN4.Y], x[..., DYN4.PSI]
    P = wheel_points(X, Y, psi, p)  # (..., 4, 2)
    if not slopes:
        mu, h = g(P)
        zero = torch.zeros_like(h)
        return GroundUnder(mu, h, zero, zero)
    exact = g.height_gradient(P)
    if exact is not None:
        mu, h = g(P)
        hx, hy = exact
        c, s = torch.cos(psi).unsqueeze(-1), torch.sin(psi).unsqueeze(-1)
        return GroundUnder(mu, h, c * hx + s * hy, -s * hx + c * hy)
    e = _u(SLOPE_STEP * p.L)
    zero = torch.zeros_like(P[..., 0])
    dx = torch.stack((e + zero, zero), -1)
    dy = torch.stack((zero, e + zero), -1)
    mu, h = g(torch.stack((P, P + dx, P - dx, P + dy, P - dy), -2))  # (..., 4, 5)
    hx = (h[..., 1] - h[..., 2]) / (2 * e)
    hy = (h[..., 3] - h[..., 4]) / (2 * e)
    c, s = torch.cos(psi).unsqueeze(-1), torch.sin(psi).unsqueeze(-1)
    return GroundUnder(mu[..., 0], h[..., 0], c * hx + s * hy, -s * hx + c * hy)


def ground_rate(gu: GroundUnder, vx, vy, r, p) -> torch.Tensor:
    """``hdot_i`` [m/s] ``(..., 4)``: how fast the ground rises under each moving contact patch.

    The patch moves at ``(vx - r y_i, vy + r x_i)`` in the body frame, so
    ``hdot_i = bx_i (vx - r y_i) + by_i (vy + r x_i)``.
    """
    vx, vy, r = vx.unsqueeze(-1), vy.unsqueeze(-1), r.unsqueeze(-1)
    return gu.bx * (vx - r * p.y_w) + gu.by * (vy + r * p.x_w)


class Forces(NamedTuple):
    """Stages 2-3 of the step at a state, with the lagged steer ``delta`` and drive ``a``.

    Per-wheel entries are ``(..., 4)`` [N unless noted].
    """

    delta: torch.Tensor  # (...) [rad] steer of the virtual centre wheel
    a: torch.Tensor  # (...) [m/s^2] drive (+) / brake (-) command after the lag
    delta_w: torch.Tensor  # [rad] per-wheel steer (Ackermann)
    ground: GroundUnder  # friction, height and slopes under the wheels
    hdot: torch.Tensor  # [m/s] ground rate the dampers see (0 for skyhook dampers)
    spring: torch.Tensor  # unfloored spring forces k_i l_i
    Fz: torch.Tensor  # loads (floored, positive)
    mu: torch.Tensor  # load-sensitive friction
    Fx: torch.Tensor  # longitudinal forces along each wheel's heading (rolling and sliding shares)
    D: torch.Tensor  # peak lateral force the rolling share leaves inside the friction ellipse
    limit: torch.Tensor  # mu Fz
    rate: torch.Tensor  # [m/s] each corner's vertical rate a_i . qd
    lock: torch.Tensor  # 0..1: how locked each wheel is (tire.lock_share)
    k_lat: torch.Tensor  # (n,) the lateral law's full slide over its peak (tire.slide_friction)

    @property
    def mu_ground(self) -> torch.Tensor:
        return self.ground.mu

    @property
    def hg(self) -> torch.Tensor:
        return self.ground.h

    @property
    def damper_rate(self) -> torch.Tensor:
        """[m/s] the rate each damper acts on: ``a_i . qd - hdot_i``."""
        return self.rate - self.hdot


def needs_slopes(p: Dyn4Params) -> bool:
    """Whether the step samples the ground's slope (passive dampers or the grade force)."""
    return p.damper == "passive" or p.grade_force


def forces_at(x: torch.Tensor, delta: torch.Tensor, a: torch.Tensor, p: Dyn4Params, g, drive=None) -> Forces:
    """Stages 2-3 at steer ``delta`` and drive ``a``: ground, loads, friction, longitudinal forces.

    ``Fz_i = softplus_floor(k_i l_i - c_i (a_i . qd - hdot_i))`` with ``k_i l_i = Fz0_i + k_i
    (hg_i - a_i . q)``. With ``drive (..., 2) = (F_drive, F_brake)`` [N] (a powertrain's forces,
    :func:`dyn4_gym.plant.tire.driven_forces`) the longitudinal forces come from those and ``a``
    is only recorded.
    """
    gu = ground_under(x, p, g, slopes=needs_slopes(p))
    q, qd = x[..., VERTICAL], x[..., VERTICAL_RATES]
    rate = corner_dot(qd, p)
    if p.damper == "passive":
        hdot = ground_rate(gu, x[..., DYN4.VX], x[..., DYN4.VY], x[..., DYN4.R], p)
    else:
        hdot = torch.zeros_like(rate)
    spring = p.Fz0 + p.k * (gu.h - corner_dot(q, p))
    Fz = softplus_floor(spring - p.damp * (rate - hdot), FLOOR_SHARE * p.Fz0)
    mu = load_sensitive_mu(gu.mu, Fz, p.Fz0, _u(p.eps_load))
    if drive is None:
        Fx, limit, demand = longitudinal_forces(a, x[..., DYN4.VX], Fz, mu, p)
    else:
        Fx, limit, demand = driven_forces(drive, x[..., DYN4.VX], Fz, mu, p, _u(p.road_share))
    # locked wheels slide against their patch's velocity (tire.py, "Locked wheels"); the
    # longitudinal part is explicit, at the step's start, like the rolling force
    delta_w = ackermann(delta, p)
    lock = lock_share(demand, limit)
    k_lat = slide_friction(p.B, p.C, p.E)
    _, _, gv, nv = wheel_frames(delta_w, p)
    vx, vy, r = x[..., DYN4.VX], x[..., DYN4.VY], x[..., DYN4.R]
    u0 = twist_dot(gv, vx, vy, r)
    sliding = sliding_secant(u0, twist_dot(nv, vx, vy, r), limit, k_lat, _u(p.v_lat)) * u0
    return Forces(delta=delta, a=a, delta_w=delta_w, ground=gu, hdot=hdot, spring=spring, Fz=Fz, mu=mu,
                  Fx=(1 - lock) * Fx - lock * sliding, D=lateral_peak(Fx, limit), limit=limit, rate=rate, lock=lock,
                  k_lat=k_lat)


def grade_force(p, normal: torch.Tensor, gu: GroundUnder) -> tuple:
    """The horizontal reaction of the slopes under the wheels (opt-in: ``grade_force=True``).

    Each corner pushes on the ground with its suspension force ``normal_i`` [N] along the terrain
    normal; the horizontal part on the body is ``-normal_i grad h(P_i)``. Returned as the
    generalised force ``(fx, fy, mz)`` on the twist ``(vx, vy, r)``, body frame. Its power is
    ``-sum_i normal_i hdot_i``. With the springs' force ``k_i l_i`` as ``normal`` it equals
    ``-dH/d(X, Y, psi)`` (conservative, docs/plant.md "Grade force").
    """
    fx, fy = -normal * gu.bx, -normal * gu.by
    return fx.sum(-1), fy.sum(-1), (p.x_w * fy - p.y_w * fx).sum(-1)
