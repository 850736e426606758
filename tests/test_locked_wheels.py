"""Issue 22, the car at its limits: wheels that lock slide against their patch's velocity
(tire.py, "Locked wheels"), and the speed clamp never holds the body along one axis while it
slides along another. The figures each gate is held to are written beside it."""

import math

import pytest
import torch

from dyn4_gym.ground import Flat, MuSplit
from dyn4_gym.plant import HUMVEE, dyn4_params, dyn4_rest, dyn4_step
from dyn4_gym.plant.corners import forces_at
from dyn4_gym.plant.manoeuvres import kinematic_stop
from dyn4_gym.plant.tire import slide_friction
from dyn4_gym.model.state import DYN4 as S

D = torch.float64
G = 9.81


@pytest.fixture(scope="module")
def p():
    return dyn4_params(HUMVEE, dtype=D)


def _full_brake(p, g, x, seconds, hdt=0.01):
    """Full brake, steer held at the state's own, for ``seconds``: the trace ``(T, B, 14)``."""
    u = torch.stack((x[:, S.DELTA], -p.a_brake.expand(x.shape[0])), -1)
    trace = [x]
    for _ in range(int(round(seconds / hdt))):
        x = dyn4_step(x, u, p, g, hdt)
        trace.append(x)
    return torch.stack(trace)


def test_a_car_sliding_sideways_on_locked_wheels_decelerates_at_the_full_slide_friction(p):
    """14 m/s sideways on mu 0.8, brakes full on: every wheel locked, the body decelerates at
    the tire law's full-slide friction (Pacejka at 90 deg, k = 0.90 for the Humvee) within 10 %,
    between 0.7 and 1.0 mu g, and stops within 10 % of the distance that deceleration gives."""
    mu, v0 = 0.8, 14.0
    g = Flat(mu=mu)
    x = dyn4_rest(p, g, (1,)).clone()
    x[:, S.VY] = v0
    x[:, S.A] = -p.a_brake  # the brakes already on
    f = forces_at(x, x[:, S.DELTA], x[:, S.A], p, g)
    assert float(f.lock.min()) == 1.0  # locked
    k = float(slide_friction(p.B, p.C, p.E)[0])
    decel_ref = k * mu * G
    tr = _full_brake(p, g, x, 4.0)
    speed = torch.hypot(tr[:, 0, S.VX], tr[:, 0, S.VY])
    t_half = int(0.5 / 0.01)  # the mean deceleration over the first 0.5 s
    decel = float(speed[0] - speed[t_half]) / 0.5
    print(f"sideways slide: {decel:.3f} m/s^2 vs k mu g {decel_ref:.3f} ({decel / decel_ref - 1:+.1%}), "
          f"{decel / (mu * G):.3f} mu g")
    assert abs(decel / decel_ref - 1) < 0.10
    assert 0.7 < decel / (mu * G) < 1.0
    rest = int(torch.nonzero(speed < 0.01)[0])
    dist = float(torch.hypot(tr[rest, 0, S.X] - tr[0, 0, S.X], tr[rest, 0, S.Y] - tr[0, 0, S.Y]))
    ref = v0 ** 2 / (2 * decel_ref)
    print(f"sideways slide stops in {dist:.2f} m vs {ref:.2f} m ({dist / ref - 1:+.1%})")
    assert abs(dist / ref - 1) < 0.10
    assert abs(float(tr[rest, 0, S.VX])) < 0.01  # no axis is held while the other slides


def test_under_full_braking_the_speed_never_rises(p):
    """64 states (2-25 m/s, sideslip, yaw rate, steer held) under full braking on flat ground
    for 5 s: the speed ``|v|`` never rises from one substep to the next, and every car stops."""
    gen = torch.Generator().manual_seed(22)
    n = 64
    g = Flat(mu=0.8)
    x = dyn4_rest(p, g, (n,)).clone()
    x[:, S.VX] = 2 + 23 * torch.rand(n, generator=gen, dtype=D)
    x[:, S.VY] = 3 * (2 * torch.rand(n, generator=gen, dtype=D) - 1)
    x[:, S.R] = 0.5 * (2 * torch.rand(n, generator=gen, dtype=D) - 1)
    x[:, S.DELTA] = 0.4 * (2 * torch.rand(n, generator=gen, dtype=D) - 1)
    tr = _full_brake(p, g, x, 5.0)
    speed = torch.hypot(tr[..., S.VX], tr[..., S.VY])
    rise = float((speed[1:] - speed[:-1]).max())
    print(f"largest one-substep rise of |v|: {rise:.3g} m/s")
    assert rise <= 1e-9
    assert float(speed[-1].max()) < 0.05


def test_full_braking_on_a_mu_split_yaws_to_the_grippy_side_and_stops_between_the_two(p):
    """From 20 m/s on mu 0.8 left / 0.3 right, brakes full, steer straight: the car yaws
    toward the grippy (left, +Y) side, and it stops farther than on 0.8 all over and nearer
    than on 0.3 all over (the full-brake stops there, measured the same way)."""
    def stop_distance(g):
        x = dyn4_rest(p, g, (1,)).clone()
        x[:, S.VX] = 20.0
        tr = _full_brake(p, g, x, 12.0)
        speed = torch.hypot(tr[:, 0, S.VX], tr[:, 0, S.VY])
        rest = int(torch.nonzero(speed < 0.01)[0])
        return float(torch.hypot(tr[rest, 0, S.X], tr[rest, 0, S.Y] - tr[0, 0, S.Y])), tr

    split, tr = stop_distance(MuSplit(mu_left=0.8, mu_right=0.3))
    grippy, _ = stop_distance(Flat(mu=0.8))
    slippery, _ = stop_distance(Flat(mu=0.3))
    yaw = float(tr[int(1.0 / 0.01), 0, S.PSI])
    print(f"mu split: yaw {math.degrees(yaw):.0f} deg after 1 s; stops in {split:.1f} m between "
          f"{grippy:.1f} m (0.8) and {slippery:.1f} m (0.3); kinematic {kinematic_stop(20.0, 0.8):.1f} / "
          f"{kinematic_stop(20.0, 0.3):.1f} m")
    assert yaw > 0.1
    assert grippy < split < slippery
