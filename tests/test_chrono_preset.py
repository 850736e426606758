"""Issue 22: the Chrono HMMWV preset (``HMMWV_CHRONO``, ``HMMWV_CHRONO_POWERTRAIN``) against the
two public Chrono runs LFDM validates its 18-DOF model against (benchmarks/chrono_runs.py, data in
dyn4_gym/data/chrono_runs/). Every number of the preset comes from the bundled model data, checked
here; no number is fitted to the runs. The gate: position RMS below LFDM's 18-DOF model
(2.38 m on the acceleration run, 3.61 m on the steering run)."""

import json
from importlib.resources import files

import pytest

from dyn4_gym.plant import HMMWV_CHRONO, HMMWV_CHRONO_POWERTRAIN, HUMVEE, HUMVEE_POWERTRAIN


def _lfdm():
    text = files("dyn4_gym").joinpath("data/hmmwv_lfdm/vehicle_18dof.json").read_text()
    return json.loads("\n".join(line.split("//")[0] for line in text.splitlines()))


def test_the_chrono_preset_comes_from_the_bundled_model_data():
    d = _lfdm()
    pt = HMMWV_CHRONO_POWERTRAIN
    assert pt.gear_ratios == tuple(d["gearRatios"])  # Chrono's 0.2 / 0.4 / 0.8 x 0.2 axles
    assert pt.torque_map == tuple(map(tuple, d["torqueMap"])) and pt.losses_map == tuple(map(tuple, d["lossesMap"]))
    assert (pt.upshift_rpm, pt.downshift_rpm) == (d["upshiftRPM"], d["downshiftRPM"])
    assert pt.crank_inertia == d["crankInertia"] and pt.brake_torque == d["maxBrakeTorque"]
    assert pt.idle_rpm == 0.0 and pt.driveline_efficiency == 1.0 and pt.shift_delay == 0.0
    assert HMMWV_CHRONO.max_steer == d["maxSteer"] and not d["nonLinearSteer"]
    assert HMMWV_CHRONO.steer_lag == 0.0
    # everything else is the M998 preset's, itself cited from Chrono's files (tests/test_params.py)
    assert HMMWV_CHRONO.replace(max_steer=HUMVEE.max_steer, steer_lag=HUMVEE.steer_lag, name=HUMVEE.name) == HUMVEE
    assert HUMVEE_POWERTRAIN.idle_rpm > 0  # the M998 preset keeps its governor and its top speed


@pytest.mark.slow
def test_the_chrono_preset_follows_chronos_steering_run_closer_than_lfdm(load_script):
    cr = load_script("benchmarks/chrono_runs.py")
    rms, _, _ = cr.rms("steer", "chrono")
    print(f"steering run: position RMS {rms:.2f} m (LFDM 18-DOF 3.61 m)")
    assert rms < cr.LFDM_RMS["steer"]  # measured 2.95 m


@pytest.mark.slow
def test_the_chrono_preset_follows_chronos_acceleration_run_closer_than_lfdm(load_script):
    """Before the rotating parts were in, the car out-accelerated Chrono's (97.9 m against 92.0 m
    after 10 s, RMS 3.18 m)."""
    cr = load_script("benchmarks/chrono_runs.py")
    rms, _, _ = cr.rms("acc", "chrono")
    print(f"acceleration run: position RMS {rms:.2f} m (LFDM 18-DOF 2.38 m)")
    assert rms < cr.LFDM_RMS["acc"]  # measured 0.69 m


def _chrono(name):
    text = files("dyn4_gym").joinpath(f"data/hmmwv_chrono/{name}.json").read_text()
    return json.loads("\n".join(line.split("//")[0] for line in text.splitlines()))


def test_the_rotating_inertia_is_chronos_wheels_and_driveline():
    """``ROTATING_INERTIA`` from the bundled Chrono files: per corner the tire's, rim's, spindle's
    and axle's spin inertia; the driveline's shafts 5x faster behind its 0.2 conical gears; the
    axle differentials' boxes at wheel speed. As a mass at the tire's radius: 384 kg."""
    from dyn4_gym.plant.spec import ROTATING_INERTIA

    tire, wheel, dw = _chrono("HMMWV_TMeasyTire"), _chrono("HMMWV_Wheel"), _chrono("HMMWV_DoubleWishboneFront")
    dl = _chrono("HMMWV_Driveline4WD")
    corner = tire["Design"]["Inertia [kg.m2]"][1] + wheel["Inertia"][1] + dw["Spindle"]["Inertia"][1] + dw["Axle"]["Inertia"]
    sh, ratio = dl["Shaft Inertia"], dl["Gear Ratio"]["Front Conical Gear"]
    assert ratio == dl["Gear Ratio"]["Rear Conical Gear"]
    fast = sh["Driveshaft"] + sh["Central Differential Box"] + sh["Front Driveshaft"] + sh["Rear Driveshaft"]
    expect = 4 * corner + fast / ratio**2 + sh["Front Differential Box"] + sh["Rear Differential Box"]
    assert ROTATING_INERTIA == pytest.approx(expect, rel=1e-12)
    assert HUMVEE.rotating_inertia == HMMWV_CHRONO.rotating_inertia == ROTATING_INERTIA
    from dyn4_gym.plant import dyn4_params
    assert float(dyn4_params(HUMVEE).m_rot) == pytest.approx(expect / HUMVEE.tire_radius**2, rel=1e-6)  # ~384 kg


def test_the_envs_drive_either_preset_on_both_engines():
    """``preset="chrono"``: the env's plant and powertrain are Chrono's, the engines agree (1e-9,
    float64, with the driver's pedals); an unknown preset is a ConfigError."""
    import numpy as np

    from dyn4_gym.envs import ConfigError, Dyn4VectorEnv, EnvConfig
    from test_engine_env import DRIVER_LINES, DRIVER_TERMS, _drive, _rel, _same_obs

    kw = dict(dtype="float64", action="driver", preset="chrono", episode_steps=60)
    nb_env = Dyn4VectorEnv(num_envs=3, engine="numba", **kw)
    assert nb_env.runner.core.pt is HMMWV_CHRONO_POWERTRAIN
    assert float(nb_env.runner.core.p.delta_max) == HMMWV_CHRONO.max_steer
    run = dict(n=3, term_names=DRIVER_TERMS, book_names=DRIVER_LINES, loc=(0.0, 0.6, 0.1), scale=(0.6, 0.4, 0.2))
    nb = _drive(nb_env, 100, **run)
    tc = _drive(Dyn4VectorEnv(num_envs=3, engine="torch", **kw), 100, **run)
    assert np.array_equal(nb["term"], tc["term"]) and np.array_equal(nb["trunc"], tc["trunc"])
    _same_obs(nb["obs"], tc["obs"])
    assert _rel(nb["reward"], tc["reward"]) < 1e-9
    with pytest.raises(ConfigError, match="config.preset"):
        EnvConfig.from_dict({"preset": "m1151"}).validate("config")
