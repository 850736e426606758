"""Ground samplers: values, composition, the grid's interpolation, validation."""

import numpy as np
import pytest
import torch

from dyn4_gym.ground import DEFAULT_MU, Bump, Flat, Grid, Hills, MuPatch, MuSplit, Ramp

D = torch.float64


def test_flat_and_ramp():
    xy = torch.tensor([[0.0, 0.0], [10.0, -3.0]], dtype=D)
    mu, h = Flat(mu=0.6)(xy)
    assert torch.equal(mu, torch.full((2,), 0.6, dtype=D)) and torch.equal(h, torch.zeros(2, dtype=D))
    mu, h = Ramp(slope=0.05)(xy)
    assert torch.allclose(h, torch.tensor([0.0, 0.5], dtype=D)) and float(mu[0]) == DEFAULT_MU


def test_mu_split_sides():
    mu, _ = MuSplit(mu_left=0.8, mu_right=0.3)(torch.tensor([[0.0, 0.9], [0.0, -0.9], [0.0, 0.0]], dtype=D))
    assert mu.tolist() == pytest.approx([0.8, 0.3, 0.55])


def test_bump_shape():
    b = Bump(x=1.0, y=2.0, height0=0.1, radius=0.5)
    _, h = b(torch.tensor([[1.0, 2.0], [1.25, 2.0], [1.6, 2.0]], dtype=D))
    assert h.tolist() == pytest.approx([0.1, 0.1 * 0.75**2, 0.0])


def test_composition_adds_heights_and_takes_the_last_friction():
    g = Hills(amplitude=0.3) + MuSplit(mu_left=0.9, mu_right=0.4) + Bump(x=0.0, y=0.0)
    xy = torch.tensor([[0.0, 1.0], [0.0, -1.0], [0.0, 0.0]], dtype=D)
    mu, h = g(xy)
    assert mu[:2].tolist() == pytest.approx([0.9, 0.4])
    assert torch.allclose(h, Hills(amplitude=0.3)(xy)[1] + Bump(x=0.0, y=0.0)(xy)[1])
    g2 = g + MuPatch(x=0.0, y=1.0, radius=0.5, mu=0.2, width=0.02)
    mu2 = g2(xy)[0]
    assert float(mu2[0]) == pytest.approx(0.2, abs=1e-6)  # inside the patch
    assert float(mu2[1]) == pytest.approx(0.4, abs=1e-6)  # outside: the split shows through
    assert float(MuPatch(x=0.0, y=0.0, radius=0.5, mu=0.3, width=0.02)(xy)[0][1]) == pytest.approx(DEFAULT_MU)


def test_hills_are_seeded():
    xy = torch.randn(10, 2, dtype=D) * 50
    assert torch.equal(Hills(seed=3)(xy)[1], Hills(seed=3)(xy)[1])
    assert not torch.equal(Hills(seed=3)(xy)[1], Hills(seed=4)(xy)[1])
    assert float(Hills(amplitude=0.5)(xy)[1].abs().max()) <= 0.5


def test_grid_is_bilinear_and_exact_at_nodes():
    rng = np.random.default_rng(0)
    H = rng.normal(size=(5, 4))
    M = 0.5 + rng.random((5, 4)) * 0.4
    g = Grid(heights=H, mu=M, origin=(1.0, -1.0), spacing=2.0)
    nodes = torch.tensor([[1.0 + 2 * i, -1.0 + 2 * j] for i in range(5) for j in range(4)], dtype=D)
    mu, h = g(nodes)
    assert np.allclose(h.numpy(), H.reshape(-1)) and np.allclose(mu.numpy(), M.reshape(-1))
    mid = torch.tensor([[2.0, 0.0]], dtype=D)  # centre of cell (0, 0)
    assert float(g(mid)[1]) == pytest.approx(H[:2, :2].mean())
    # a plane is reproduced exactly anywhere inside
    P = np.add.outer(np.arange(5) * 0.3, np.arange(4) * -0.2)
    pts = torch.tensor([[1.7, 0.3], [8.2, 4.9], [3.3, -0.5]], dtype=D)
    expect = 0.3 * (pts[:, 0] - 1.0) / 2 - 0.2 * (pts[:, 1] + 1.0) / 2
    assert torch.allclose(Grid(heights=P, origin=(1.0, -1.0), spacing=2.0)(pts)[1], expect)
    # outside: edge values hold
    assert float(g(torch.tensor([[-50.0, -50.0]], dtype=D))[1]) == pytest.approx(H[0, 0])


@pytest.mark.parametrize("make", [
    lambda: Flat(mu=0.0), lambda: Flat(mu=float("nan")), lambda: MuSplit(width=0.0),
    lambda: Bump(radius=-1.0), lambda: Hills(n_waves=0), lambda: Grid(), lambda: Grid(heights=[[1.0, 2.0]]),
    lambda: Grid(mu=[[1.0, -2.0], [1.0, 1.0]]), lambda: Grid(heights=[[1.0, np.inf], [0.0, 0.0]]),
])
def test_bad_ground_configs_raise(make):
    with pytest.raises(ValueError):
        make()
