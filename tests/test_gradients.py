"""Gradients of both plants against central differences, in float64.

The cases the issue names: driving, tires past their peak, creeping at a few cm/s with zero
lateral velocity (the secant's 0/0), near wheel lift-off, the grid ground jittered off its
nodes; and at exact rest the gradient is finite.
"""

import pytest
import torch
from torch.autograd import gradcheck

from dyn4_gym.ground import Bump, Flat, Grid, Hills, MuSplit
from dyn4_gym.plant import HUMVEE, bike_step, dyn4_params, dyn4_rest, dyn4_step
from dyn4_gym.plant import dyn4_state as state
from dyn4_gym.plant.manoeuvres import wheel_loads
from dyn4_gym.plant.tire import lateral_secant
from dyn4_gym.model.state import DYN4, N_DYN4


D = torch.float64
torch.manual_seed(1234)
_GRID_H = torch.randn(12, 12, dtype=D) * 0.05
_GRID_MU = 0.6 + 0.3 * torch.rand(12, 12, dtype=D)
GRID = Grid(heights=_GRID_H, mu=_GRID_MU, origin=(-2.0, -2.0), spacing=1.0)

CASES = {
    "driving": (state(x=1.0, y=2.0, psi=0.3, vx=12.0, vy=0.3, r=0.2, z=0.01, phi=0.02, theta=-0.01,
                      zd=0.1, phid=-0.2, thetad=0.05, delta=0.1, a=0.5), (0.12, 1.0)),
    "past_peak": (state(x=1.0, y=2.0, psi=0.3, vx=8.0, vy=-4.0, r=0.9, delta=0.3, a=-1.0), (0.3, -2.0)),
    "creeping": (state(vx=0.04), (0.0, 0.3)),
    "creeping_steered": (state(vx=0.03, delta=0.2), (0.2, 0.3)),
    "near_liftoff": (state(vx=10.0, vy=0.5, r=0.3, phi=0.118, delta=0.2, a=0.3), (0.2, 0.5)),
    "braking": (state(vx=6.0, vy=0.2, r=0.1, theta=0.02, a=-6.0), (0.05, -9.0)),
}
GROUNDS = {"flat": Flat(), "split_bump": MuSplit() + Bump(x=2.0, y=2.9, height0=0.1, radius=0.8)}


def _check(fn, *args):
    args = tuple(a.clone().requires_grad_() for a in args)
    assert gradcheck(fn, args, eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("gname", list(GROUNDS))
def test_dyn4_step_gradcheck(p64, case, gname):
    x, u = CASES[case]
    g = GROUNDS[gname]
    if case == "near_liftoff":  # the left wheels are within a few floors of lifting
        Fz = wheel_loads(x[None], p64, g)[0]
        assert float(Fz.min()) < 0.05 * float(p64.Fz0.min())
    if case == "past_peak":
        assert abs(float(torch.atan2(x[4] - x[5] * p64.lr, x[3]))) > HUMVEE.tire_peak_slip
    _check(lambda x_, u_: dyn4_step(x_, u_, p64, g), x, torch.tensor(u, dtype=D))


@pytest.mark.parametrize("case", list(CASES))
def test_bike_step_gradcheck(pb64, case):
    x, u = CASES[case]
    xb = x[[0, 1, 2, 3, 4, 5, 12, 13]]
    _check(lambda x_, u_: bike_step(x_, u_, pb64, MuSplit()), xb, torch.tensor(u, dtype=D))


def test_gradcheck_on_the_grid_ground_off_its_nodes(p64):
    torch.manual_seed(0)
    for _ in range(3):
        x = state(x=float(torch.rand(())) * 3 + 1.3, y=float(torch.rand(())) * 3 + 0.37, psi=0.4, vx=9.0,
                  vy=0.3, r=0.25, delta=0.1, a=0.2)
        _check(lambda x_: dyn4_step(x_, torch.tensor([0.1, 0.5], dtype=D), p64, GRID), x)


def test_gradient_flows_into_the_ground_maps(p64):
    h = _GRID_H.clone().requires_grad_()
    x = state(x=2.3, y=1.6, psi=0.2, vx=9.0, vy=0.1, r=0.1, delta=0.05)
    gradcheck(lambda h_: dyn4_step(x, torch.tensor([0.05, 0.2], dtype=D), p64, Grid(heights=h_, origin=(-2.0, -2.0)))[6:12],
              (h,), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_gradient_flows_into_parameters():
    base = dyn4_params(HUMVEE, dtype=D)
    x = CASES["driving"][0]
    u = torch.tensor([0.1, 0.5], dtype=D)

    def f(m, iz, b, k):
        p = base.replace(m=m, Iz=iz, B=b, k=k)
        return dyn4_step(x, u, p, Flat())

    args = (base.m, base.Iz, base.B, base.k)
    assert gradcheck(f, tuple(a.clone().requires_grad_() for a in args), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_gradients_at_exact_rest_are_finite_and_one_sided_correct(p64):
    x0 = dyn4_rest(p64, Flat(), ())
    u0 = torch.zeros(2, dtype=D)
    jx, ju = torch.autograd.functional.jacobian(lambda x_, u_: dyn4_step(x_, u_, p64), (x0, u0))
    assert bool(torch.isfinite(jx).all()) and bool(torch.isfinite(ju).all())
    # one-sided difference in vx from just above the clamp matches the autograd column
    h = 1e-7
    col = (dyn4_step(x0 + h * torch.eye(N_DYN4, dtype=D)[DYN4.VX], u0, p64) - dyn4_step(x0, u0, p64)) / h
    assert torch.allclose(jx[:, 3], col, atol=1e-5, rtol=1e-4)


def test_secant_gradient_is_finite_at_exact_zero():
    w = torch.zeros(4, dtype=D, requires_grad=True)
    u = torch.zeros(4, dtype=D, requires_grad=True)
    S = lateral_secant(w, u, 6000.0, 5.0, 1.4, 0.0, 0.5)
    gw, gu = torch.autograd.grad(S.sum(), (w, u))
    assert bool(torch.isfinite(gw).all() and torch.isfinite(gu).all())


def test_hills_gradient_in_query_points():
    xy = torch.tensor([[3.0, -2.0], [10.0, 5.0]], dtype=D, requires_grad=True)
    gradcheck(lambda q: Hills()(q)[1], (xy,))


@pytest.mark.parametrize("pedal", [1, 2], ids=["throttle", "brake"])
def test_a_pedal_at_rest_has_the_interior_derivative(p64, pedal):
    """Pedals rest at exactly 0 most of the time, where the driver inputs' clamp has a kink (issue
    22): the gradient there is the interior one, the pedal pressed, not 0 and not the two sides'
    mean. Over 200 driven substeps from 8 m/s, autograd at pedal = 0 matches the forward
    difference (the interior side) to 1e-3; central differences, straddling the kink, read half."""
    from dyn4_gym.plant.drive import drive_step
    from dyn4_gym.plant.powertrain import HUMVEE_POWERTRAIN, powertrain_at

    g = Flat(mu=0.8)

    def outcome(u):
        x = dyn4_rest(p64, g, (1,)).clone()
        x[:, 3] = 8.0
        s = powertrain_at(HUMVEE_POWERTRAIN, x[:, 3])
        for _ in range(200):
            x, s = drive_step(x, s, u.unsqueeze(0), p64, HUMVEE_POWERTRAIN, g, 0.01)
        return x[0, 0] + x[0, 3]  # distance and speed at 2 s

    u = torch.tensor([0.05, 0.3 if pedal == 2 else 0.0, 0.0, 1.0], dtype=D)
    uu = u.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(outcome(uu), uu)
    h = 1e-6
    e = torch.zeros(4, dtype=D)
    e[pedal] = h
    with torch.no_grad():
        forward = float((outcome(u + e) - outcome(u)) / h)
        central = float((outcome(u + e) - outcome(u - e)) / (2 * h))
    assert float(grad[pedal]) == pytest.approx(forward, rel=1e-3)
    assert central == pytest.approx(forward / 2, rel=1e-2)  # the kink is there: one side is flat
