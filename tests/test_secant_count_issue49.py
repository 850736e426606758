"""Issue 49, step 4: the implicit lateral step's secant count (``model.constants.N_SECANT``) is
the smallest whose iteration error stays under a quarter of the step's own discretisation error
for 99 % of states, measured on the torch plant (the reference; the kernel reads the same
constant). A change of the tire or the planar step that makes the iteration converge slower (or
faster) fails here, with the measured ratios in the message. docs/speed.md has the full table."""

from __future__ import annotations

import torch

import dyn4_gym.plant.planar as planar
from dyn4_gym.ground import Flat
from dyn4_gym.model.constants import N_SECANT
from dyn4_gym.model.state import DYN4 as S
from dyn4_gym.plant import HUMVEE, dyn4_params, dyn4_rest, dyn4_step

SHARE, QUANTILE = 0.25, 0.99


def _states(p, B=6000, seed=0):
    """Moving cars over the plant's range: a quarter below 3 m/s, body slip to +-0.3 rad, yaw
    rates to 0.12 rad per metre travelled, any steer, drive -6 to +3 m/s^2."""
    g = torch.Generator().manual_seed(seed)

    def U(lo, hi):
        return lo + (hi - lo) * torch.rand(B, generator=g, dtype=torch.float64)

    x = dyn4_rest(p, Flat(), (B,)).clone()
    slow = torch.rand(B, generator=g) < 0.25
    vx = torch.where(slow, U(0.05, 3.0), U(3.0, 30.0))
    x[:, S.VX], x[:, S.VY], x[:, S.R] = vx, vx * torch.tan(U(-0.3, 0.3)), vx * U(-0.12, 0.12)
    dmax = float(p.delta_max)
    x[:, S.DELTA], x[:, S.A] = U(-dmax, dmax), U(-6.0, 3.0)
    u = torch.stack((x[:, S.DELTA] + U(-0.05, 0.05), x[:, S.A]), -1)
    return x, u


def test_secant_count_is_the_smallest_under_a_quarter_of_the_discretisation_error(monkeypatch):
    p = dyn4_params(HUMVEE, dtype=torch.float64)
    x, u = _states(p)
    hdt = 0.01

    def step(x, h, n):
        monkeypatch.setattr(planar, "N_SECANT", n)
        return dyn4_step(x, u, p, Flat(), hdt=h)

    def err(a, b):  # [m/s] and [rad/s] of the implicit pair (vy, r)
        return torch.maximum((a[:, S.VY] - b[:, S.VY]).abs(), (a[:, S.R] - b[:, S.R]).abs())

    converged = step(x, hdt, 60)
    halves = step(step(x, hdt / 2, 60), hdt / 2, 60)
    disc = err(converged, halves)
    assert torch.isfinite(disc).all() and float(disc.median()) > 1e-4  # the states do move the step
    ratio = {n: float(torch.quantile(err(step(x, hdt, n), converged) / disc.clamp_min(1e-300), QUANTILE))
             for n in (N_SECANT - 1, N_SECANT)}
    assert ratio[N_SECANT] < SHARE < ratio[N_SECANT - 1], ratio
