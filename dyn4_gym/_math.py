"""Smooth, elementwise-safe math helpers shared by the plants.

Every helper here has a finite, correct gradient at its singular point (tested in
``tests/test_math.py``). The "double where" pattern is used throughout: the branch that is
not taken is evaluated at a safe input, so ``torch.where`` never back-propagates a NaN.
"""

from __future__ import annotations

import torch

from .model.constants import ELLIPSE_EPS, SERIES_BELOW, SOFTCAP_WIDTH, SOFTPLUS_LINEAR, SOFTPLUS_MIN

__all__ = ["atanc", "softcap", "softplus_floor", "tanhc", "ellipse_factor"]

_SMALL = SERIES_BELOW


def atanc(x: torch.Tensor) -> torch.Tensor:
    """``atan(x) / x``, equal to 1 at ``x = 0`` (series below ``|x| < 1e-4``)."""
    small = x.abs() < _SMALL
    xs = torch.where(small, torch.ones_like(x), x)
    x2 = x * x
    return torch.where(small, 1.0 - x2 / 3.0 + x2 * x2 / 5.0, torch.atan(xs) / xs)


def tanhc(x: torch.Tensor) -> torch.Tensor:
    """``tanh(x) / x``, equal to 1 at ``x = 0`` (series below ``|x| < 1e-4``)."""
    small = x.abs() < _SMALL
    xs = torch.where(small, torch.ones_like(x), x)
    x2 = x * x
    return torch.where(small, 1.0 - x2 / 3.0 + 2.0 * x2 * x2 / 15.0, torch.tanh(xs) / xs)


def sinc_unnormalised(x: torch.Tensor) -> torch.Tensor:
    """``sin(x) / x``, equal to 1 at ``x = 0``."""
    return torch.sinc(x / torch.pi)


def softcap(x: torch.Tensor, limit: torch.Tensor, width: float = SOFTCAP_WIDTH) -> torch.Tensor:
    """Cap ``|x|`` at ``limit`` with a C1 blend that is the identity up to ``(1 - width) limit``.

    Between ``(1 - width)`` and ``(1 + width)`` times the limit a quadratic joins the identity
    to the constant, so a command exactly at the limit gets ``1 - width / 4`` of it (97.5 % at the
    default) and one 10 % above gets all of it. A ``tanh`` cap would give only 76 % at the limit
    and make a full-brake stop about 20 % too long. ``limit`` must be positive.
    """
    s = x / limit
    a = s.abs()
    inner = a <= 1.0 - width
    outer = a >= 1.0 + width
    blend = 1.0 - (1.0 + width - a) ** 2 / (4.0 * width)
    capped = torch.sign(x) * limit * torch.where(outer, torch.ones_like(a), blend)
    return torch.where(inner, x, capped)


def softplus_floor(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``scale * softplus(x / scale)``: positive, smooth, equal to ``x`` well above ``scale``.

    Far below the floor (``x < -13.8 scale``) softplus would underflow to exactly 0 (at
    ``x / scale < -88`` in float32), and a zero load divides by zero in the tires; it is held at
    ``1e-6 scale`` there instead, which changes nothing above.
    """
    return scale * torch.nn.functional.softplus(x / scale, threshold=SOFTPLUS_LINEAR).clamp_min(SOFTPLUS_MIN)


def ellipse_factor(ratio_sq: torch.Tensor, eps: float = ELLIPSE_EPS) -> torch.Tensor:
    """Share of the lateral grip left inside the friction ellipse, ``~sqrt(1 - ratio^2)``.

    ``ratio_sq = (F_x / (mu F_z))^2`` in ``[0, 1]``. Regularised so the slope stays finite at
    ``ratio = 1`` (full braking): ``(sqrt(1 - r^2 + e^2) - e) / (sqrt(1 + e^2) - e)``, which is
    exactly 1 at ``r = 0`` and exactly 0 at ``r = 1``.
    """
    rem = (1.0 - ratio_sq).clamp_min(0.0)
    e2 = eps * eps
    return (torch.sqrt(rem + e2) - eps) / ((1.0 + e2) ** 0.5 - eps)
