"""The first seed's gates at rest and in steady manoeuvres: rest, load transfer, single track."""

import math

import pytest
import torch

from dyn4_gym.ground import Bump, Flat, Hills, Ramp
from dyn4_gym.plant import DYN4, HUMVEE, bike_params, bike_step, dyn4_params, dyn4_rest, dyn4_step
from dyn4_gym.plant.manoeuvres import _start, wheel_loads

D = torch.float64


def test_rests_on_flat_ground_with_the_static_split_and_no_drift(p64):
    g = Flat()
    x0 = dyn4_rest(p64, g, (1,))
    x = x0
    u = torch.zeros(1, 2, dtype=D)
    for _ in range(1000):  # 10 s
        x = dyn4_step(x, u, p64, g)
    Fz = wheel_loads(x, p64, g)[0]
    assert torch.allclose(Fz, p64.Fz0, rtol=1e-3)
    assert float((x - x0).abs().max()) < 1e-9
    # the split itself: front/rear by the CG position
    front = float(Fz[:2].sum() / (p64.m * p64.g))
    assert front == pytest.approx(HUMVEE.cg_to_rear / HUMVEE.wheelbase, rel=1e-3)


def test_settles_from_a_drop_to_the_static_split(p64):
    g = Flat()
    x = dyn4_rest(p64, g, (1,)).clone()
    x[0, DYN4.Z] = 0.05
    x[0, DYN4.PHI] = 0.02
    x[0, DYN4.THETAD] = 0.1
    u = torch.zeros(1, 2, dtype=D)
    for _ in range(1000):
        x = dyn4_step(x, u, p64, g)
    assert torch.allclose(wheel_loads(x, p64, g)[0], p64.Fz0, rtol=1e-3)
    assert float(x[0, :2].abs().max()) < 1e-9  # it never crept


@pytest.mark.parametrize("ground", [Bump(x=1.5, y=0.9, height0=0.08, radius=0.6), Hills(), Ramp(slope=0.05)])
def test_rest_state_is_stationary_on_uneven_ground(p64, ground):
    x0 = dyn4_rest(p64, ground, (1,), X=0.2, Y=0.1, psi=0.3)
    x1 = dyn4_step(x0, torch.zeros(1, 2, dtype=D), p64, ground)
    assert float((x1[..., 6:12] - x0[..., 6:12]).abs().max()) < 1e-9
    # the loads still carry the weight with no moment
    Fz = wheel_loads(x0, p64, ground)[0]
    assert float(Fz.sum()) == pytest.approx(float(p64.m * p64.g), rel=1e-9)


def test_single_track_limit_matches_bike_step():
    """Zero track and stiff suspension: within 0.15 m of the bicycle over about 90 m."""
    p4 = dyn4_params(HUMVEE, dtype=D, track_front=0.0, track_rear=0.0, ride_freq_front=20.0,
                     ride_freq_rear=20.0, damping_ratio_front=1.0, damping_ratio_rear=1.0)
    pb = bike_params(HUMVEE, dtype=D)
    x4 = _start(p4, Flat(), 10.0)
    xb = torch.zeros(1, 8, dtype=D)
    xb[0, 3] = 10.0
    worst, travelled = 0.0, 0.0
    for k in range(900):
        t = k * 0.01
        a = 1.5 if t < 4 else (-3.0 if t < 6 else 0.5)
        u = torch.tensor([[0.12 * math.sin(2 * math.pi * 0.25 * t), a]], dtype=D)
        x4n, xbn = dyn4_step(x4, u, p4), bike_step(xb, u, pb)
        travelled += float(torch.hypot(*(x4n[0, :2] - x4[0, :2])))
        x4, xb = x4n, xbn
        worst = max(worst, float(torch.hypot(x4[0, 0] - xb[0, 0], x4[0, 1] - xb[0, 1])))
    assert travelled > 85.0
    assert abs(float(x4[0, 2])) + abs(float(x4[0, 1])) > 1.0  # it really turned
    assert worst < 0.15, worst


def _no_drag(**kw):
    return dyn4_params(HUMVEE, dtype=D, drag_area=0.0, rolling_resistance=0.0, **kw)


def test_steady_turn_load_transfer_is_m_a_h_over_track():
    p = _no_drag()
    g = Flat()
    v = 12.0
    x = _start(p, g, v)
    for _ in range(1500):
        a_cmd = 1.5 * (v - x[:, DYN4.VX])
        u = torch.stack((torch.full_like(a_cmd, 0.08), a_cmd), -1)
        x1 = dyn4_step(x, u, p, g)
        ay = float((x1[0, DYN4.VY] - x[0, DYN4.VY]) / 0.01 + x1[0, DYN4.R] * x1[0, DYN4.VX])
        x = x1
    assert ay > 3.0
    Fz = wheel_loads(x, p, g)[0]
    transfer = float((Fz[1] + Fz[3] - Fz[0] - Fz[2]) / 2)  # right (outer) minus left, halved
    expected = float(p.m) * ay * float(p.h) / HUMVEE.track_front
    assert transfer == pytest.approx(expected, rel=0.01)


def test_steady_braking_load_transfer_is_m_a_h_over_L():
    p = _no_drag()
    g = Flat()
    x = _start(p, g, 20.0)
    u = torch.tensor([[0.0, -4.0]], dtype=D)
    for _ in range(200):
        x1 = dyn4_step(x, u, p, g)
        decel = float((x[0, DYN4.VX] - x1[0, DYN4.VX]) / 0.01)
        x = x1
    assert decel == pytest.approx(4.0, rel=0.01)
    Fz = wheel_loads(x, p, g)[0]
    transfer = float(Fz[:2].sum() - p.Fz0[:2].sum())
    expected = float(p.m) * decel * float(p.h) / HUMVEE.wheelbase
    assert transfer == pytest.approx(expected, rel=0.01)
