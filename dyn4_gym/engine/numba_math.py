"""The kernels' own sine and cosine of one argument, from one reduction (issue 49, step 4).

The rough ground's hills need ``sin`` and ``cos`` of the same phase at every wheel, twice a
substep (the ground under the wheels and the books' at the step's end): libm computes the
argument's reduction twice and is a call LLVM cannot inline or vectorise. :func:`sincos_v` is
plain arithmetic with selects: one Cody-Waite reduction by ``pi/2`` (``pi/2`` in three parts, the
first two of 33 significant bits, so ``k * part`` is exact for ``|k| < 2^20``), then Taylor
polynomials on ``|r| <= pi/4`` (terms through ``r^17`` and ``r^18``: the first term left out is
below 5e-17 of the value there), picked and signed by the quadrant.

Error, measured against libm (tests/test_numba_math.py): within 2 ulp for ``|x| <=``
:data:`SINCOS_EXACT_BELOW` (1e5 rad: with the drawn hills' shortest default wavelength, 30 m, a
phase reaches that about 480 km from the origin); beyond ``|x| = 1.6e6`` the reduction is no longer exact and the
absolute error grows like ``|x| 1e-16``. Infinities and NaN give NaN; ``sin(-0)`` is ``+0``.
The torch engine keeps ``torch.sin``/``torch.cos``: the engines agree to those 2 ulp.

In a loop over an array (one value per lane) LLVM vectorises it: 2.6 ns per value for both
against 9.4 ns for libm's two calls here (AVX-512 machine, 4,096 values). Inside the kernel's
per-row substep it runs scalar, one wheel at a time (docs/speed.md).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["sincos_v", "SINCOS_EXACT_BELOW"]

# pi/2 in three parts (computed with mpmath at 300 bits; tests/test_numba_math.py re-derives them)
_PIO2_1 = 1.5707963267341256
_PIO2_2 = 6.077100506303966e-11
_PIO2_3 = 2.0222662487959506e-21
_TWO_OVER_PI = 0.6366197723675814
SINCOS_EXACT_BELOW = 1.0e5  # [rad] |x| below which sincos_v is within 2 ulp of libm (tested)

# Taylor coefficients (-1)^n / (2n+1)! (n = 1..8) and (-1)^n / (2n)! (n = 2..9)
_S = tuple((-1.0) ** n / math.factorial(2 * n + 1) for n in range(1, 9))
_C = tuple((-1.0) ** n / math.factorial(2 * n) for n in range(2, 10))


@njit(cache=True, error_model="numpy", inline="always")
def sincos_v(x):
    """``(sin(x), cos(x))`` from one reduction; within 2 ulp of libm for ``|x| <= 1e5``."""
    k = np.floor(x * _TWO_OVER_PI + 0.5)  # a float (math.floor gives an int: no lanes, garbage at inf)
    r = ((x - k * _PIO2_1) - k * _PIO2_2) - k * _PIO2_3
    z = r * r
    s = r + r * z * (_S[0] + z * (_S[1] + z * (_S[2] + z * (_S[3] + z * (_S[4] + z * (_S[5] + z * (
        _S[6] + z * _S[7])))))))
    c = 1.0 - 0.5 * z + z * z * (_C[0] + z * (_C[1] + z * (_C[2] + z * (_C[3] + z * (_C[4] + z * (
        _C[5] + z * (_C[6] + z * _C[7])))))))
    q = k - 4.0 * np.floor(0.25 * k)  # the quadrant, 0..3
    sn = s if q == 0.0 else (c if q == 1.0 else (-s if q == 2.0 else -c))
    cs = c if q == 0.0 else (-s if q == 1.0 else (-c if q == 2.0 else s))
    return sn, cs
