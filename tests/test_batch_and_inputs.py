"""Batching, dtypes, per-environment parameters, rollouts and bad input."""

import pytest
import torch

from dyn4_gym.ground import Flat, MuSplit, Bump
from dyn4_gym.plant import HUMVEE, bike_params, bike_step, dyn4_params, dyn4_rest, dyn4_step, rollout
from dyn4_gym.model.state import DYN4, N_DYN4

D = torch.float64
G = MuSplit() + Bump(x=3.0, y=1.0, height0=0.05)


def _states(n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.zeros(n, N_DYN4, dtype=D)
    x[:, :2] = torch.rand(n, 2, generator=gen, dtype=D) * 6 - 1
    x[:, 2] = torch.rand(n, generator=gen, dtype=D) * 6 - 3
    x[:, 3] = torch.rand(n, generator=gen, dtype=D) * 25
    x[:, 4:6] = torch.randn(n, 2, generator=gen, dtype=D) * 0.5
    x[:, 6:12] = torch.randn(n, 6, generator=gen, dtype=D) * 0.02
    x[:, 12] = torch.randn(n, generator=gen, dtype=D) * 0.2
    x[:, 13] = torch.randn(n, generator=gen, dtype=D) * 3
    u = torch.stack((torch.randn(n, generator=gen, dtype=D) * 0.3, torch.randn(n, generator=gen, dtype=D) * 5), -1)
    return x, u


def test_batched_step_equals_per_row_steps(p64, pb64):
    x, u = _states(32)
    batched = dyn4_step(x, u, p64, G)
    rows = torch.stack([dyn4_step(x[i], u[i], p64, G) for i in range(32)])
    assert torch.allclose(batched, rows, rtol=1e-12, atol=1e-12)
    xb = x[:, [0, 1, 2, 3, 4, 5, 12, 13]]
    assert torch.allclose(bike_step(xb, u, pb64, G), torch.stack([bike_step(xb[i], u[i], pb64, G) for i in range(32)]),
                          rtol=1e-12, atol=1e-12)
    # arbitrary leading shape
    assert dyn4_step(x.reshape(4, 8, N_DYN4), u.reshape(4, 8, 2), p64, G).shape == (4, 8, N_DYN4)
    assert torch.allclose(dyn4_step(x.reshape(4, 8, N_DYN4), u.reshape(4, 8, 2), p64, G).reshape(32, N_DYN4), batched)


def test_per_environment_parameters_broadcast(p64):
    x, u = _states(3)
    masses = torch.tensor([2000.0, 2573.0, 3200.0], dtype=D)
    pb = p64.replace(m=masses, B=p64.B.expand(3, 4) * torch.tensor([[0.9], [1.0], [1.1]], dtype=D))
    out = dyn4_step(x, u, pb, G)
    for i in range(3):
        pi = p64.replace(m=masses[i], B=pb.B[i])
        assert torch.allclose(out[i], dyn4_step(x[i], u[i], pi, G), rtol=1e-12, atol=1e-12)


def test_float32_agrees_with_float64():
    p32 = dyn4_params(HUMVEE, dtype=torch.float32)
    p64 = dyn4_params(HUMVEE, dtype=D)
    x, u = _states(64)
    y64 = dyn4_step(x, u, p64, G)
    y32 = dyn4_step(x.float(), u.float(), p32, G).double()
    scale = y64.abs().amax(0).clamp_min(1.0)
    assert float(((y32 - y64).abs() / scale).max()) < 2e-5
    b32 = bike_step(x[:, [0, 1, 2, 3, 4, 5, 12, 13]].float(), u.float(), bike_params(HUMVEE), G).double()
    b64 = bike_step(x[:, [0, 1, 2, 3, 4, 5, 12, 13]], u, bike_params(HUMVEE, dtype=D), G)
    assert float(((b32 - b64).abs() / b64.abs().amax(0).clamp_min(1.0)).max()) < 2e-5


def test_rollout_matches_repeated_steps_and_is_differentiable(p64):
    x0 = dyn4_rest(p64, Flat(), (2,)) + torch.eye(N_DYN4, dtype=D)[DYN4.VX] * 10
    us = torch.zeros(50, 2, 2, dtype=D, requires_grad=True)
    xs = rollout(dyn4_step, x0, us + torch.tensor([0.1, 1.0], dtype=D), p64)
    assert xs.shape == (51, 2, N_DYN4)
    x = x0
    for _ in range(50):
        x = dyn4_step(x, torch.tensor([[0.1, 1.0]] * 2, dtype=D), p64)
    assert torch.allclose(xs[-1], x)
    (g,) = torch.autograd.grad(xs[-1, :, 1].sum(), us)
    assert bool(torch.isfinite(g).all()) and float(g[:, :, 0].abs().sum()) > 0


def test_inputs_are_clamped_to_the_actuators(p64):
    x = dyn4_rest(p64, Flat(), ()) + torch.eye(N_DYN4, dtype=D)[DYN4.VX] * 10
    p = p64.replace(tau_steer=torch.tensor(0.0, dtype=D), tau_drive=torch.tensor(0.0, dtype=D))
    y = dyn4_step(x, torch.tensor([5.0, -100.0], dtype=D), p)
    assert float(y[12]) == pytest.approx(float(p.delta_max))
    assert float(y[13]) == pytest.approx(-float(p.a_brake))


@pytest.mark.parametrize("bad", [torch.zeros(13), torch.zeros(3, 8), [0.0] * N_DYN4])
def test_wrong_state_shape_is_a_clear_error(p64, bad):
    with pytest.raises(ValueError, match="state must be a tensor of shape"):
        dyn4_step(bad, torch.zeros(2, dtype=D), p64)


def test_wrong_input_shape_and_bad_substep_are_clear_errors(p64, pb64):
    x = dyn4_rest(p64, Flat(), ())
    with pytest.raises(ValueError, match="input must be"):
        dyn4_step(x, torch.zeros(3, dtype=D), p64)
    with pytest.raises(ValueError, match="hdt"):
        dyn4_step(x, torch.zeros(2, dtype=D), p64, hdt=0.0)
    with pytest.raises(ValueError, match=r"\(\.\.\., 8\)"):
        bike_step(x, torch.zeros(2, dtype=D), pb64)
    with pytest.raises(ValueError, match="world points"):
        Flat()(torch.zeros(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_extreme_states_stay_finite(dtype):
    """A car rolled far over (two wheels in the air), airborne, or spun at speed: finite step and gradient."""
    p = dyn4_params(HUMVEE, dtype=dtype)
    x = torch.zeros(4, N_DYN4, dtype=dtype)
    x[:, 3] = torch.tensor([15.0, 10.0, 2.0, 0.0])
    x[0, 7] = 0.6  # rolled: the left wheels far off the ground
    x[1, 6] = 0.5  # airborne: every spring in tension
    x[2, 4], x[2, 5] = 12.0, 3.0  # sliding sideways, spinning
    x[3, 8] = -0.4
    x.requires_grad_()
    u = torch.tensor([[0.5, -13.0], [0.0, 3.0], [-0.5, 1.0], [0.2, -5.0]], dtype=dtype)
    y = dyn4_step(x, u, p, G)
    assert bool(torch.isfinite(y).all())
    (gx,) = torch.autograd.grad(y.sum(), x)
    assert bool(torch.isfinite(gx).all())
