"""The single-track (bicycle) plant ``bike_step``: 8 states, the four-wheel plant's sibling.

Two axles at ``x = lf`` (steered at ``delta``) and ``x = -lr`` on the centre line, with the same
tires, lags, drive, brakes, drag, speed clamp and implicit in-plane step as ``dyn4_step``
(planar.py), so the four-wheel plant with zero track and stiff suspension reduces to it.
There is no roll, pitch or heave: the axle loads are static plus the quasi-static longitudinal
transfer ``Fz_f = Fz0_f - m a_x h / L``, ``Fz_r = Fz0_r + m a_x h / L``, with ``a_x`` the body's
longitudinal tire-force sum over ``m`` (drive, brakes and the front tire's cornering drag). That
sum depends on the loads, so it is taken from one predictor pass on the command's own transfer:
the four-wheel plant's stiff pitch mode carries the previous substep's forces, the same to first
order in ``hdt``. Ground heights are ignored; friction is sampled under each axle.
"""

from __future__ import annotations

import torch

from ..ground import Flat, Ground
from .._math import softplus_floor
from ..model.state import BIKE, N_BIKE
from .corners import FLOOR_SHARE, wheel_points
from .params import BikeParams
from .planar import check_step_args, clamp_inputs, lag, planar_step, twist_dot, wheel_frames
from .tire import lateral_peak, lateral_secant, load_sensitive_mu, longitudinal_forces

__all__ = ["bike_step"]


def _loads(p: BikeParams, ax: torch.Tensor) -> torch.Tensor:
    dF = (p.m * ax * p.h / p.L).unsqueeze(-1) * torch.tensor([-1.0, 1.0], dtype=ax.dtype, device=ax.device)
    return softplus_floor(p.Fz0 + dF, FLOOR_SHARE * p.Fz0)


def _forces(p, a, vx, Fz, mu_g):
    eps = p.eps_load.unsqueeze(-1) if p.eps_load.ndim else p.eps_load
    mu = load_sensitive_mu(mu_g, Fz, p.Fz0, eps)
    Fx, limit, _ = longitudinal_forces(a, vx, Fz, mu, p)  # the single-track plant keeps rolling wheels
    return Fx, lateral_peak(Fx, limit)


def bike_step(x: torch.Tensor, u: torch.Tensor, p: BikeParams, g: Ground | None = None, hdt: float = 0.01) -> torch.Tensor:
    """One substep of the single-track plant.

    ``x`` (..., 8) = ``(X, Y, psi, vx, vy, r, delta, a)``, ``u`` (..., 2) =
    ``(delta_cmd [rad], a_cmd [m/s^2])``. Returns the next state (..., 8).
    """
    check_step_args(x, u, N_BIKE, hdt)
    g = Flat() if g is None else g
    X, Y, psi, vx, vy, r = x.unbind(-1)[:6]
    d_cmd, a_cmd = clamp_inputs(u, p)
    delta = lag(x[..., BIKE.DELTA], d_cmd, p.tau_steer, hdt)
    a = lag(x[..., BIKE.A], a_cmd, p.tau_drive, hdt)
    mu_g, _ = g(wheel_points(X, Y, psi, p))
    delta_w = torch.stack((delta, torch.zeros_like(delta)), -1)
    # predictor: loads from the command's own transfer, then the body's x-force at those loads
    Fx, D = _forces(p, a, vx, _loads(p, a), mu_g)
    cosd, sind, gv, nv = wheel_frames(delta_w, p)
    v_lat = p.v_lat.unsqueeze(-1) if p.v_lat.ndim else p.v_lat
    w = twist_dot(nv, vx, vy, r)
    Fy = -lateral_secant(w, twist_dot(gv, vx, vy, r), D, p.B, p.C, p.E, v_lat) * w
    ax = (Fx * cosd - Fy * sind).sum(-1) / p.m
    Fx, D = _forces(p, a, vx, _loads(p, ax), mu_g)
    pl = planar_step(vx, vy, r, delta_w, Fx, D, p, hdt, braking=a < 0)
    vx1, vy1, r1 = pl.vx, pl.vy, pl.r
    psi_m = psi + 0.5 * hdt * r1
    cm, sm = torch.cos(psi_m), torch.sin(psi_m)
    X1 = X + hdt * (vx1 * cm - vy1 * sm)
    Y1 = Y + hdt * (vx1 * sm + vy1 * cm)
    return torch.stack((X1, Y1, psi + hdt * r1, vx1, vy1, r1, delta, a), -1)
