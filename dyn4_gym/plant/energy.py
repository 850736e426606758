"""The four-wheel plant's port-Hamiltonian form and its per-step energy books (docs/plant.md,
"Port-Hamiltonian form" and "The books").

In ``x = (q, p)`` with ``q = (z, phi, theta)`` and ``p = M xi`` for the twist
``xi = (vx, vy, r, zd, phid, thetad)``, ``M = diag(m, m, Iz, m, Ix, Iy)``:

    H  = 1/2 xi^T M xi + sum_i 1/2 k_i l_i^2 + m g z,     l_i = Fz0_i / k_i + hg_i - a_i . q
    x' = (J(p) - R) dH/dx + G u + f_lever (+ f_grade),    u = (Fx_1 .. Fx_4),  y = G^T dH/dx
    J  = [[0, 0, I], [0, J_h(p), 0], [-I, 0, 0]],  J_h = [[0, 0, p_y], [0, 0, -p_x], [-p_y, p_x, 0]]
    R  = blockdiag(0, c_x e_x e_x^T + sum_i S_i n_i n_i^T, sum_i c_i a_i a_i^T)

``S_i = -F_yi / w_i`` is the tire's exact secant (tire.py roots the force at ``w = 0``),
``c_x = F_drag / vx`` the drag's, ``c_i`` the dampers. ``G``'s column ``i`` is the generalised
force of a unit longitudinal force at wheel ``i``'s contact patch, ``h`` below the CG:
``(g_i, 0, h sin d_i, -h cos d_i)`` on ``(vx, vy, r, zd, phid, thetad)``. ``f_lever`` is the
lateral forces' one-way moment on roll and pitch; ``f_grade`` the springs' reaction on the
slopes (``-dH/dpose``, opt-in); ``f_ground`` the moving ground's push through passive dampers.

The books of one substep: ``dH = supplied - dissipated + lever + grade + ground + limiter +
residual``, each a tensor per batch element [J]. Every line but ``ground`` and ``residual`` is the
work of the forces the step applied, over the step, at the midpoint velocities
``(xi + xi+) / 2``: for each velocity component ``M (v+ - v) = hdt F`` exactly, so the kinetic
energy change is booked exactly, line by line, and the vertical step's midpoint springs make the
potential energy change exact as well. What is left, ``residual``, is the work of the gyroscopic
terms, which the explicit ``vx`` and implicit ``(vy, r)`` updates do not cancel exactly: second
order per step, so it falls about 4x per halving of ``hdt``. ``ground`` is the springs' energy at
the step's end on the ground under the new pose minus on the ground the step stood on (exact),
plus the ground's work through passive dampers. ``dissipated = tire + damper + drag``; each is
the work of dissipative forces, ``>= 0`` up to ``O(hdt^2)``. ``limiter`` is what the speed
clamp took (both low-speed blends are inside the secants, so inside R).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import NamedTuple

import torch

from .._math import tanhc
from ..model.books import BOOK_LINES
from ..model.state import DYN4, VERTICAL, VERTICAL_RATES
from .corners import Forces, corner_dot, corner_sum, forces_at, grade_force, wheel_points
from .params import Dyn4Params
from .planar import Planar, twist_dot, wheel_frames
from .tire import wheel_secant

__all__ = ["Books", "BOOK_LINES", "contact_rates", "dyn4_energy", "step_books", "sum_books", "PHStructure", "ph_structure", "ph_rhs",
           "ph_state"]


@dataclass(frozen=True)
class Books:
    """One substep's energy lines [J], each of the batch shape. See the module docstring."""

    dH: torch.Tensor
    supplied: torch.Tensor  # drive and brake work at the contact patches, y^T u
    dissipated: torch.Tensor  # tire + damper + drag, >= 0
    tire: torch.Tensor  # tire slip
    damper: torch.Tensor  # the dampers, c_i (rate they act on)^2
    drag: torch.Tensor  # aerodynamic drag and rolling resistance
    lever: torch.Tensor  # lateral forces' moment on roll and pitch
    grade: torch.Tensor  # the grade force's work (0 unless grade_force)
    ground: torch.Tensor  # the terrain lifting the springs (exact) and pushing through passive dampers
    limiter: torch.Tensor  # the speed clamp
    external: torch.Tensor  # the external-force port's work (0 unless dyn4_step's f_ext)
    residual: torch.Tensor  # integration error, second order per step

    def __add__(self, other: "Books") -> "Books":
        return Books(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def flow(self) -> torch.Tensor:
        """The energy that passed through the step, ``|supplied| + dissipated + |lever| + ...``."""
        return (self.supplied.abs() + self.dissipated.abs() + self.lever.abs() + self.grade.abs()
                + self.ground.abs() + self.limiter.abs())


# the lines' order lives in the model layer (both engines write them by it)
assert tuple(f.name for f in fields(Books)) == BOOK_LINES


def sum_books(books) -> Books:
    """Sum a sequence of per-step :class:`Books` over a rollout (elementwise over the batch)."""
    books = list(books)
    if not books:
        raise ValueError("sum_books needs at least one Books")
    return Books(**{f.name: torch.stack([getattr(b, f.name) for b in books]).sum(0) for f in fields(Books)})


def _twist(x):
    return x[..., DYN4.VX], x[..., DYN4.VY], x[..., DYN4.R], x[..., DYN4.ZD], x[..., DYN4.PHID], x[..., DYN4.THETAD]


def _energy_on(x: torch.Tensor, p: Dyn4Params, hg: torch.Tensor, driven: bool = False) -> torch.Tensor:
    """``H`` with given ground heights under the wheels ``hg (..., 4)``."""
    vx, vy, r, zd, phid, thetad = _twist(x)
    q = x[..., VERTICAL]
    spring = p.Fz0 + p.k * (hg - corner_dot(q, p))  # k_i l_i
    kinetic = 0.5 * (p.m * (vx * vx + vy * vy + zd * zd) + p.Iz * r * r + p.Ix * phid * phid + p.Iy * thetad * thetad)
    if driven:
        kinetic = kinetic + 0.5 * p.m_rot * vx * vx
    return kinetic + (0.5 * spring * spring / p.k).sum(-1) + p.m * p.g * q[..., 0]


def dyn4_energy(x: torch.Tensor, p: Dyn4Params, g, driven: bool = False) -> torch.Tensor:
    """The Hamiltonian ``H`` [J] of state(s) ``x (..., 14)`` on ground ``g``; ``driven``: with the
    rotating parts' ``1/2 m_rot vx^2`` (the driven plant's, docs/plant.md "Rotating inertia")."""
    _, hg = g(wheel_points(x[..., DYN4.X], x[..., DYN4.Y], x[..., DYN4.PSI], p))
    return _energy_on(x, p, hg, driven)


def _u(t):
    return t.unsqueeze(-1) if t.ndim else t


def _midpoint(x, x1):
    """The twist ``(vx, vy, r, phid, thetad)`` at the step's midpoint, each (...)."""
    vx0, vy0, r0, _, pd0, td0 = _twist(x)
    vx1, vy1, r1, _, pd1, td1 = _twist(x1)
    return (vx0 + vx1) / 2, (vy0 + vy1) / 2, (r0 + r1) / 2, (pd0 + pd1) / 2, (td0 + td1) / 2


def contact_rates(x, x1, pl: Planar, p: Dyn4Params) -> torch.Tensor:
    """``y = G^T dH/dx`` ``(..., 4)`` [m/s]: each contact patch's rolling velocity at the step's
    midpoint (the twist along the wheel heading plus the pitch and roll of the body ``h`` above
    it), the velocity a longitudinal force works on."""
    vx, vy, r, pd, td = _midpoint(x, x1)
    h = _u(p.h)
    return twist_dot(pl.gv, vx, vy, r) + h * (pl.sind * pd.unsqueeze(-1) - pl.cosd * td.unsqueeze(-1))


def spin_up(Fx, pl: Planar, x, x1, p: Dyn4Params, hdt: float) -> torch.Tensor:
    """[J] what the driven wheels' torques put into the rotating parts over a substep, on top of
    the tires' work: their force along ``vx`` is ``Fx / kx``, so ``(m_rot / m) sum_i Fx_i g_i,x``
    works on the midpoint ``vx``."""
    vx = 0.5 * (x[..., DYN4.VX] + x1[..., DYN4.VX])
    return hdt * (p.m_rot / p.m) * (Fx * pl.gv[0]).sum(-1) * vx


def step_books(x, x1, f: Forces, pl: Planar, f_grade, p: Dyn4Params, g, hdt: float, f_ext=None,
               driven: bool = False) -> Books:
    """The books of the substep ``x -> x1``, from the forces the step applied (dyn4.py):
    ``f_grade`` the grade force, ``f_ext`` the external port's ``(Fx, Fy, Mz)``, each a triple or None.
    ``driven``: a powertrain's step, whose ``H`` holds the rotating parts (``m_rot``)."""
    vx, vy, r, pd, td = _midpoint(x, x1)
    cosd, sind, nv = pl.cosd, pl.sind, pl.nv
    h = _u(p.h)
    Fx, Fy, Fy0 = f.Fx, pl.Fy, pl.Fy0
    pd_, td_ = pd.unsqueeze(-1), td.unsqueeze(-1)
    y = contact_rates(x, x1, pl, p)
    supplied = hdt * (Fx * y).sum(-1)
    if driven:
        supplied = supplied + spin_up(Fx, pl, x, x1, p, hdt)
    tire = -hdt * (Fy0 * nv[0] * vx.unsqueeze(-1) + Fy * (nv[1] * vy.unsqueeze(-1) + nv[2] * r.unsqueeze(-1))).sum(-1)
    lever = hdt * (Fy * h * (cosd * pd_ + sind * td_)).sum(-1)
    drag = hdt * pl.drag * vx
    qd1 = x1[..., VERTICAL_RATES]
    qdm = (x[..., VERTICAL_RATES] + qd1) / 2
    # the implicit damper force c_i (a_i . qd+ - hdot_i) at the midpoint rate: what the dampers
    # dissipate, c rel+ relm, and what the ground does through them, -c rel+ hdot (0 for skyhook)
    rel1 = corner_dot(qd1, p) - f.hdot
    damper = hdt * (p.damp * rel1 * (corner_dot(qdm, p) - f.hdot)).sum(-1)
    through_dampers = -hdt * (p.damp * rel1 * f.hdot).sum(-1)
    grade = torch.zeros_like(supplied) if f_grade is None else hdt * (f_grade[0] * vx + f_grade[1] * vy + f_grade[2] * r)
    external = torch.zeros_like(supplied) if f_ext is None else hdt * (f_ext[0] * vx + f_ext[1] * vy + f_ext[2] * r)
    limiter = (p.m + p.m_rot if driven else p.m) * (x1[..., DYN4.VX] - pl.vx_free) * vx
    H0 = _energy_on(x, p, f.hg, driven)
    H1_old = _energy_on(x1, p, f.hg, driven)
    H1 = dyn4_energy(x1, p, g, driven)
    ground = H1 - H1_old + through_dampers
    dH = H1 - H0
    dissipated = tire + damper + drag
    residual = dH - (supplied - dissipated + lever + grade + ground + limiter + external)
    return Books(dH=dH, supplied=supplied, dissipated=dissipated, tire=tire, damper=damper, drag=drag,
                 lever=lever, grade=grade, ground=ground, limiter=limiter, external=external, residual=residual)


class PHStructure(NamedTuple):
    """The port-Hamiltonian structure at a state: ``(..., 9, 9)`` matrices, ``(..., 9)`` vectors."""

    x: torch.Tensor  # (z, phi, theta, p_vx, p_vy, p_r, p_zd, p_phid, p_thetad)
    dH: torch.Tensor  # dH/dx = (dV/dq, xi)
    J: torch.Tensor
    R: torch.Tensor
    G: torch.Tensor  # (..., 9, 4)
    u: torch.Tensor  # (..., 4) wheel longitudinal forces [N]
    f_lever: torch.Tensor
    f_grade: torch.Tensor  # the springs' reaction on the slopes, -dH/dpose (0 unless grade_force)
    f_ground: torch.Tensor  # the moving ground's push through passive dampers (0 for skyhook)
    S: torch.Tensor  # (..., 4) tire secants


def ph_state(x: torch.Tensor, p: Dyn4Params) -> torch.Tensor:
    """``(q, p)`` (..., 9) of a plant state (..., 14)."""
    vx, vy, r, zd, phid, thetad = _twist(x)
    mom = torch.stack((p.m * vx, p.m * vy, p.Iz * r, p.m * zd, p.Ix * phid, p.Iy * thetad), -1)
    return torch.cat((x[..., VERTICAL], mom), -1)


def ph_structure(x: torch.Tensor, p: Dyn4Params, g) -> PHStructure:
    """``J, R, G, dH/dx, u, f_lever, f_grade`` at state ``x`` (..., 14) on ground ``g``.

    The wheel forces are those at the state's own (lagged) steer and drive, so a plant step of
    vanishing ``hdt`` follows this vector field.
    """
    f = forces_at(x, x[..., DYN4.DELTA], x[..., DYN4.A], p, g)
    vx, vy, r, zd, phid, thetad = _twist(x)
    cosd, sind, gv, nv = wheel_frames(f.delta_w, p)
    w = twist_dot(nv, vx, vy, r)
    S = wheel_secant(w, twist_dot(gv, vx, vy, r), f.D, p.B, p.C, p.E, _u(p.v_lat), (f.lock, f.limit, f.k_lat))
    Fy = -S * w
    batch = S.shape[:-1]
    dt = x.dtype
    z9 = torch.zeros(*batch, 9, 9, dtype=dt, device=x.device)
    eye3 = torch.eye(3, dtype=dt, device=x.device).expand(*batch, 3, 3)
    # J: q' = dH/dp_vert, p_vert' = -dH/dq, gyroscopic block on the planar momenta
    px, py = p.m * vx, p.m * vy
    zero = torch.zeros_like(px)
    Jh = torch.stack((torch.stack((zero, zero, py), -1), torch.stack((zero, zero, -px), -1),
                      torch.stack((-py, px, zero), -1)), -2)
    J = torch.cat((torch.cat((z9[..., :3, :6], eye3), -1),
                   torch.cat((z9[..., :3, :3], Jh, z9[..., :3, :3]), -1),
                   torch.cat((-eye3, z9[..., :3, :6]), -1)), -2)
    # R: drag secant + tire secants on the planar block, dampers on the vertical block
    c_x = p.c_drag * vx.abs() + p.f_roll / p.v_roll * tanhc(vx / p.v_roll)
    nmat = torch.stack(nv, -1)  # (..., 4, 3)
    Rp = torch.einsum("...n,...ni,...nj->...ij", S, nmat, nmat)
    Rp = Rp + c_x[..., None, None] * torch.tensor([[1.0, 0, 0], [0, 0, 0], [0, 0, 0]], dtype=dt, device=x.device)
    Dv = corner_sum(p.damp, p)
    Rv = torch.stack((torch.stack((Dv[0], Dv[1], Dv[2]), -1), torch.stack((Dv[1], Dv[3], Dv[4]), -1),
                      torch.stack((Dv[2], Dv[4], Dv[5]), -1)), -2).expand(*batch, 3, 3)
    R = torch.cat((z9[..., :3, :], torch.cat((z9[..., :3, :3], Rp, z9[..., :3, :3]), -1),
                   torch.cat((z9[..., :3, :6], Rv), -1)), -2)
    # G: unit longitudinal force at each contact patch, h below the CG
    h = _u(p.h)
    zero4 = torch.zeros_like(gv[0] + 0 * S)
    G = torch.stack((zero4, zero4, zero4, gv[0] + zero4, gv[1] + zero4, gv[2] + zero4, zero4,
                     h * sind + zero4, -h * cosd + zero4), -2)
    f_lever = torch.cat((torch.zeros(*batch, 6, dtype=dt, device=x.device),
                         torch.stack((zero, (h * Fy * cosd).sum(-1), (h * Fy * sind).sum(-1)), -1)), -1)
    zero3 = torch.zeros(*batch, 3, dtype=dt, device=x.device)
    planar_zero = (zero, zero, zero)
    fg = grade_force(p, f.spring, f.ground) if p.grade_force else planar_zero
    f_grade = torch.cat((zero3, torch.stack(torch.broadcast_tensors(*fg), -1), zero3), -1)
    # the ground's push through passive dampers: c_i hdot_i a_i on the vertical momenta and, with
    # the grade force, the dampers' share of the slopes' reaction on the planar ones
    cd = p.damp * f.hdot
    fgd = grade_force(p, -p.damp * f.damper_rate, f.ground) if p.grade_force else planar_zero
    f_ground = torch.cat((zero3, torch.stack(torch.broadcast_tensors(*fgd), -1),
                          torch.stack((cd.sum(-1), (cd * p.y_w).sum(-1), -(cd * p.x_w).sum(-1)), -1)), -1)
    spring = f.spring
    dVdq = torch.stack((-spring.sum(-1) + p.m * p.g, -(spring * p.y_w).sum(-1), (spring * p.x_w).sum(-1)), -1)
    dH = torch.cat((dVdq, torch.stack((vx, vy, r, zd, phid, thetad), -1)), -1)
    return PHStructure(x=ph_state(x, p), dH=dH, J=J, R=R, G=G, u=f.Fx, f_lever=f_lever, f_grade=f_grade,
                       f_ground=f_ground, S=S)


def ph_rhs(x: torch.Tensor, p: Dyn4Params, g) -> torch.Tensor:
    """The port-Hamiltonian right-hand side ``(J - R) dH/dx + G u + f_lever + f_grade + f_ground`` (..., 9)."""
    s = ph_structure(x, p, g)
    return (torch.einsum("...ij,...j->...i", s.J - s.R, s.dH) + torch.einsum("...ij,...j->...i", s.G, s.u)
            + s.f_lever + s.f_grade + s.f_ground)
