"""The optional ``torch.compile`` path (dyn4_gym.plant.fast) computes the same step as eager."""

import pytest
import torch

from dyn4_gym.ground import Bump, MuSplit
from dyn4_gym.plant import HUMVEE, dyn4_params, dyn4_rest, dyn4_step
from dyn4_gym.plant.fast import compiled_step


@pytest.mark.slow
def test_compiled_step_matches_eager_to_rounding():
    D = torch.float64
    p = dyn4_params(HUMVEE, dtype=D)
    g = MuSplit(mu_left=0.8, mu_right=0.3) + Bump(x=3.0, y=0.9, height0=0.08, radius=0.7)
    gen = torch.Generator().manual_seed(0)
    x = dyn4_rest(p, g, (8,)).clone()
    x[:, 3] = 2.0 + 15.0 * torch.rand(8, generator=gen, dtype=D)
    x[:, 4] = torch.randn(8, generator=gen, dtype=D)
    x[:, 5] = 0.3 * torch.randn(8, generator=gen, dtype=D)
    u = torch.stack((0.4 * torch.rand(8, generator=gen, dtype=D) - 0.2, 6 * torch.rand(8, generator=gen, dtype=D) - 3), -1)
    fast = compiled_step(dyn4_step, p, g)
    xe, xc = x, x
    for _ in range(20):  # a few steps, so the check covers the compiled graph's reuse
        xe = dyn4_step(xe, u, p, g)
        xc = fast(xc, u)
    scale = xe.abs().clamp_min(1.0)
    assert float(((xc - xe).abs() / scale).max()) < 1e-10
