"""Issue 45, item 3 (opt-in): the powertrain's overrun made physical. ``PowertrainParams``'
``fuel_cut`` (the combustion torque ``theta max(T_map, 0)``), ``overrun="turbine"`` (reverse flow
driven by the turbine, so the converter's drag falls as the engine nears the turbine's speed) and
``reverse_lockout`` (the direction changes only below that speed). The defaults keep every earlier
figure; tests/test_powertrain_engine.py holds the variant's two engines together (1e-9)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import dyn4_gym  # noqa: F401 (registers the ids)
from dyn4_gym._checks import ConfigError
from dyn4_gym.engine import numba_plant
from dyn4_gym.engine.numba_powertrain import drive_step_np, pack_powertrain
from dyn4_gym.ground import Flat
from dyn4_gym.model.constants import RPM
from dyn4_gym.model.state import DYN4 as S, PT
from dyn4_gym.plant import HMMWV_CHRONO, HMMWV_CHRONO_POWERTRAIN, HUMVEE, dyn4_params, dyn4_rest
from dyn4_gym.plant.drive import drive_rollout, drive_step
from dyn4_gym.plant.powertrain import HUMVEE_POWERTRAIN, PowertrainParams, powertrain_at

D = torch.float64


def _coast(spec, pt, v0, throttle, T):
    """Distance [m] after ``T`` substeps from ``v0`` [m/s] at a constant ``throttle`` (a 0-d tensor),
    straight, no brake, in the gear the powertrain holds at that speed."""
    p = dyn4_params(spec, dtype=D)
    x0 = dyn4_rest(p, Flat()).clone()
    x0[S.VX] = v0
    s0 = powertrain_at(pt, torch.tensor(v0, dtype=D))
    inputs = torch.zeros(T, 3, dtype=D)
    inputs[:, 1] = throttle
    return drive_rollout(p, pt, Flat(), inputs, x0=x0, s0=s0)[-1, S.X]


def _slope(spec, pt, v0, throttle, T):
    """d(distance)/d(throttle) by autograd, and by finite differences in float64 (central, or
    forward at 0 where the throttle's range ends)."""
    th = torch.tensor(throttle, dtype=D, requires_grad=True)
    grad, = torch.autograd.grad(_coast(spec, pt, v0, th, T), th)
    eps = 1e-6
    lo = max(throttle - eps, 0.0)
    fd = (_coast(spec, pt, v0, torch.tensor(throttle + eps, dtype=D), T)
          - _coast(spec, pt, v0, torch.tensor(lo, dtype=D), T)) / (throttle + eps - lo)
    return float(grad), float(fd)


def test_the_defaults_are_the_old_powertrain():
    for pt in (HUMVEE_POWERTRAIN, HMMWV_CHRONO_POWERTRAIN):
        assert (pt.fuel_cut, pt.overrun, pt.reverse_lockout) == (False, "mirror", float("inf"))


def test_coasting_more_throttle_goes_farther_with_the_turbine_driving():
    """The issue's case: the M998 from 8 m/s coasting 3 s, through the coast downshift. The mirrored
    law scales the converter's drag by the engine's speed, so more throttle drags more (-5.6 m per
    unit); driven by the turbine's speed, the drag falls as the engine catches up (+14.5)."""
    old, old_fd = _slope(HUMVEE, HUMVEE_POWERTRAIN, 8.0, 0.0, 300)
    new, new_fd = _slope(HUMVEE, HUMVEE_POWERTRAIN.replace(overrun="turbine"), 8.0, 0.0, 300)
    assert old == pytest.approx(old_fd, rel=1e-4) and new == pytest.approx(new_fd, rel=1e-4)
    assert old < -1.0 and new > 1.0, (old, new)


def test_the_fuel_cut_keeps_the_throttle_from_braking_past_the_governor():
    """The Chrono map's full-throttle torque is -344 N m at 2700 rpm (the governor's cut): times
    the throttle it brakes harder the more the driver presses. With the fuel cut it cannot."""
    args = (HMMWV_CHRONO, HMMWV_CHRONO_POWERTRAIN, 22.0, 0.05, 300)
    old, old_fd = _slope(*args)
    new, new_fd = _slope(HMMWV_CHRONO, HMMWV_CHRONO_POWERTRAIN.replace(fuel_cut=True), *args[2:])
    assert old == pytest.approx(old_fd, rel=1e-4) and new == pytest.approx(new_fd, rel=1e-4)
    assert old < 0.0 < new, (old, new)


def _gear_cells():
    """Issue 45's gate grid: each preset, each forward gear from the speed where its turbine turns
    at 1300 rpm (just above the downshift) and at 2450 (just below the upshift), and the top gear
    past the map's governor (2800 rpm)."""
    for name, spec, pt in (("M998", HUMVEE, HUMVEE_POWERTRAIN), ("Chrono", HMMWV_CHRONO, HMMWV_CHRONO_POWERTRAIN)):
        for gear, ratio in enumerate(pt.gear_ratios, 1):
            for rpm in (1300.0, 2450.0) + ((2800.0,) if gear == pt.n_gears else ()):
                yield pytest.param(spec, pt, gear, rpm / RPM * ratio * pt.wheel_radius, id=f"{name}-{gear}-{rpm:.0f}")


@pytest.mark.slow
@pytest.mark.parametrize("spec,pt,gear,v0", list(_gear_cells()))
def test_coasting_at_pedal_0_more_throttle_goes_farther_in_every_gear(spec, pt, gear, v0):
    """Issue 45, item 6's coasting gate, with the physical overrun (both switches): from each
    gear's band, 3 s at throttle 0, d(distance)/d(throttle) > 0 by autograd, equal to the
    one-sided difference. Without the switches the top gear past the governor gives -2.39 (M998)
    and -3.05 m per unit (Chrono): the map's negative torque times the throttle."""
    physical = pt.replace(overrun="turbine", fuel_cut=True)
    assert int(powertrain_at(physical, torch.tensor(v0, dtype=D))[PT.GEAR]) == gear
    slope, fd = _slope(spec, physical, v0, 0.0, 300)
    assert slope == pytest.approx(fd, rel=1e-3)
    assert slope > 0.0, (gear, v0, slope)


@pytest.mark.parametrize("v0,lockout,reverses", [(25.0, float("inf"), True), (25.0, 1.5, False),
                                                 (1.0, 1.5, True), (-25.0, 1.5, False)])
def test_the_direction_lockout_on_both_engines(v0, lockout, reverses):
    """Asking for the other direction at speed: without a lockout the box engages it in one
    substep (the issue's -7,900 rpm turbine at 25 m/s); with one, only below the lockout speed."""
    pt = HUMVEE_POWERTRAIN.replace(reverse_lockout=lockout)
    p = dyn4_params(HUMVEE, dtype=D)
    x = dyn4_rest(p, Flat(), (1,)).clone()
    x[:, S.VX] = v0
    s = powertrain_at(pt, torch.tensor([abs(v0)], dtype=D)).clone()
    if v0 < 0:
        s[:, PT.GEAR] = -1.0
    direction = -1.0 if v0 > 0 else 1.0
    driver = torch.tensor([[0.0, 0.0, 0.0, direction]], dtype=D)
    _, s1 = drive_step(x, s, driver, p, pt, Flat(), 0.01)
    _, s1n = drive_step_np(x.numpy(), s.numpy(), driver.numpy(), numba_plant.pack_params(p), pack_powertrain(pt),
                           numba_plant.pack_terrain(Flat(), 1), 0.01)
    changed = bool(torch.sign(s1[0, PT.GEAR]) != torch.sign(s[0, PT.GEAR]))
    assert changed == reverses
    assert s1n[0, PT.GEAR] == float(s1[0, PT.GEAR])


def test_the_books_close_with_the_physical_overrun():
    """fuel - powertrain = drive in every substep, and the converter loses energy over a run of
    coasting, braking and full-throttle spells (a substep where the speeds cross the coupling
    point can book a millijoule either way, with either law: the flow's direction is the
    substep's start's)."""
    pt = HUMVEE_POWERTRAIN.replace(fuel_cut=True, overrun="turbine", reverse_lockout=1.5)
    p = dyn4_params(HUMVEE, dtype=D)
    B = 4
    x = dyn4_rest(p, Flat(), (B,)).clone()
    x[:, S.VX] = torch.tensor([3.0, 8.0, 15.0, 25.0], dtype=D)
    s = powertrain_at(pt, x[:, S.VX])
    coast, converter = 0, torch.zeros(B, dtype=D)
    for k in range(400):
        throttle = torch.tensor([1.0, 0.0, 0.3, 0.0], dtype=D) if k < 200 else torch.zeros(B, dtype=D)
        brake = torch.tensor([0.0, 0.0, 0.0, 0.4], dtype=D) if k >= 300 else torch.zeros(B, dtype=D)
        driver = torch.stack((torch.zeros(B, dtype=D), throttle, brake), -1)
        x, s1, bk, pb = drive_step(x, s, driver, p, pt, Flat(), 0.01, books=True)
        scale = 1.0 + pb.fuel.abs() + pb.drive.abs() + pb.powertrain.abs()
        assert torch.all((pb.fuel - pb.powertrain - pb.drive).abs() / scale < 1e-9)
        converter = converter + pb.converter
        coast += int((pb.converter > 0).logical_and(pb.drive < 0).sum())
        s = s1
    assert coast > 0  # the wheels drove the engine in some substeps
    assert torch.all(converter > 0)


def test_an_env_takes_the_physical_overrun_on_both_engines():
    kw = {"powertrain": {"fuel_cut": True, "overrun": "turbine", "reverse_lockout": 1.5}}
    out = {}
    for engine in ("numba", "torch"):
        env = gym.make("Dyn4HumveeEco-v2", engine=engine, dtype="float64", **kw)
        core = env.unwrapped.core
        assert (core.pt.fuel_cut, core.pt.overrun, core.pt.reverse_lockout) == (True, "turbine", 1.5)
        obs, _ = env.reset(seed=3)
        rows = []
        for k in range(40):
            obs, rew, term, trunc, info = env.step(np.array([0.1, 1.0 if k < 20 else 0.0, 0.0], dtype=np.float32))
            rows.append(rew)
        out[engine] = np.array(rows)
    np.testing.assert_allclose(out["numba"], out["torch"], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("bad", [{"overrun": "backwards"}, {"fuel_cut": 1}, {"reverse_lockout": -1.0},
                                 {"reverse_lockout": "fast"}, {"reverse_lockout": float("nan")}])
def test_bad_overrun_settings_are_refused(bad):
    with pytest.raises(ConfigError):
        HUMVEE_POWERTRAIN.replace(**bad)
    with pytest.raises(ConfigError):
        gym.make("Dyn4HumveeEco-v2", powertrain=bad)


def test_the_powertrain_type_lists_the_switches():
    names = set(PowertrainParams.__dataclass_fields__)
    assert {"fuel_cut", "overrun", "reverse_lockout"} <= names
