"""The numbers both engines share, each with its reason (docs/plant.md, docs/env.md).

The torch plant, the task core and the Numba kernels import these; none of them writes the
number again.
"""

from __future__ import annotations

import math

__all__ = ["A_BLEND", "DEFAULT_MU", "ELLIPSE_EPS", "FLOOR_SHARE", "LOCK_WIDTH", "LOCKED", "MU_FLOOR", "MU_FLOOR_SCALE", "N_SECANT",
           "OBS_CLIP", "OVERRUN", "PATCH_EDGE", "RPM", "SLIDE_ANGLE", "SLOPE_STEP", "SOFTCAP_WIDTH", "SOFTPLUS_LINEAR",
           "SOFTPLUS_MIN"]

# ---- tire and corners (plant/tire.py, plant/corners.py)
A_BLEND = 0.05  # [m/s^2] the drive (by drive share) and brake (by load) shares blend over |a| < A_BLEND
ELLIPSE_EPS = 0.02  # the friction ellipse's smoothing: sqrt(1 - r^2) rounded over the last ~eps^2 of r^2
SOFTCAP_WIDTH = 0.1  # the longitudinal force's cap blends from (1 - w) to (1 + w) times the limit
MU_FLOOR = 0.2  # load sensitivity never takes the friction below this share of the ground's
MU_FLOOR_SCALE = 0.02  # ... through a softplus of this width
FLOOR_SHARE = 0.01  # a wheel's load is floored (softplus) at this share of its static load
SOFTPLUS_LINEAR = 20.0  # softplus(z) = z above this argument (torch's threshold)
SOFTPLUS_MIN = 1e-6  # softplus floors clamp at this share of their scale (stays positive in float32)
SLOPE_STEP = 1e-3  # central-difference step of the ground's slope, share of the wheelbase
# A braked wheel locks when its brakes ask more than the road can give: it goes from rolling to
# sliding as the brake demand grows from 1 to 1 + LOCK_WIDTH times its friction bound mu Fz (a C1
# smoothstep, so the step stays differentiable through lock-up). 0.25: the softcap's own blend
# (SOFTCAP_WIDTH) ends at 1.1, so the rolling force is saturated before the wheel slides.
LOCK_WIDTH = 0.25
LOCKED = 0.5  # the speed clamp is off once every wheel's lock share reaches this (plant/dyn4.py)
SLIDE_ANGLE = math.pi / 2  # [rad] the slip angle of a patch sliding sideways: the lateral law's full slide
# Extra secant passes of the implicit lateral step (a fixed count: no data-dependent loop), chosen
# from its measured error (issue 49; tests/test_secant_count_issue49.py): the smallest count whose
# iteration error in (vy, r) stays under a quarter of the step's own discretisation error (one step
# of hdt = 0.01 s against two of hdt / 2, converged) for 99 % of 30,000 moving states (a quarter
# below 3 m/s, body slip to 0.3 rad, any steer). 2 passes: 0.58 of it; 3: 0.12 (median 1e-8 m/s,
# worst 5.9e-4); 4: 0.03.
N_SECANT = 3

# ---- ground (ground/samplers.py, ground/terrain.py)
DEFAULT_MU = 0.8  # Chrono HMMWV_TMeasyTire.json: mu 0.8 on dry road
PATCH_EDGE = 0.5  # [m] width of a friction patch's tanh edge

# ---- powertrain and task
RPM = 30.0 / math.pi  # rad/s -> rpm
# PowertrainParams.overrun's laws of reverse flow; a packed powertrain holds the index (PQ.OVERRUN)
OVERRUN = ("mirror", "turbine")
OBS_CLIP = 10.0  # every scaled observation entry is clipped to [-OBS_CLIP, OBS_CLIP]
SERIES_BELOW = 1e-4  # atan(x)/x and tanh(x)/x switch to their series below |x| < SERIES_BELOW

# the random streams (dyn4_gym._rng, engine/numba_task.py): Chris Wellons' lowbias32 hash's two
# multipliers, the salts of a stream's two words, and of the second word's draw
HASH_MASK = 0xFFFFFFFF
HASH_MUL = (0x7FEB352D, 0x846CA68B)
STREAM_SALTS = (0x9E3779B9, 0x85EBCA6B)
DRAW_SALT = 0x632BE5AB
