"""Spec sheet -> parameters: derivations, the tire fit, overrides, citations, rescaling."""

import json
import math
import re
from importlib import resources

import pytest
import torch

from dyn4_gym.plant import HUMVEE, bike_params, dyn4_params, fit_pacejka, params_in_frame
from dyn4_gym.plant.tire import pacejka


def _json(*parts):
    text = resources.files("dyn4_gym").joinpath("data", *parts).read_text()
    return json.loads(re.sub(r"//[^\n]*", "", text))


def test_humvee_numbers_match_the_bundled_data():
    chassis = _json("hmmwv_chrono", "HMMWV_Chassis.json")
    veh = _json("hmmwv_chrono", "HMMWV_Vehicle.json")
    brake = _json("hmmwv_chrono", "HMMWV_BrakeSimple_Front.json")
    tire = _json("hmmwv_chrono", "HMMWV_TMeasyTire.json")
    tm = _json("hmmwv_lfdm", "tmeasy.json")
    lfdm = _json("hmmwv_lfdm", "vehicle_18dof.json")
    text = json.dumps(chassis)
    assert "2086.52" in text
    assert HUMVEE.inertia_yaw == pytest.approx(3570.20)
    assert math.degrees(HUMVEE.max_steer) == pytest.approx(veh["Maximum Steering Angle (deg)"], abs=0.01)
    assert HUMVEE.cg_height == lfdm["h"]
    assert HUMVEE.track_front == lfdm["cf"]
    assert HUMVEE.tire_mu == tire["Coefficient of Friction"]
    assert HUMVEE.rolling_resistance == tm["rr"] == tire["Rolling Resistance Coefficient"]
    assert HUMVEE.tire_peak_slip == pytest.approx(tm["symPn"], abs=1e-3)
    torque = json.dumps(brake)
    assert "4000" in torque
    assert HUMVEE.max_brake_accel == pytest.approx(4 * 4000 / tire["Design"]["Unloaded Radius [m]"] / HUMVEE.mass)
    # TMeasy's quadratic cornering-stiffness law at the static corner load
    fz = HUMVEE.mass * HUMVEE.gravity / 4
    a, b, pn = tm["dfy0Pn"], tm["dfy0P2n"], tm["pn"]
    dfy0 = fz / pn * (2 * a - b / 2 - (a - b / 2) * fz / pn)
    assert HUMVEE.tire_cornering_stiffness == pytest.approx(dfy0 / fz, rel=0.01)
    # load sensitivity from the peak friction at pn and 2 pn
    slope = (tm["fymP2n"] / (2 * pn) - tm["fymPn"] / pn) / pn
    mu0 = tm["fymPn"] / pn + slope * (fz - pn)
    assert HUMVEE.tire_load_sensitivity == pytest.approx(-slope * fz / mu0, abs=0.003)


def test_static_loads_balance_weight_and_moment(p64):
    p = p64
    assert float(p.Fz0.sum()) == pytest.approx(float(p.m * p.g), rel=1e-14)
    assert float((p.Fz0 * p.x_w).sum()) == pytest.approx(0.0, abs=1e-9)
    assert float((p.Fz0 * p.y_w).sum()) == pytest.approx(0.0, abs=1e-9)
    pb = bike_params(HUMVEE, dtype=torch.float64)
    assert torch.allclose(pb.Fz0, p.Fz0[[0, 2]] * 2)


def test_ride_frequency_and_damping_from_the_sheet(p64):
    p = p64
    mi = p.Fz0 / p.g
    f = torch.sqrt(p.k / mi) / (2 * math.pi)
    assert torch.allclose(f, torch.full_like(f, 1.5))
    zeta = p.damp / (2 * torch.sqrt(p.k * mi))
    assert torch.allclose(zeta, torch.full_like(zeta, 0.5))


@pytest.mark.parametrize("mu,K,ap", [(0.8, 6.07, 0.388), (1.0, 20.0, 0.1), (0.9, 8.0, 0.15), (0.5, 10.0, 0.5)])
def test_pacejka_fit_has_the_slope_and_the_peak(mu, K, ap):
    B, C, E = fit_pacejka(mu, K, ap)
    a = torch.linspace(0, 1.5, 150001, dtype=torch.float64)
    F = mu * pacejka(a, B, C, E)
    slope = (mu * pacejka(torch.tensor(1e-7, dtype=torch.float64), B, C, E) / 1e-7).item()
    assert slope == pytest.approx(K, rel=1e-6)
    assert float(a[F.argmax()]) == pytest.approx(ap, abs=2e-4)
    assert E < 1 and 1.0 < C < 2.0


def test_overrides_and_bad_specs():
    p = dyn4_params(HUMVEE, track_front=0.0, ride_freq_front=10.0, grade_force=True)
    assert float(p.tf) == 0.0 and p.grade_force is True
    with pytest.raises(TypeError, match="no_such"):
        dyn4_params(HUMVEE, no_such=1.0)
    with pytest.raises(ValueError, match="mass"):
        dyn4_params(HUMVEE, mass=-1.0)
    with pytest.raises(ValueError, match="drivetrain"):
        dyn4_params(HUMVEE, drivetrain="awd")
    with pytest.raises(ValueError, match="cg_to_front"):
        dyn4_params(HUMVEE, cg_to_front=5.0)
    with pytest.raises(ValueError, match="mass"):
        dyn4_params(HUMVEE, mass=float("nan"))
    with pytest.raises(TypeError, match="bogus"):
        dyn4_params(HUMVEE).replace(bogus=1)


def test_drive_split_by_drivetrain():
    assert dyn4_params(HUMVEE).drive_share.tolist() == [0.25] * 4
    assert dyn4_params(HUMVEE, drivetrain="fwd").drive_share.tolist() == [0.5, 0.5, 0, 0]
    assert bike_params(HUMVEE, drivetrain="rwd").drive_share.tolist() == [0, 1]
    assert dyn4_params(HUMVEE).tau_drive.item() == pytest.approx(0.1)
    assert dyn4_params(HUMVEE, direct_drive=True).tau_drive.item() == 0.0


def test_rescaled_frame_gives_the_same_motion():
    """A rollout in a scene whose unit is 0.25 m is the metre rollout divided by 0.25."""
    from dyn4_gym.plant import dyn4_rest, rollout, dyn4_step
    unit = 0.25
    p = dyn4_params(HUMVEE, dtype=torch.float64)
    ps = params_in_frame(p, unit)
    x0 = dyn4_rest(p, None, (1,))
    x0 = x0 + torch.tensor([0, 0, 0, 12.0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], dtype=torch.float64)
    lengths = torch.tensor([1, 1, 0, 1, 1, 0, 1, 0, 0, 1, 0, 0, 0, 1], dtype=torch.float64)
    scale = unit ** -lengths
    us = torch.tensor([[0.1, 1.0]], dtype=torch.float64).expand(200, 1, 2)
    xs_m = rollout(dyn4_step, x0, us, p)
    xs_s = rollout(dyn4_step, x0 * scale, us * torch.tensor([1.0, 1 / unit], dtype=torch.float64), ps)
    assert torch.allclose(xs_s, xs_m * scale, rtol=1e-9, atol=1e-9)
