"""Vehicle spec sheets: what a data sheet says about a car, in SI units.

A :class:`VehicleSpec` is the input of :func:`dyn4_gym.plant.bike_params` and
:func:`dyn4_gym.plant.dyn4_params`, which derive the plants' parameters from it (the seeds'
``dyn_bike_si_of`` / ``dyn4_si_of``). :data:`HUMVEE` is the M998 HMMWV, every number with its
source. The public data it cites is bundled in ``dyn4_gym/data/`` with its licences.

Sources (short names used below):

- *Chrono*: Project Chrono HMMWV model data, ``data/vehicle/hmmwv/`` at commit 7689fbc
  (BSD-3-Clause), itself citing Aardema, TACOM TR 13337.
- *LFDM*: uwsbel/low-fidelity-dynamic-models at commit 992faca, ``wheeled_vehicle_models/18dof``
  HMMWV ``vehicle.json`` and ``tmeasy.json`` (MIT).
- *Jolt*: Jolt Physics wheel defaults (``WheelSettings``, MIT), frequency 1.5 Hz, damping 0.5.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = ["VehicleSpec", "HUMVEE", "HMMWV_CHRONO", "ROTATING_INERTIA"]

_DRIVETRAINS = ("4wd", "fwd", "rwd")


@dataclass(frozen=True)
class VehicleSpec:
    """A vehicle as its spec sheet describes it. SI units throughout (m, kg, s, rad, N, W)."""

    name: str
    mass: float  # [kg] total mass, sprung and unsprung
    wheelbase: float  # [m] front to rear axle
    cg_to_front: float  # [m] CG to front axle, lf
    cg_height: float  # [m] CG above the ground, h
    track_front: float  # [m] full front track (wheel centre to wheel centre)
    track_rear: float  # [m] full rear track
    box_length: float  # [m] chassis box, for inertias the sheet does not give
    box_width: float  # [m]
    box_height: float  # [m]
    inertia_roll: float | None  # [kg m^2] about the CG's x axis; None: from the box
    inertia_pitch: float | None  # [kg m^2] about y; None: from the box
    inertia_yaw: float | None  # [kg m^2] about z; None: from the box
    tire_mu: float  # [-] nominal peak friction coefficient on the reference road
    tire_cornering_stiffness: float  # [1/rad] cornering stiffness per unit load K_a
    tire_peak_slip: float  # [rad] slip angle of the lateral force peak
    tire_load_sensitivity: float  # [-] eps in mu_i = mu (1 - eps (Fz - Fz0) / Fz0)
    tire_radius: float  # [m] loaded radius, for brake torque -> force
    max_steer: float  # [rad] virtual centre wheel
    max_drive_accel: float  # [m/s^2] largest drive command
    max_brake_accel: float  # [m/s^2] largest brake command (brake torque authority / mass)
    max_power: float  # [W] at the wheels; the drive force is capped at P / vx smoothly
    drivetrain: str  # "4wd", "fwd" or "rwd"
    direct_drive: bool  # True: the drive command has no lag (electric motor at the wheel)
    steer_lag: float  # [s] first-order lag of the steering actuator (0: none)
    drive_lag: float  # [s] lag of the drive/brake command; -1: by drivetrain (0 direct, 0.1 s)
    front_stiffness: float  # [-] scales the front axle's K_a (understeer knob)
    ride_freq_front: float  # [Hz] front corners' natural frequency on their springs
    ride_freq_rear: float  # [Hz]
    damping_ratio_front: float  # [-] front skyhook dampers
    damping_ratio_rear: float  # [-]
    drag_area: float  # [m^2] Cd A
    air_density: float  # [kg/m^3]
    rolling_resistance: float  # [-] rolling resistance coefficient, force / weight
    lateral_blend_speed: float  # [m/s] low-speed blend of the slip angle (see tire.py)
    rolling_blend_speed: float  # [m/s] rolling resistance fades in below this speed (tanh)
    gravity: float = 9.81  # [m/s^2]
    # [kg m^2] everything that spins with the wheels when a powertrain drives them (wheels, tires,
    # hubs, axles, the driveline's shafts downstream of the gearbox), at wheel speed: each part's
    # inertia times the square of its speed over the wheel's. Felt only by the driven plant
    # (dyn4_drive_step): an acceleration command is a servo at the contact patches (docs/plant.md).
    rotating_inertia: float = 0.0

    def __post_init__(self) -> None:
        positive = (
            "mass", "wheelbase", "cg_to_front", "cg_height", "box_length", "box_width",
            "box_height", "tire_mu", "tire_cornering_stiffness", "tire_peak_slip", "tire_radius",
            "max_steer", "max_brake_accel", "max_power", "ride_freq_front", "ride_freq_rear",
            "lateral_blend_speed", "rolling_blend_speed", "gravity", "front_stiffness",
        )
        for name in positive:
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0 and value < float("inf")):
                raise ValueError(f"VehicleSpec.{name} must be a positive finite number, got {value!r}")
        nonneg = (
            "track_front", "track_rear", "tire_load_sensitivity", "max_drive_accel", "steer_lag",
            "damping_ratio_front", "damping_ratio_rear", "drag_area", "air_density",
            "rolling_resistance", "rotating_inertia",
        )
        for name in nonneg:
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 <= value < float("inf")):
                raise ValueError(f"VehicleSpec.{name} must be a finite number >= 0, got {value!r}")
        for name in ("inertia_roll", "inertia_pitch", "inertia_yaw"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"VehicleSpec.{name} must be positive or None, got {value!r}")
        if not 0 < self.cg_to_front < self.wheelbase:
            raise ValueError("VehicleSpec.cg_to_front must lie strictly between 0 and the wheelbase")
        if self.drivetrain not in _DRIVETRAINS:
            raise ValueError(f"VehicleSpec.drivetrain must be one of {_DRIVETRAINS}, got {self.drivetrain!r}")
        if not (self.drive_lag == -1 or self.drive_lag >= 0):
            raise ValueError("VehicleSpec.drive_lag must be >= 0, or -1 for 'by drivetrain'")
        if self.max_steer >= 1.5:
            raise ValueError("VehicleSpec.max_steer must be below pi/2")

    @property
    def cg_to_rear(self) -> float:
        """[m] CG to rear axle, lr."""
        return self.wheelbase - self.cg_to_front

    @property
    def drive_lag_s(self) -> float:
        """[s] the drive lag after resolving -1 ('by drivetrain')."""
        if self.drive_lag >= 0:
            return float(self.drive_lag)
        return 0.0 if self.direct_drive else 0.1

    def replace(self, **changes) -> "VehicleSpec":
        """A copy with some fields changed; unknown names raise ``TypeError``."""
        return dataclasses.replace(self, **changes)


# The parts that spin with the wheels, from Chrono's HMMWV files (bundled), at wheel speed:
# per corner the tire (HMMWV_TMeasyTire, spin axis 6.69), the rim (HMMWV_Wheel, 0.6243), the
# spindle (HMMWV_DoubleWishboneFront, 0.07352) and the axle shaft (same file, 0.4); the driveline
# (HMMWV_Driveline4WD, ShaftsDriveline4WD): the driveshaft 0.5, the central differential's box
# 0.6, the front and rear driveshafts 0.5 each, all turning 1 / 0.2 = 5x wheel speed behind the
# conical gears (ratio 0.2), and the two axle differentials' boxes 0.6 each at wheel speed. The
# gearbox's and the converter turbine's shafts are not in the bundled data and are left out.
_CORNER_SPIN = 6.69 + 0.6243 + 0.07352 + 0.4
_DRIVELINE_AT_WHEELS = (0.5 + 0.6 + 0.5 + 0.5) / 0.2**2 + 0.6 + 0.6
ROTATING_INERTIA = 4 * _CORNER_SPIN + _DRIVELINE_AT_WHEELS  # 84.85 kg m^2, 384 kg at r0 0.4699 m

# fmt: off
HUMVEE = VehicleSpec(
    name="HMMWV M998",
    # Chrono: chassis 2086.52 kg + 4 x (spindle 14.705 + upright 19.45 + arms 5.813 + 23.965)
    # + 4 wheels x 18.8 + 4 tires x 37.6 + Pitman steering 5.29 = 2573 kg.
    mass=2573.0,
    wheelbase=3.378,            # Chrono HMMWV_Vehicle.json, axles at x = +-1.688965 m
    cg_to_front=1.633,          # Chrono chassis COM 0.056 m ahead of the axles' midpoint
    cg_height=0.713,            # LFDM 18dof vehicle.json, h
    track_front=1.82,           # Chrono spindle y = 0.910 m; LFDM track 1.82 m
    track_rear=1.82,
    box_length=4.57,            # M998 overall length / width / height, for reference only
    box_width=2.16,
    box_height=1.83,
    inertia_roll=1078.52,       # Chrono HMMWV_Chassis.json (sprung), kg m^2
    inertia_pitch=2955.66,
    inertia_yaw=3570.20,
    tire_mu=0.8,                # Chrono HMMWV_TMeasyTire.json, mu 0.8 (37x12.5R16.5)
    # LFDM tmeasy.json: TMeasy's quadratic law dfy0(Fz) = (Fz/pn) (2 dfy0Pn - dfy0P2n/2
    # - (dfy0Pn - dfy0P2n/2) Fz/pn) with dfy0Pn 50931.7, dfy0P2n 94293.8 N/rad, pn 8562.8 N gives
    # 38.2 kN/rad at the Humvee's ~6.3 kN corner load: 6.07 /rad (Chrono's Pac89 set: 6.03).
    tire_cornering_stiffness=6.07,
    tire_peak_slip=0.388,       # LFDM tmeasy.json: symPn = symP2n = 0.38786
    # LFDM tmeasy.json: fymPn/pn 0.7725 at 8.56 kN, fymP2n/(2 pn) 0.7305 at 17.1 kN, a slope of
    # -4.9e-6 /N; at the Humvee's ~6.3 kN corner load that is eps = 4.9e-6 * 6300 / 0.78 = 0.040.
    tire_load_sensitivity=0.040,
    tire_radius=0.4699,         # Chrono TMeasy r0
    max_steer=0.5276,           # Chrono HMMWV_Vehicle.json: 30.23 deg
    # Chosen: a 112 kW diesel through a 3-speed automatic pulls about 0.3 g from rest; the power
    # cap below then limits it above ~15 m/s.
    max_drive_accel=3.0,
    # Chrono HMMWV_BrakeSimple: 4000 N m per wheel at r0 0.4699 m -> 4 x 8512 N / 2573 kg.
    max_brake_accel=4 * 4000.0 / 0.4699 / 2573.0,
    max_power=112e3,            # 150 hp diesel (6.2 L V8), at the wheels: chosen as the rating
    drivetrain="4wd",           # full-time four-wheel drive
    direct_drive=False,
    steer_lag=0.1,              # chosen: hydraulic power steering, ~0.1 s
    drive_lag=-1.0,             # by drivetrain: 0.1 s (seeds' default)
    front_stiffness=1.0,        # the seeds' default (their tire refit to Jolt)
    ride_freq_front=1.5,        # Jolt default 1.5 Hz / 0.5; inside the HMMWV's 1.4-2.7 Hz range
    ride_freq_rear=1.5,
    damping_ratio_front=0.5,
    damping_ratio_rear=0.5,
    drag_area=2.5,              # chosen: Cd ~0.7 on ~3.6 m^2 frontal area (2.16 m x 1.83 m less gaps)
    air_density=1.225,
    rolling_resistance=0.015,   # LFDM tmeasy.json: rr 0.015
    lateral_blend_speed=0.5,    # chosen, see tire.py
    rolling_blend_speed=0.25,   # chosen: rolling resistance is Coulomb-like; smoothed at rest
    rotating_inertia=ROTATING_INERTIA,
)
# fmt: on

# Chrono's HMMWV model where it differs from the M998 preset (issue 22): the steering as Chrono
# drives it, with the powertrain HMMWV_CHRONO_POWERTRAIN (drive_step, drive_rollout). Both presets
# carry the wheels' and driveline's rotating inertia (ROTATING_INERTIA, from Chrono's files).
HMMWV_CHRONO = HUMVEE.replace(
    name="HMMWV (Chrono model)",
    max_steer=0.582178801,  # LFDM 18dof vehicle.json maxSteer, linear steer map (nonLinearSteer false)
    steer_lag=0.0,  # Chrono drives the Pitman arm directly: no actuator lag
)
