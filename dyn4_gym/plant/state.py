"""Named indices into the plants' flat state vectors (the seeds' order; their home is
:mod:`dyn4_gym.model.state`).

Single track (8): ``X, Y, psi, vx, vy, r, delta, a``.
Four wheels (14): ``X, Y, psi, vx, vy, r, z, phi, theta, zd, phid, thetad, delta, a``.

Units and frames: ``X, Y`` [m] world position of the CG's ground projection; ``psi`` [rad] yaw
CCW from +X; ``vx, vy`` [m/s] body-frame velocity (x forward, y left); ``r`` [rad/s] yaw rate
(CCW +); ``z`` [m] heave up (world height of the body's reference, 0 at rest on level ground at
height 0); ``phi`` [rad] roll about +x (positive lifts the left side); ``theta`` [rad] pitch about
+y (positive lowers the nose); ``zd, phid, thetad`` their rates; ``delta`` [rad] lagged steer of
the virtual centre front wheel; ``a`` [m/s^2] lagged longitudinal command (+ drives, - brakes).
"""

from __future__ import annotations

from ..model.state import BIKE, BIKE_NAMES, DYN4, DYN4_NAMES, WHEELS

__all__ = ["BIKE", "DYN4", "BIKE_NAMES", "DYN4_NAMES", "WHEELS", "dyn4_state"]


def dyn4_state(dtype=None, device=None, **named):
    """A (14,) four-wheel state from named entries, the rest 0: ``dyn4_state(vx=10.0, delta=0.1)``."""
    import torch

    x = torch.zeros(14, dtype=dtype or torch.float64, device=device)
    for k, v in named.items():
        try:
            x[DYN4[k.upper()]] = v
        except KeyError:
            raise TypeError(f"unknown state entry {k!r}; entries are {DYN4_NAMES}") from None
    return x
