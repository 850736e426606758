"""The powertrain gates (issue 11): acceleration and top speed against published HMMWV figures,
shifts with hysteresis, reverse and brakes, fuel at a steady cruise, books, gradients."""

import math

import pytest
import torch

from dyn4_gym._checks import ConfigError
from dyn4_gym.ground import Flat
from dyn4_gym.plant import HUMVEE, dyn4_params, dyn4_rest
from dyn4_gym.plant.drive import drive_rollout, drive_step
from dyn4_gym.plant.powertrain import HUMVEE_POWERTRAIN as PTH, PT, PowertrainParams, interp, powertrain_rest

F64 = torch.float64
P = dyn4_params(HUMVEE, dtype=F64)
G = Flat(mu=0.8)
RPM = 30.0 / math.pi


def _full_throttle(seconds, hdt=0.02, rows=1):
    T = int(round(seconds / hdt))
    u = torch.zeros(T, rows, 3, dtype=F64)
    u[..., 1] = 1.0
    xs, ss = drive_rollout(P, PTH, G, u, hdt, powertrain=True)
    return xs[:, 0], ss[:, 0], hdt


def _time_to(v_kmh, xs, hdt):
    idx = (xs[:, 3] * 3.6 >= v_kmh).nonzero()
    return float(idx[0]) * hdt if len(idx) else math.inf


@pytest.fixture(scope="module")
def full_throttle():
    return _full_throttle(100.0)


def test_acceleration_and_top_speed_against_published_figures(full_throttle):
    """Full throttle from rest on flat ground at mu 0.8.

    Published figures (no 0-30 / 0-50 mph times for the M998 were found in the sources we could
    reach; these are the nearest):
    - top speed: M998 65 mph = 105 km/h (US Army fact sheet, fs-ortego78.tripod.com/hmmwv.htm,
      "Max speed: 65 mph"); 105-112 km/h (military-today.com/trucks/hmmwv.htm). The top gear is
      calibrated to 105 km/h (powertrain.py), so this checks that calibration holds.
    - acceleration: the civilian twin, Hummer H1 (about 3,200 kg, 190 hp), 0-60 mph in 18.1 s
      (Car and Driver road test 1995, quoted by motorbiscuit.com) and about 21 s (a quarter mile
      in 22.2 s at 61 mph, D. DeMuro, quoted by stangtv.com). An M998 at 2,573 kg and a 150 hp
      engine has a similar power to weight. For such a car 0-30 mph takes about a third of 0-60
      and 0-50 about 70 %: 0-48 km/h in ~6-7 s, 0-80 km/h in ~13-15 s.
    Our bands: 0-48 km/h in 3-9 s, 0-80 km/h in 10-22 s, top speed 100-113 km/h. Measured with
    this model: 6.2 s, 20.7 s, 104.5 km/h (0-97 km/h 37.6 s: slower than the H1, because LFDM's
    loose converter holds the engine near its 2500-2700 rpm governor, where the map's torque falls;
    before the wheels' and driveline's rotating inertia (384 kg at the wheels) was in: 5.4 s,
    18.0 s and 32 s, settled by 70 s, now by 90 s).
    """
    xs, _, hdt = full_throttle
    t48, t80 = _time_to(48.0, xs, hdt), _time_to(80.0, xs, hdt)
    v_top = float(xs[-1, 3]) * 3.6
    assert 3.0 <= t48 <= 9.0, t48
    assert 10.0 <= t80 <= 22.0, t80
    assert 100.0 <= v_top <= 113.0, v_top
    # it has settled: the last 10 s gain under 0.2 km/h
    assert v_top - float(xs[-int(10 / hdt), 3]) * 3.6 < 0.2


def test_upshifts_at_the_map_rpm_in_order(full_throttle):
    xs, ss, hdt = full_throttle
    gear = ss[:, PT.GEAR]
    changes = (gear[1:] != gear[:-1]).nonzero().flatten()
    assert [int(gear[i + 1]) for i in changes] == [2, 3]  # up, up, never down
    for i in changes:
        # the turbine speed the shift was decided on (the state before the shifting substep)
        ratio = PTH.gear_ratios[int(gear[i]) - 1]
        rpm_t = float(xs[i, 3]) / (ratio * PTH.wheel_radius) * RPM
        assert rpm_t > PTH.upshift_rpm
        assert rpm_t < PTH.upshift_rpm + 60.0  # at the map's speed, not long after
        assert rpm_t * PTH.gear_ratios[int(gear[i]) - 1] / PTH.gear_ratios[int(gear[i])] > PTH.downshift_rpm  # hysteresis
    rpm_e = ss[:, PT.OMEGA_E] * RPM
    assert float(rpm_e.max()) < 2700.0 and float(rpm_e[int(1 / hdt):].min()) > 1200.0


def _cruise(v_kmh, seconds, hdt=0.02, books=False):
    """A PI cruise control on the throttle (brake off); returns per-step speed, gear, and sums."""
    x = dyn4_rest(P, G, batch_shape=(1,))
    s = powertrain_rest(PTH, (1,))
    integ, out = 0.0, []
    for _ in range(int(round(seconds / hdt))):
        err = v_kmh / 3.6 - float(x[0, 3])
        integ += err * hdt
        th = min(max(0.3 * err + 0.05 * integ, 0.0), 1.0)
        u = torch.tensor([[0.0, th, 0.0]], dtype=F64)
        if books:
            x1, s1, bk, pb = drive_step(x, s, u, P, PTH, G, hdt, books=True)
            row = {**bk.as_dict(), **pb.as_dict(), "dX": x1[:, 0] - x[:, 0]}
            out.append((float(x1[0, 3]), int(s1[0, 1]), row))
        else:
            x1, s1 = drive_step(x, s, u, P, PTH, G, hdt)
            out.append((float(x1[0, 3]), int(s1[0, 1]), None))
        x, s = x1, s1
    return out, x, s


def test_downshifts_on_a_coast_and_no_hunting_on_a_cruise():
    out, _, _ = _cruise(60.0, 60.0)
    gears = [g for _, g, _ in out]
    settled = gears[int(20 / 0.02):]
    assert set(settled) == {3}  # top gear, no shift in the last 40 s
    assert abs(out[-1][0] * 3.6 - 60.0) < 0.5
    # from top speed, brake gently: the box shifts down at the map's downshift speed, once per gear
    xs, ss, hdt = _full_throttle(60.0)
    x, s = xs[-1:].clone(), ss[-1:].clone()
    seen = []
    for _ in range(int(40 / hdt)):
        u = torch.tensor([[0.0, 0.0, 0.15]], dtype=F64)
        g0 = int(s[0, PT.GEAR])
        rpm_t = float(x[0, 3]) / (PTH.gear_ratios[g0 - 1] * PTH.wheel_radius) * RPM
        x, s = drive_step(x, s, u, P, PTH, G, hdt)
        if int(s[0, PT.GEAR]) != g0:
            seen.append((g0, int(s[0, PT.GEAR]), rpm_t))
    assert [(a, b) for a, b, _ in seen] == [(3, 2), (2, 1)]
    assert all(PTH.downshift_rpm - 60.0 < r < PTH.downshift_rpm for _, _, r in seen)
    assert float(x[0, 3]) == 0.0  # stopped and held


def test_reverse_backs_up_and_brakes_stop_it_without_a_sign_flip():
    hdt = 0.02
    T = int(8 / hdt)
    u = torch.zeros(T, 1, 4, dtype=F64)
    u[..., 1] = 0.5
    u[..., 3] = -1.0
    xs, ss = drive_rollout(P, PTH, G, u, hdt, powertrain=True)
    assert int(ss[-1, 0, PT.GEAR]) == -1
    assert float(xs[-1, 0, 3]) < -3.0 and float(xs[-1, 0, 0]) < -5.0  # backing up along -X
    assert float(xs[:, 0, 3].max()) <= 0.0
    # brake hard (throttle off) in reverse: stops, stays stopped, never moves forward
    u2 = torch.zeros(int(4 / hdt), 1, 4, dtype=F64)
    u2[..., 2] = 1.0
    u2[..., 3] = -1.0
    xs2 = drive_rollout(P, PTH, G, u2, hdt, x0=xs[-1], s0=ss[-1])
    v = xs2[:, 0, 3]
    # the locked wheels slide to rest (tire.py, "Locked wheels"): smoothly, so at rest to rounding
    assert float(v.max()) <= 0.0 and abs(float(v[-1])) < 1e-9
    # and forward: from 20 m/s, brake with the throttle still half open
    x0 = dyn4_rest(P, G, batch_shape=(1,))
    x0[:, 3] = 20.0
    s0 = powertrain_rest(PTH, (1,))
    s0[:, PT.GEAR] = 3.0
    s0[:, PT.OMEGA_E] = 2000.0 / RPM
    u3 = torch.zeros(int(6 / hdt), 1, 3, dtype=F64)
    u3[..., 1] = 0.5
    u3[..., 2] = 1.0
    v3 = drive_rollout(P, PTH, G, u3, hdt, x0=x0, s0=s0)[:, 0, 3]
    assert float(v3.min()) >= 0.0 and float(v3[-1]) < 1e-9  # locked: sliding to rest, never past it
    stop = int((v3 < 1e-6).nonzero()[0])
    # a full stop from 20 m/s within 25 % of v^2 / (2 mu g) (the half-open throttle pushes)
    dist = float(((v3[:stop] + v3[1:stop + 1]) / 2).sum()) * hdt
    assert dist < 1.25 * 20.0**2 / (2 * 0.8 * 9.81)


def test_fuel_on_a_steady_cruise_matches_a_hand_calculation():
    """60 km/h on flat ground, top gear. Hand calculation of the steady state: the road load is
    drag plus rolling resistance, ``F = c_drag v^2 + f_roll``; the wheels need ``F v``, the turbine
    ``F r ratio / eta_d`` at ``v / (ratio r)``; the converter's operating point is the engine speed
    whose pump torque times TR gives that (bisection on the maps); the engine then burns
    ``(P_shaft + P_friction) / eta_i`` (Willans line, friction from the losses map)."""
    hdt = 0.02
    out, x, s = _cruise(60.0, 70.0, hdt, books=True)
    rows = [r for _, _, r in out[int(50 / hdt):]]
    fuel = sum(float(r["fuel"]) for r in rows)
    dist = sum(float(r["dX"]) for r in rows)
    v = 60.0 / 3.6
    F = float(P.c_drag) * v * v + float(P.f_roll)
    ratio, r = PTH.gear_ratios[-1], PTH.wheel_radius
    w_t = v / (ratio * r)
    t_turbine = F * r * ratio / PTH.driveline_efficiency

    def maps(pts, xq):
        return float(interp(torch.tensor(xq, dtype=F64), pts))

    def turbine_torque(w_e):
        sr = w_t / w_e
        fade = min((1 - sr) / (1 - PTH.coupling_sr), 1.0)
        return maps(PTH.torque_ratio_map, sr) * (w_e / maps(PTH.capacity_map, sr)) ** 2 * fade

    lo, hi = w_t * 1.0001, w_t * 3.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if turbine_torque(mid) < t_turbine else (lo, mid)
    w_e = 0.5 * (lo + hi)
    sr = w_t / w_e
    t_pump = t_turbine / maps(PTH.torque_ratio_map, sr)
    friction = -maps(PTH.losses_map, w_e * RPM)
    fuel_per_m = (t_pump + friction) * w_e / PTH.indicated_efficiency / v
    assert 0.75 < sr < 0.97  # LFDM's converter slips at a light cruise (no lock-up clutch)
    measured = fuel / dist
    assert abs(measured / fuel_per_m - 1.0) < 0.10, (measured, fuel_per_m)
    litres_100km = measured * 1e5 / (PTH.fuel_lhv * PTH.fuel_density)
    assert 8.0 < litres_100km < 20.0  # the M998's 25 gal for 350 mi on the highway is 16.8 L/100 km


def _books_close(rows, rel=1e-9):
    """Sums per row over the steps; checks the powertrain's identities and the signs of its losses."""
    tot = {k: torch.stack([torch.as_tensor(r[k]) for r in rows]).sum(0) for k in rows[0]}
    flow = sum(r["supplied"].abs() + r["dissipated"].abs() + r["fuel"].abs() for r in rows)
    assert ((tot["fuel"] - tot["powertrain"] - tot["drive"]).abs() <= rel * flow).all()
    assert ((tot["supplied"] - (tot["drive"] - tot["brakes"] - tot["wheelspin"] - tot["sliding"])).abs()
            <= rel * flow).all()
    for line in ("engine", "converter", "driveline", "brakes", "sliding"):
        assert (tot[line] >= -1e-9 * flow).all(), line
    return tot, flow


@pytest.mark.parametrize("ground", ["flat", "hills"])
def test_books_close_on_a_weave(ground):
    from dyn4_gym.ground import Hills

    g = G if ground == "flat" else Hills(amplitude=0.6, wavelength=15.0)
    p = dyn4_params(HUMVEE, dtype=F64, grade_force=True)
    hdt = 0.01
    x = dyn4_rest(p, g, batch_shape=(2,))
    s = powertrain_rest(PTH, (2,))
    rows = []
    for k in range(600):
        t = k * hdt
        steer = 0.4 * math.sin(2 * math.pi * 0.4 * t)
        u = torch.tensor([[steer, 0.8 if t < 4 else 0.0, 0.0 if t < 4 else 0.3],
                          [-steer, 1.0, 0.0]], dtype=F64)
        x, s, bk, pb = drive_step(x, s, u, p, PTH, g, hdt, books=True)
        rows.append({**bk.as_dict(), **pb.as_dict()})
    tot, flow = _books_close(rows)
    assert (tot["brakes"][0] > 0) and (tot["fuel"] > 0).all()
    # and the plant's own books still close with the powertrain in front
    assert (tot["residual"].abs() < 2e-3 * flow).all()


def test_gradients_through_throttle_brake_and_steer_in_one_gear():
    hdt = 0.01
    x0 = dyn4_rest(P, G, batch_shape=(2,))
    x0[:, 3] = torch.tensor([8.0, 12.0], dtype=F64)
    s0 = powertrain_rest(PTH, (2,))
    s0[:, PT.OMEGA_E] = torch.tensor([1850.0, 2130.0], dtype=F64) / RPM  # between map points (kinks)
    s0[:, PT.GEAR] = 2.0
    s0[:, PT.T_SHIFT] = 0.0  # no shift within the window

    def f(driver, w0):
        x, s = x0, torch.stack((w0, s0[:, 1], s0[:, 2]), -1)
        for k in range(6):
            x, s = drive_step(x, s, driver[k], P, PTH, G, hdt)
        return torch.cat((x[:, :6], s[:, :1]), -1)

    driver = torch.tensor([[0.3, 0.6, 0.05], [-0.2, 0.3, 0.4]], dtype=F64).expand(6, 2, 3).clone().requires_grad_(True)
    w0 = s0[:, 0].clone().requires_grad_(True)
    assert torch.autograd.gradcheck(f, (driver, w0), eps=1e-6, atol=1e-5, rtol=1e-4)


def test_bad_powertrain_parameters_are_config_errors():
    with pytest.raises(ConfigError, match="gear_ratios"):
        PTH.replace(gear_ratios=(0.2, 0.1))
    with pytest.raises(ConfigError, match="reverse_ratio"):
        PTH.replace(reverse_ratio=0.1)
    with pytest.raises(ConfigError, match="downshift_rpm"):
        PTH.replace(downshift_rpm=3000.0)
    with pytest.raises(ConfigError, match="torque_map"):
        PTH.replace(torque_map=((1000.0, 1.0), (900.0, 2.0)))
    with pytest.raises(ConfigError, match="driveline_efficiency"):
        PTH.replace(driveline_efficiency=1.5)
    assert isinstance(PTH, PowertrainParams)
    with pytest.raises(ValueError, match="driver inputs"):
        drive_step(dyn4_rest(P, G, (1,)), powertrain_rest(PTH, (1,)), torch.zeros(1, 2, dtype=F64), P, PTH, G)
