"""The kernels' own sine and cosine (engine/numba_math.py, issue 49 step 4): their stated error
against libm, their special values, and the reduction's constants re-derived."""

import math

import numpy as np
import pytest
from numba import njit

from dyn4_gym.engine.numba_math import _PIO2_1, _PIO2_2, _PIO2_3, SINCOS_EXACT_BELOW, sincos_v


@njit(cache=False, error_model="numpy")
def _sincos_all(x, s, c):
    for i in range(x.size):
        s[i], c[i] = sincos_v(x[i])


def _ulps(a, b):
    """Distance in units in the last place between float64 arrays (sign-magnitude ordered)."""
    ia, ib = a.view(np.int64), b.view(np.int64)
    low = np.int64(-(2 ** 63))
    ia = np.where(ia < 0, low - ia, ia)
    ib = np.where(ib < 0, low - ib, ib)
    return np.abs(ia - ib)


def _sincos(x):
    s, c = np.empty_like(x), np.empty_like(x)
    _sincos_all(x, s, c)
    return s, c


@pytest.mark.parametrize("limit", [1.0, 4.0, 100.0, SINCOS_EXACT_BELOW])
def test_within_two_ulp_of_libm_below_the_stated_bound(limit):
    rng = np.random.default_rng(int(limit))
    x = np.concatenate([rng.uniform(-limit, limit, 400_000), 10.0 ** rng.uniform(-12, math.log10(limit), 100_000)])
    x = np.concatenate([x, -x, (np.arange(-2000, 2001) * (math.pi / 4))])  # the quadrants' edges too
    x = x[np.abs(x) <= SINCOS_EXACT_BELOW]
    s, c = _sincos(x)
    assert int(_ulps(s, np.sin(x)).max()) <= 2
    assert int(_ulps(c, np.cos(x)).max()) <= 2


def test_special_values():
    x = np.array([0.0, 5e-324, 1e-300, np.inf, -np.inf, np.nan])
    s, c = _sincos(x)
    assert s[0] == 0.0 and c[0] == 1.0
    assert s[1] == 5e-324 and s[2] == 1e-300 and c[1] == c[2] == 1.0  # sin x = x below the cube's rounding
    assert np.isnan(s[3:]).all() and np.isnan(c[3:]).all()


def test_beyond_the_bound_the_error_grows_only_with_the_argument():
    x = np.random.default_rng(3).uniform(-1e7, 1e7, 200_000)
    s, c = _sincos(x)
    assert float(np.abs(s - np.sin(x)).max()) < 1e-15 * 1e7 and float(np.abs(c - np.cos(x)).max()) < 1e-15 * 1e7


def test_the_three_parts_of_half_pi():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 300
    half_pi = mpmath.pi / 2
    for part in (_PIO2_1, _PIO2_2):  # 33 significant bits: k * part is exact for |k| < 2^20
        m, _ = math.frexp(part)
        assert (m * 2 ** 33) == int(m * 2 ** 33)
    rest = half_pi - mpmath.mpf(_PIO2_1) - mpmath.mpf(_PIO2_2) - mpmath.mpf(_PIO2_3)
    assert abs(rest) < mpmath.mpf(2) ** -120
    assert SINCOS_EXACT_BELOW * 2 / math.pi < 2 ** 20
