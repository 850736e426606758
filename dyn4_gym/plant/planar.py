"""What both plants share: actuator lags and the in-plane (vx, vy, r) step over n tires.

In-plane step (docs/plant.md, "The step", stages 4-5), for tires at body points ``(x_i, y_i)`` steered
at ``delta_i``, with heading ``g_i`` and lateral normal ``n_i`` in twist space
``xi = (vx, vy, r)``:

    g_i = (cos d_i, sin d_i, x_i sin d_i - y_i cos d_i)      u_i = g_i . xi (rolling speed)
    n_i = (-sin d_i, cos d_i, x_i cos d_i + y_i sin d_i)     w_i = n_i . xi (lateral speed)

The generalised force of tire ``i`` is ``Fx_i g_i + Fy_i n_i`` with ``Fy_i = -S_i w_i``.

1. ``vx`` is explicit: ``m vx+ = m vx + hdt (sum_i (Fx_i g_i + Fy_i n_i)_x + m r vy - F_drag
   + F_grade)`` with the lateral forces at the current twist. The speed clamp: while braking
   (``a < 0``), a step that would reverse ``vx`` (or move a car at rest) ends at ``vx = 0``, so the
   brakes stop the car and hold it, and never reverse it; what the clamp takes is the books'
   ``limiter`` line. Without brakes a car may roll backwards (down a hill, after a spin): the
   tires and drag are odd in ``vx``. Drag is ``c_drag vx |vx| + f_roll tanh(vx / v_roll)``.
2. ``(vy, r)`` is backward Euler with the secants frozen at the current guess, a 2x2 linear
   solve, repeated a fixed ``N_SECANT`` times (no data-dependent loop):

       m  (vy+ - vy) = hdt (sum Fx_i g_i,y - sum S_i n_i,y (n_i . xi+) - m vx+ r+)
       Iz (r+  - r ) = hdt (sum Fx_i g_i,r - sum S_i n_i,r (n_i . xi+))

   The secant form is stiff-stable: at walking pace the tires act as dampers of rate
   ``D B C / v_lat`` that an explicit step would blow up on.
"""

from __future__ import annotations

import torch

from typing import NamedTuple

from ..model.constants import N_SECANT
from .tire import wheel_secant

__all__ = ["N_SECANT", "Planar", "check_step_args", "lag", "clamp_inputs", "planar_step", "twist_dot", "wheel_frames"]

# Secant updates after the first solve (N_SECANT, model/constants.py, where the count's measured
# error is): the iteration converges ~50x per update on the median state and ~4x on the slowest 1 %.


def check_step_args(x: torch.Tensor, u: torch.Tensor, n_state: int, hdt: float) -> None:
    """Shape and value checks shared by the plants (cheap: no tensor data is read)."""
    if not isinstance(x, torch.Tensor) or x.shape[-1:] != (n_state,):
        raise ValueError(f"state must be a tensor of shape (..., {n_state}), got {getattr(x, 'shape', type(x))}")
    if not isinstance(u, torch.Tensor) or u.shape[-1:] != (2,):
        raise ValueError(f"input must be a tensor of shape (..., 2) = (delta_cmd, a_cmd), got {getattr(u, 'shape', type(u))}")
    if isinstance(hdt, bool) or not (isinstance(hdt, (int, float)) and 0 < hdt <= 0.1):
        raise ValueError(f"hdt must be a substep in (0, 0.1] s, got {hdt!r}")


class Planar(NamedTuple):
    """The in-plane step's result: the new twist and what the books and the vertical step need."""

    vx: torch.Tensor  # (...) [m/s] new twist
    vy: torch.Tensor
    r: torch.Tensor
    Fy: torch.Tensor  # (..., n) [N] final lateral forces (used by vy, r and the vertical step)
    S: torch.Tensor  # (..., n) [N s/m] final secants
    Fy0: torch.Tensor  # (..., n) [N] start-of-step lateral forces (used by vx)
    drag: torch.Tensor  # (...) [N] drag and rolling resistance
    vx_free: torch.Tensor  # (...) [m/s] vx before the speed clamp
    cosd: torch.Tensor  # (..., n) wheel frames
    sind: torch.Tensor
    gv: tuple  # heading g_i in twist space, three (..., n)
    nv: tuple  # lateral normal n_i in twist space


def clamp_inputs(u: torch.Tensor, p) -> tuple[torch.Tensor, torch.Tensor]:
    """Split ``u (..., 2) = (delta_cmd [rad], a_cmd [m/s^2])`` and clamp to the actuators' range."""
    d_cmd = torch.minimum(torch.maximum(u[..., 0], -p.delta_max), p.delta_max)
    a_cmd = torch.minimum(torch.maximum(u[..., 1], -p.a_brake), p.a_drive)
    return d_cmd, a_cmd


def lag(state: torch.Tensor, cmd: torch.Tensor, tau: torch.Tensor, hdt: float) -> torch.Tensor:
    """First-order lag integrated exactly over ``hdt``; ``tau = 0`` passes the command through."""
    pos = tau > 0
    decay = torch.where(pos, torch.exp(-hdt / torch.where(pos, tau, torch.ones_like(tau))), torch.zeros_like(tau))
    return cmd + (state - cmd) * decay


def wheel_frames(delta_w: torch.Tensor, p):
    """Per-wheel ``(cos d, sin d, g, n)`` with ``g``, ``n`` tuples of ``(..., n)`` twist components."""
    c, s = torch.cos(delta_w), torch.sin(delta_w)
    x, y = p.x_w, p.y_w
    g = (c, s, x * s - y * c)
    n = (-s, c, x * c + y * s)
    return c, s, g, n


def twist_dot(v, vx, vy, r):
    """``v . (vx, vy, r)`` per wheel: ``v`` a ``(g or n)`` triple of ``(..., n)``, the twist ``(...)``."""
    return v[0] * vx.unsqueeze(-1) + v[1] * vy.unsqueeze(-1) + v[2] * r.unsqueeze(-1)


def planar_step(vx, vy, r, delta_w, Fx, D, p, hdt: float, braking=None, f_ext=None, sliding=None, kx=None):
    """One in-plane substep. Shapes: twist ``(...)``, per-wheel ``(..., n)``.

    Returns a :class:`Planar`. ``braking`` (...) bool
    enables the speed clamp; ``f_ext`` an optional constant generalised force ``(fx, fy, mz)``
    on the twist over the step (the grade force). ``sliding = (lock, limit, k_lat)``: the locked
    share of each wheel slides (tire.py, "Locked wheels"), its lateral secant
    ``tire.sliding_secant``; None: every wheel rolls (the single-track plant).

    ``kx = m / (m + m_rot)`` (the driven plant, docs/plant.md "Rotating inertia"): ``vx`` carries
    the parts that spin with the wheels, ``(m + m_rot) vx' = sum_i Fx_i g_i,x / kx + (the other
    forces along x) + m r vy``; the tires' ``Fx`` already are ``kx`` times the wheels' torque
    over radius (tire.driven_forces). None: ``kx = 1``, the acceleration command's servo.
    """
    m, Iz = p.m, p.Iz
    cosd, sind, gv, nv = wheel_frames(delta_w, p)
    B, C, E = p.B, p.C, p.E
    v_lat = p.v_lat.unsqueeze(-1) if p.v_lat.ndim else p.v_lat

    def secant(vx_, vy_, r_):
        return wheel_secant(twist_dot(nv, vx_, vy_, r_), twist_dot(gv, vx_, vy_, r_), D, B, C, E, v_lat, sliding)

    S0 = secant(vx, vy, r)
    Fy0 = -S0 * twist_dot(nv, vx, vy, r)
    drag = p.c_drag * vx * vx.abs() + p.f_roll * torch.tanh(vx / p.v_roll)
    ext = (0.0, 0.0, 0.0) if f_ext is None else f_ext
    if kx is None:
        fx_body = (Fx * gv[0] + Fy0 * nv[0]).sum(-1)
        vx_free = vx + hdt * ((fx_body - drag + ext[0]) / m + r * vy)
    else:
        fx_body = (Fx * gv[0] + (kx.unsqueeze(-1) if kx.ndim else kx) * Fy0 * nv[0]).sum(-1)
        vx_free = vx + hdt * ((fx_body - kx * drag + kx * ext[0]) / m + kx * r * vy)
    if braking is None:
        vx1 = vx_free
    else:
        stops = braking & (vx * vx_free <= 0)
        vx1 = torch.where(stops, torch.zeros_like(vx_free), vx_free)

    fx_gy = (Fx * gv[1]).sum(-1) + ext[1]
    fx_gr = (Fx * gv[2]).sum(-1) + ext[2]
    S = S0
    for it in range(N_SECANT + 1):
        if it > 0:
            S = secant(vx1, vy1, r1)  # noqa: F821 (the previous iterate's, set below)
        P = (S * nv[1] * nv[1]).sum(-1)
        Q = (S * nv[2] * nv[2]).sum(-1)
        Cc = (S * nv[1] * nv[2]).sum(-1)
        a00 = m + hdt * P
        a01 = hdt * (m * vx1 + Cc)
        a10 = hdt * Cc
        a11 = Iz + hdt * Q
        b0 = m * vy + hdt * (fx_gy - vx1 * (S * nv[1] * nv[0]).sum(-1))
        b1 = Iz * r + hdt * (fx_gr - vx1 * (S * nv[2] * nv[0]).sum(-1))
        det = a00 * a11 - a01 * a10
        vy1 = (a11 * b0 - a01 * b1) / det
        r1 = (a00 * b1 - a10 * b0) / det
    Fy = -S * twist_dot(nv, vx1, vy1, r1)
    return Planar(vx1, vy1, r1, Fy, S, Fy0, drag, vx_free, cosd, sind, gv, nv)
