"""Named indices into the plants' flat state vectors (the seeds' order) and the powertrain's.

Single track (8): ``X, Y, psi, vx, vy, r, delta, a``.
Four wheels (14): ``X, Y, psi, vx, vy, r, z, phi, theta, zd, phid, thetad, delta, a``.

Units and frames: ``X, Y`` [m] world position of the CG's ground projection; ``psi`` [rad] yaw
CCW from +X; ``vx, vy`` [m/s] body-frame velocity (x forward, y left); ``r`` [rad/s] yaw rate
(CCW +); ``z`` [m] heave up (world height of the body's reference, 0 at rest on level ground at
height 0); ``phi`` [rad] roll about +x (positive lifts the left side); ``theta`` [rad] pitch about
+y (positive lowers the nose); ``zd, phid, thetad`` their rates; ``delta`` [rad] lagged steer of
the virtual centre front wheel; ``a`` [m/s^2] lagged longitudinal command (+ drives, - brakes).

Powertrain (3): ``omega_e`` [rad/s] crank speed, ``gear`` (-1 reverse, 1..n forward),
``t_shift`` [s] since the last shift.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["BIKE", "DYN4", "PT", "XY", "BIKE_NAMES", "DYN4_NAMES", "N_BIKE", "N_DYN4", "N_PT", "WHEELS", "VERTICAL",
           "VERTICAL_RATES"]


class BIKE(IntEnum):
    X = 0
    Y = 1
    PSI = 2
    VX = 3
    VY = 4
    R = 5
    DELTA = 6
    A = 7


class DYN4(IntEnum):
    X = 0
    Y = 1
    PSI = 2
    VX = 3
    VY = 4
    R = 5
    Z = 6
    PHI = 7
    THETA = 8
    ZD = 9
    PHID = 10
    THETAD = 11
    DELTA = 12
    A = 13


class PT(IntEnum):
    """Indices into the powertrain state ``(..., 3)``."""

    OMEGA_E = 0  # [rad/s] crank speed
    GEAR = 1  # -1 reverse, 1..n forward
    T_SHIFT = 2  # [s] since the last shift


# the four-wheel state's vertical coordinates (z, phi, theta) and their rates, as slices: the
# vertical step and the books read them as blocks
VERTICAL = slice(DYN4.Z, DYN4.THETA + 1)
VERTICAL_RATES = slice(DYN4.ZD, DYN4.THETAD + 1)
assert VERTICAL.stop - VERTICAL.start == VERTICAL_RATES.stop - VERTICAL_RATES.start == 3

BIKE_NAMES = tuple(i.name.lower() for i in BIKE)
DYN4_NAMES = tuple(i.name.lower() for i in DYN4)
N_BIKE = len(BIKE)
N_DYN4 = len(DYN4)
N_PT = len(PT)
WHEELS = ("FL", "FR", "RL", "RR")  # corner order of every per-wheel vector


class XY(IntEnum):
    """Columns of a world point ``(..., 2)`` [m] (course points, contact patches)."""

    X = 0
    Y = 1
