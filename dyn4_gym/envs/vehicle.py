"""The ``vehicle={...}`` overrides an env accepts: each key typed and bounded, checked in one place.

Keys are :class:`dyn4_gym.plant.VehicleSpec` fields (applied to the Humvee's sheet before the
parameters are derived) and the plant's two switches, ``grade_force`` and ``damper``. The bounds
are physical: wide enough for any road vehicle from a go-kart to a heavy truck, narrow enough that
every value gives a finite plant (a negative mass, a zero gravity or a friction of 1e39 is
refused, with the dotted path of the key).
"""

from __future__ import annotations

import math

from .._checks import ConfigError, check_range, is_num
from ..model.constants import OVERRUN
from ..plant import HUMVEE

__all__ = ["VEHICLE_KEYS", "POWERTRAIN_KEYS", "POWERTRAIN_SWITCHES", "validate_vehicle", "validate_powertrain", "validate_vehicle_ranges",
           "vehicle_range_box", "MAX_RANGES"]

# key: (kind, low, high) for numbers [SI units]; (kind, choices) for strings; ("bool",) for flags
VEHICLE_KEYS = {
    "mass": ("num", 50.0, 1e5),  # [kg]
    "wheelbase": ("num", 0.5, 20.0),  # [m]
    "cg_to_front": ("num", 0.05, 19.95),  # [m], also < wheelbase
    "cg_height": ("num", 0.05, 5.0),  # [m]
    "track_front": ("num", 0.0, 5.0),  # [m]
    "track_rear": ("num", 0.0, 5.0),  # [m]
    "box_length": ("num", 0.1, 30.0),  # [m]
    "box_width": ("num", 0.1, 10.0),  # [m]
    "box_height": ("num", 0.1, 10.0),  # [m]
    "inertia_roll": ("num_or_none", 1.0, 1e7),  # [kg m^2]
    "inertia_pitch": ("num_or_none", 1.0, 1e7),
    "inertia_yaw": ("num_or_none", 1.0, 1e7),
    "tire_mu": ("num", 0.05, 3.0),  # [-]
    "tire_cornering_stiffness": ("num", 0.5, 50.0),  # [1/rad]
    "tire_peak_slip": ("num", 0.02, 1.0),  # [rad]
    "tire_load_sensitivity": ("num", 0.0, 0.5),  # [-]
    "tire_radius": ("num", 0.1, 2.0),  # [m]
    "max_steer": ("num", 0.01, 1.2),  # [rad]
    "max_drive_accel": ("num", 0.0, 20.0),  # [m/s^2]
    "max_brake_accel": ("num", 0.1, 30.0),  # [m/s^2]
    "max_power": ("num", 1e3, 1e7),  # [W]
    "drivetrain": ("str", ("4wd", "fwd", "rwd")),
    "direct_drive": ("bool",),
    "steer_lag": ("num", 0.0, 5.0),  # [s]
    "drive_lag": ("lag", 0.0, 5.0),  # [s], or -1: by drivetrain
    "front_stiffness": ("num", 0.1, 10.0),  # [-]
    "ride_freq_front": ("num", 0.3, 30.0),  # [Hz]
    "ride_freq_rear": ("num", 0.3, 30.0),  # [Hz]
    "damping_ratio_front": ("num", 0.0, 5.0),  # [-]
    "damping_ratio_rear": ("num", 0.0, 5.0),  # [-]
    "drag_area": ("num", 0.0, 50.0),  # [m^2]
    "air_density": ("num", 0.0, 5.0),  # [kg/m^3]
    "rolling_resistance": ("num", 0.0, 0.5),  # [-]
    "lateral_blend_speed": ("num", 0.01, 5.0),  # [m/s]
    "rolling_blend_speed": ("num", 0.01, 5.0),  # [m/s]
    "gravity": ("num", 1.0, 30.0),  # [m/s^2]
    "grade_force": ("bool",),
    "damper": ("str", ("passive", "skyhook")),
}


# the powertrain's overrides an env takes (``powertrain={...}``): the fields a fit estimates
# (dyn4_gym.plant.powertrain.DIFFERENTIABLE), each (low, high) [SI units]
POWERTRAIN_KEYS = {
    "crank_inertia": (1e-3, 1e3),  # [kg m^2]
    "brake_torque": (1.0, 1e6),  # [N m] per wheel
    "driveline_efficiency": (0.05, 1.0),  # [-]
    "indicated_efficiency": (0.05, 0.99),  # [-]
}


# the powertrain's switches (issue 45's physical overrun, opt-in; PowertrainParams checks them):
# key -> the check of its value
POWERTRAIN_SWITCHES = {
    "fuel_cut": ("bool",),  # the combustion torque never below 0
    "overrun": ("str", OVERRUN),  # reverse flow's law: "mirror" (the default) or "turbine"
    "reverse_lockout": ("num_or_inf", 0.0, math.inf),  # [m/s] the direction changes only below it (inf: none)
}


def validate_powertrain(powertrain, path: str) -> dict:
    """Check a ``powertrain`` override dict (:data:`POWERTRAIN_KEYS`' numbers and
    :data:`POWERTRAIN_SWITCHES`); returns it with the numbers as floats."""
    if not isinstance(powertrain, dict):
        raise ConfigError(f"{path} must be a dict of overrides, got {type(powertrain).__name__}")
    out = {}
    for key, value in powertrain.items():
        p = f"{path}.{key}"
        if key in POWERTRAIN_SWITCHES:
            out[key] = _checked(p, POWERTRAIN_SWITCHES[key], value)
            continue
        if key not in POWERTRAIN_KEYS:
            raise ConfigError(f"{p} is not a powertrain key (known: {sorted(POWERTRAIN_KEYS) + sorted(POWERTRAIN_SWITCHES)})")
        lo, hi = POWERTRAIN_KEYS[key]
        check_range(p, value, lo, hi)
        out[key] = float(value)
    return out


def _checked(p: str, key_rule: tuple, value):
    """``value`` of the key at dotted path ``p`` checked by its rule (``VEHICLE_KEYS``' form:
    ``(kind, ...)``); returned with numbers as floats, else ``ConfigError``."""
    kind, *rule = key_rule
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{p} must be true or false, got {value!r}")
    elif kind == "str":
        if value not in rule[0] or not isinstance(value, str):
            raise ConfigError(f"{p} must be one of {rule[0]}, got {value!r}")
    elif kind == "num_or_none" and value is None:
        pass
    elif kind == "lag" and is_num(value) and value == -1:
        value = -1.0
    elif kind == "num_or_inf" and is_num(value) and value == math.inf:
        value = math.inf
    else:
        check_range(p, value, rule[0], rule[1])
        value = float(value)
    return value


def validate_vehicle(vehicle, path: str) -> dict:
    """Check every key of a ``vehicle`` override dict; returns it with numbers as floats."""
    if not isinstance(vehicle, dict):
        raise ConfigError(f"{path} must be a dict of overrides, got {type(vehicle).__name__}")
    out = {}
    for key, value in vehicle.items():
        p = f"{path}.{key}"
        if key not in VEHICLE_KEYS:
            raise ConfigError(f"{p} is not a vehicle key (known: {sorted(VEHICLE_KEYS)})")
        out[key] = _checked(p, VEHICLE_KEYS[key], value)
    wb = out.get("wheelbase", HUMVEE.wheelbase)
    if "cg_to_front" in out or "wheelbase" in out:
        lf = out.get("cg_to_front", HUMVEE.cg_to_front)
        if not 0 < lf < wb:
            raise ConfigError(f"{path}.cg_to_front must lie strictly between 0 and the wheelbase ({wb}), got {lf!r}")
    return out


MAX_RANGES = 8  # keys randomised at once (every corner of their box is checked: 2^8 derivations)


def vehicle_range_box(ranges, vehicle: dict, path: str) -> dict:
    """``vehicle_ranges`` as ``{key: (low, high)}`` floats in sorted key order, each key numeric,
    not fixed in ``vehicle``, its bounds within the key's and ``low <= high``; else ``ConfigError``."""
    if not isinstance(ranges, dict):
        raise ConfigError(f"{path} must be a dict of key: [low, high], got {type(ranges).__name__}")
    if len(ranges) > MAX_RANGES:
        raise ConfigError(f"{path} randomises at most {MAX_RANGES} keys, got {len(ranges)}")
    out = {}
    for key in sorted(ranges):
        p, value = f"{path}.{key}", ranges[key]
        if key not in VEHICLE_KEYS or VEHICLE_KEYS[key][0] != "num":
            numeric = sorted(k for k, v in VEHICLE_KEYS.items() if v[0] == "num")
            raise ConfigError(f"{p} is not a numeric vehicle key (known: {numeric})")
        if key in vehicle:
            raise ConfigError(f"{p} is also fixed in vehicle.{key}: give it one or the other")
        if not (isinstance(value, (list, tuple)) and len(value) == 2):
            raise ConfigError(f"{p} must be [low, high], got {value!r}")
        lo_hi = []
        for i, v in enumerate(value):
            check_range(f"{p}[{i}]", v, VEHICLE_KEYS[key][1], VEHICLE_KEYS[key][2])
            lo_hi.append(float(v))
        if lo_hi[1] < lo_hi[0]:
            raise ConfigError(f"{p} must have low <= high, got {value!r}")
        out[key] = tuple(lo_hi)
    return out


def validate_vehicle_ranges(ranges, vehicle: dict, path: str) -> None:
    """``vehicle_ranges``: numeric vehicle keys -> ``[low, high]`` (:func:`vehicle_range_box`),
    drawn per row and episode (domain randomisation). Every corner of the box, over ``vehicle``'s
    other overrides, must also be a valid vehicle (the cross-key rules included) that derives
    parameters."""
    from itertools import product

    import torch

    from ..plant import dyn4_params

    box = vehicle_range_box(ranges, vehicle, path)
    for corner in product(*box.values()):
        values = {**vehicle, **dict(zip(box, corner))}
        validate_vehicle(values, f"{path} (at {dict(zip(box, corner))})")
        try:
            dyn4_params(HUMVEE, dtype=torch.float64, **values)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{path}: the vehicle at {dict(zip(box, corner))} does not derive: {exc}") from None
