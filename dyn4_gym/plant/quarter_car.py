"""The bump gates' reference: a two-mass quarter-car driven over a bump (docs/plant.md, "Bumps
at speed"; issue 45, item 6).

Not a plant of this package: the yardstick the corners are measured against. Sprung mass
``m_s = Fz0 / g - m_u`` on a corner spring ``k`` [N/m] and damper ``c`` [N s/m]; unsprung mass
``m_u`` [kg] on a point-contact tire spring ``kt`` [N/m] that may lift off (its force never
pulls); the road under the wheel's centre line is :class:`dyn4_gym.ground.Bump`'s profile
``H (1 - d^2 / R^2)^2`` for ``|d| < R``. Integrated by classical RK4 at ``dt`` (0.1 ms by
default, three orders below the 10 ms substep). Everything is SI.
"""

from __future__ import annotations

import json
from importlib.resources import files

import numpy as np

__all__ = ["UNSPRUNG", "quarter_car_peak", "tire_stiffness"]

# Chrono's HMMWV per corner (bundled hmmwv_chrono/*.json): spindle 14.705, upright 19.45, the
# two control arms 5.813 and 23.965 (HMMWV_DoubleWishboneFront), rim 18.8 (HMMWV_Wheel), tire
# 37.6 (HMMWV_TMeasyTire): everything below the springs, as Chrono's bodies carry it [kg].
UNSPRUNG = 14.705 + 19.45 + 5.813 + 23.965 + 18.8 + 37.6


def tire_stiffness() -> float:
    """LFDM's TMeasy vertical stiffness ``kt`` [N/m] (bundled hmmwv_lfdm/tmeasy.json, Chrono's
    HMMWV tire)."""
    return float(json.loads(files("dyn4_gym").joinpath("data/hmmwv_lfdm/tmeasy.json").read_text())["kt"])


def quarter_car_peak(v: float, fz0: float, k: float, c: float, m_u: float, kt: float, height: float = 0.1,
                     radius: float = 0.5, g: float = 9.81, dt: float = 1e-4) -> float:
    """The peak tire load over its static load ``fz0`` [N], driving at ``v`` [m/s] over a bump of
    ``height`` [m] and ``radius`` [m] (length ``2 radius``), from static equilibrium one bump
    length before it, until one second after it."""
    m_s = fz0 / g - m_u

    def ground(t):
        d = v * t - 2.0 * radius  # the bump's centre is reached one length after the start
        return height * (1 - d * d / radius**2) ** 2 if abs(d) < radius else 0.0

    def rhs(t, s):
        zs, vs, zu, vu = s  # displacements from static equilibrium [m], rates [m/s]
        tire = max(fz0 + kt * (ground(t) - zu), 0.0)  # point contact: it may lift off
        susp = fz0 - m_u * g + k * (zu - zs) + c * (vu - vs)
        return np.array([vs, susp / m_s - g, vu, (tire - susp) / m_u - g])

    s, t, peak = np.zeros(4), 0.0, fz0
    for _ in range(int((4 * radius / v + 1.0) / dt)):
        k1 = rhs(t, s)
        k2 = rhs(t + dt / 2, s + dt / 2 * k1)
        k3 = rhs(t + dt / 2, s + dt / 2 * k2)
        k4 = rhs(t + dt, s + dt * k3)
        s, t = s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4), t + dt
        peak = max(peak, fz0 + kt * (ground(t) - s[2]))
    return peak / fz0
