"""Tires: Pacejka's lateral force as an exact secant, longitudinal forces, load sensitivity.

Lateral force (docs/plant.md, "The step", stage 5). Wheel ``i`` has lateral velocity ``w_i = n_i . xi``
and rolling velocity ``u_i = g_i . xi`` for the body twist ``xi = (vx, vy, r)``. Its slip angle is

    alpha_i = atan(w_i / ubar_i),   ubar_i = sqrt(u_i^2 + v_lat^2)

which is ``atan2(w, |u|)`` above walking pace and, below it, a smooth low-speed blend: at rest
the tire acts as a stiff viscous damper ``F = -D B C w / v_lat`` instead of dividing by zero.
``v_lat`` (the Humvee's 0.5 m/s) is chosen so the blend changes the slip angle by under 1.5 %
at 3 m/s (the Ackermann gate) while keeping the secant bounded at rest. The force is Pacejka's

    F_y = -D sin(C atan(B alpha - E (B alpha - atan(B alpha)))),  D = mu_i Fz_i e_i

with ``e_i`` the friction-ellipse share left by the longitudinal force. It is rooted at
``w = 0``, and we never form ``F / w`` numerically: the secant ``S = -F_y / w`` is computed as a
product of ``sin(x)/x`` and ``atan(x)/x`` factors, each exact and smooth at 0, so ``S >= 0`` at any
slip and steer angle (``C < 2``, ``E < 1``) and its gradient at ``w = 0`` is the true one.

Load sensitivity: ``mu_i = mu_ground (1 - eps (Fz_i - Fz0_i) / Fz0_i)``, floored smoothly at
0.2 of the ground's value, so load transfer costs grip (spec.py gives eps from LFDM's TMeasy
data).

Longitudinal force: the lagged command ``a`` asks for ``m a``. Drive (``a > 0``) is split over the
driven wheels by ``drive_share`` and capped by power, ``F / (1 + (F vx / P)^4)^(1/4)``, which is
``F`` at low speed and ``P / vx`` at high speed. Brakes (``a < 0``) are split by load (the two splits blend over
``|a| < 0.05 m/s^2``, so the force is differentiable at ``a = 0``) and act
against the direction of travel, ``sign(vx)``, at full strength down to rest: the in-plane step's
speed clamp stops the car and holds it while the brakes are on (planar.py).
Each wheel's force is then capped by ``mu_i Fz_i`` with :func:`dyn4_gym._math.softcap`.

Locked wheels (issue 22): a wheel whose brakes ask more than ``mu_i Fz_i`` locks over brake demands
of 1 to ``1 + LOCK_WIDTH`` times that bound (:func:`lock_share`, a C1 smoothstep). A locked wheel's
patch slides: its force opposes the patch's velocity ``(u_i, w_i)``, whatever the wheel's heading,
with the full-slide friction ``mu_i Fz_i k_i`` (:func:`sliding_secant`), where ``k_i`` blends the
longitudinal law's full slide (1: the softcap holds the peak) and the lateral law's (Pacejka at a
90 deg slip angle, 0.90 for the Humvee) by the slide's direction. The lateral part enters the
implicit lateral step as a secant ``mu_i Fz_i k_i / |v_i|``, the longitudinal part is explicit like
the rolling force. A rolling wheel (share ``1 - lambda``) keeps the law above.
"""

from __future__ import annotations

import torch

from .._math import atanc, ellipse_factor, sinc_unnormalised, softcap, softplus_floor
from ..model.constants import A_BLEND, LOCK_WIDTH, MU_FLOOR, MU_FLOOR_SCALE, SLIDE_ANGLE

__all__ = ["A_BLEND", "pacejka", "lateral_secant", "load_sensitive_mu", "longitudinal_forces", "driven_requests",
           "driven_forces", "lock_share", "slide_friction", "sliding_secant", "wheel_secant"]



def pacejka(alpha: torch.Tensor, B, C, E) -> torch.Tensor:
    """Normalised Pacejka curve ``sin(C atan(B a - E (B a - atan(B a))))`` (force / D)."""
    ba = B * alpha
    return torch.sin(C * torch.atan(ba - E * (ba - torch.atan(ba))))


def lateral_secant(w, u, D, B, C, E, v_lat) -> torch.Tensor:
    """Exact secant ``S = -F_y / w >= 0`` of the lateral force [N s/m], elementwise.

    ``w``, ``u``: lateral and rolling velocity of the wheel [m/s]; ``D``: peak force [N].
    """
    ubar = torch.sqrt(u * u + v_lat * v_lat)
    ratio = w / ubar
    alpha = torch.atan(ratio)
    ba = B * alpha
    psi = ba - E * (ba - torch.atan(ba))
    phi = torch.atan(psi)
    # sin(C phi) / w = sinc(C phi) * C * (phi / psi) * (psi / alpha) * (alpha / w)
    psi_over_alpha = B * (1.0 - E) + E * B * atanc(ba)
    alpha_over_w = atanc(ratio) / ubar
    return D * sinc_unnormalised(C * phi) * C * atanc(psi) * psi_over_alpha * alpha_over_w


def load_sensitive_mu(mu_ground, Fz, Fz0, eps) -> torch.Tensor:
    """``mu_ground (1 - eps (Fz - Fz0) / Fz0)``, floored smoothly at ``0.2 mu_ground``."""
    factor = 1.0 - eps * (Fz - Fz0) / Fz0
    return mu_ground * (MU_FLOOR + softplus_floor(factor - MU_FLOOR, torch.as_tensor(MU_FLOOR_SCALE, dtype=Fz.dtype,
                                                                                  device=Fz.device)))


def longitudinal_forces(a, vx, Fz, mu, p):
    """Wheel longitudinal forces ``(..., n)`` [N] along each wheel's heading.

    ``a`` (...) lagged acceleration command [m/s^2]; ``vx`` (...) forward speed [m/s];
    ``Fz`` (..., n) loads; ``mu`` (..., n) load-sensitive friction. Returns ``(Fx, limit)`` with
    ``limit = mu Fz`` the friction bound each force was capped at.

    The total request is one ``where`` on the sign of ``a`` (drive: ``m a`` under the power cap;
    brakes: ``m a sign(vx)``), so its gradient at ``a = 0`` is the one-sided derivative (equal on
    both sides while ``vx > 0``), never the sum of both sides. It is shared over the wheels by
    ``drive_share`` when driving and by load when braking, blended over ``|a| < A_BLEND`` with a
    C1 smoothstep: the request is 0 at ``a = 0``, so each wheel's force is then differentiable
    at ``a = 0`` although the two shares differ. Outside the blend the shares are exact.
    """
    m = p.m
    drive = a >= 0
    f_drive = m * a / (1.0 + (m * a * vx / p.power) ** 4) ** 0.25
    f_brake = m * a * torch.sign(vx)
    total = torch.where(drive, f_drive, f_brake)
    share_load = Fz / Fz.sum(-1, keepdim=True)
    s = ((a + A_BLEND) / (2 * A_BLEND)).clamp(0.0, 1.0)
    s = (s * s * (3.0 - 2.0 * s)).unsqueeze(-1)  # 1: drive share, 0: load share
    share = share_load + s * (p.drive_share - share_load)
    limit = mu * Fz
    demand = (m * (-a).clamp(min=0.0)).unsqueeze(-1) * share  # what the brakes ask of each wheel, at any vx
    return softcap(total.unsqueeze(-1) * share, limit), limit, demand


def driven_requests(drive, vx, Fz, p):
    """Per-wheel requests ``(D, Bk)`` ``(..., n)`` [N] of a driven step (the powertrain's forces).

    ``drive (..., 2) = (F_drive, F_brake)``: the total drive force at the contact patches [N]
    (signed: + pushes forward, - in reverse gear) shared by ``drive_share`` (open differentials),
    and the total brake force [N] (>= 0) shared by load and acting against ``sign(vx)``.
    ``D`` is each wheel's drive share, ``Bk`` its brake force (signed with the travel).
    """
    f_drive, f_brake = drive[..., 0:1], drive[..., 1:2]
    D = f_drive * p.drive_share
    Bk = f_brake * (Fz / Fz.sum(-1, keepdim=True)) * torch.sign(vx).unsqueeze(-1)
    return D, Bk


def driven_forces(drive, vx, Fz, mu, p, kx):
    """``(Fx, limit, demand)`` like :func:`longitudinal_forces`, from the powertrain's forces instead
    of an acceleration command: ``Fx_i = softcap(kx (D_i - Bk_i), mu_i Fz_i)``
    (:func:`driven_requests`). ``kx = m / (m + m_rot)``: the share of a wheel's torque over its
    radius that reaches the road while the wheel rolls; the rest spins up the wheels and the
    driveline (docs/plant.md, "Rotating inertia"). No power cap and no blend: the powertrain's
    maps already bound the drive force."""
    D, Bk = driven_requests(drive, vx, Fz, p)
    limit = mu * Fz
    demand = kx * (drive[..., 1:2] * (Fz / Fz.sum(-1, keepdim=True)))  # each wheel's brake force at the road, unsigned
    return softcap(kx * (D - Bk), limit), limit, demand


def lock_share(demand, limit) -> torch.Tensor:
    """How locked each braked wheel is, 0 (rolling) to 1 (sliding): a C1 smoothstep of its brake
    demand over its friction bound, from 1 to ``1 + LOCK_WIDTH`` (model/constants.py)."""
    s = ((demand / limit - 1.0) / LOCK_WIDTH).clamp(0.0, 1.0)
    return s * s * (3.0 - 2.0 * s)


def slide_friction(B, C, E) -> torch.Tensor:
    """The lateral law's full slide over its peak: Pacejka at a 90 deg slip angle (0.90 for the
    Humvee's B, C, E)."""
    return pacejka(torch.as_tensor(SLIDE_ANGLE, dtype=B.dtype, device=B.device), B, C, E)


def wheel_secant(w, u, D, B, C, E, v_lat, sliding=None) -> torch.Tensor:
    """The lateral secant ``-F_y / w`` of wheels moving at ``(u, w)``: the rolling law
    (:func:`lateral_secant`) and, with ``sliding = (lock, limit, k_lat)``, each wheel's locked
    share sliding (:func:`sliding_secant`). Exactly the rolling secant where ``lock`` is 0."""
    S = lateral_secant(w, u, D, B, C, E, v_lat)
    if sliding is None:
        return S
    lock, limit, k_lat = sliding
    return (1 - lock) * S + lock * sliding_secant(u, w, limit, k_lat, v_lat)


def sliding_secant(u, w, limit, k_lat, v_lat) -> torch.Tensor:
    """``|F| / |v|`` [N s/m] of a sliding patch moving at ``(u, w)`` [m/s] along and across its
    wheel: friction ``limit`` times ``(u^2 + k_lat (w^2 + v_lat^2)) / |v|^2`` (the longitudinal
    law's full slide, 1, blended by direction into the lateral law's, ``k_lat``), over
    ``|v| = sqrt(u^2 + w^2 + v_lat^2)`` (``v_lat`` keeps the direction smooth at rest). The force
    is ``-secant (u, w)``."""
    v2 = u * u + w * w + v_lat * v_lat
    return limit * (u * u + k_lat * (w * w + v_lat * v_lat)) / (v2 * torch.sqrt(v2))


def lateral_peak(Fx, limit) -> torch.Tensor:
    """Peak lateral force ``D`` left inside the friction ellipse by ``Fx`` (both ``(..., n)``)."""
    return limit * ellipse_factor((Fx / limit) ** 2)
