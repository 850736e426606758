"""Environment configuration: frozen dataclasses with defaults in code, and one strict loader.

``EnvConfig.from_dict`` (used for ``gym.make`` keyword arguments and YAML files) merges nested
dicts into the dataclasses and rejects an unknown key, a wrong type or an out-of-range value
with the dotted path of the offender (``course.half_width must be positive, got -1``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields

from .._checks import ConfigError, check_int_range, check_range, is_num
from ..ground.terrain import TERRAIN_KINDS, RoughConfig, terrain_config
from .rewards import resolve_terms
from ..plant.presets import PRESETS
from .vehicle import validate_powertrain, validate_vehicle, validate_vehicle_ranges

__all__ = ["CourseConfig", "GroundConfig", "SensorConfig", "EnvConfig", "ConfigError"]


@dataclass(frozen=True)
class CourseConfig:
    """The course: a seeded, smooth, curvature-bounded centre line and its corridor.

    Bounds (checked by :meth:`validate`) in brackets after each field.
    """

    length: float = 300.0  # [m] along the centre line [lead_in + goal_margin + 2 spacing, 10000]
    spacing: float = 1.0  # [m] between centre-line points [0.1, 10]
    half_width: float = 3.0  # [m] corridor half-width; outside it the episode terminates [0.5, 1000]
    lat_accel: float = 3.0  # [m/s^2] design lateral acceleration, |curvature| <= lat_accel / v^2 (0, 20]
    n_waves: int = 3  # sine components of the curvature profile [1, 16]
    wavelength_min: float = 40.0  # [m] [1, 1e5]
    wavelength_max: float = 160.0  # [m] [wavelength_min, 1e5]
    lead_in: float = 20.0  # [m] straight start (curvature fades in over it) [0, 1000]
    goal_margin: float = 2.0  # [m] success when within this of the course's end [0, 1000]
    preview: tuple = (5.0, 10.0, 20.0, 30.0, 40.0)  # [m] ahead: course points in the observation, each (0, 1000]
    preview_friction: bool = False  # also observe the ground's friction at those points (the race task)
    # a given centre line instead of a drawn one: ((x, y), ...) [m] in the world frame, each
    # |x|, |y| <= 1e6; the car starts at its first point heading along it, and ``length`` becomes
    # its arc length rounded down to whole ``spacing`` (the curvature fields are then unused)
    centre_line: tuple | None = None
    # the corridor's width right and left of each centre_line point: ((right, left), ...) [m], each
    # [0.5, 1000] and at least half_width (a track file's widths, envs/tracks.py); None: half_width on
    # both sides everywhere. half_width stays the cross-track's scale (observation, reward)
    widths: tuple | None = None

    def __post_init__(self):
        if self.widths is not None:
            try:  # numbers only: a bool or a string is no width (validate says so)
                if all(is_num(v) for q in self.widths for v in q):
                    object.__setattr__(self, "widths", tuple((float(r), float(w)) for r, w in self.widths))
            except (TypeError, ValueError, OverflowError):
                pass  # validate() says what is wrong with them
        if self.centre_line is None:
            return
        try:  # a tuple of (x, y) pairs, and the length it gives; a bool or a string is no coordinate (validate says so)
            if any(isinstance(v, (bool, str, bytes)) for q in self.centre_line for v in q):
                return
            line = tuple((float(x), float(y)) for x, y in self.centre_line)
            length = _line_length(line, self.spacing)
        except (TypeError, ValueError, OverflowError, ZeroDivisionError, IndexError):
            return  # validate() says what is wrong with it
        object.__setattr__(self, "centre_line", line)
        object.__setattr__(self, "length", length)

    def validate(self, path: str) -> None:
        if self.centre_line is not None:
            _check_line(f"{path}.centre_line", self.centre_line, self)
        check_range(f"{path}.spacing", self.spacing, 0.1, 10.0)
        check_range(f"{path}.half_width", self.half_width, 0.5, 1000.0)
        check_range(f"{path}.lat_accel", self.lat_accel, 0.0, 20.0, lo_open=True)
        check_range(f"{path}.wavelength_min", self.wavelength_min, 1.0, 1e5)
        check_range(f"{path}.wavelength_max", self.wavelength_max, 1.0, 1e5)
        check_range(f"{path}.lead_in", self.lead_in, 0.0, 1000.0)
        check_range(f"{path}.goal_margin", self.goal_margin, 0.0, 1000.0)
        check_range(f"{path}.length", self.length, 1.0, 1e4)
        check_int_range(f"{path}.n_waves", self.n_waves, 1, 16)
        if self.wavelength_max < self.wavelength_min:
            raise ConfigError(f"{path}.wavelength_max must be >= {path}.wavelength_min")
        if self.length < 2 * self.spacing + self.goal_margin + self.lead_in:
            raise ConfigError(f"{path}.length is too short for its lead_in, goal_margin and spacing")
        if not isinstance(self.preview, tuple) or len(self.preview) != 5:
            raise ConfigError(f"{path}.preview must be 5 distances, got {self.preview!r}")
        for i, v in enumerate(self.preview):
            check_range(f"{path}.preview[{i}]", v, 0.0, 1000.0, lo_open=True)
        if self.widths is not None:
            _check_widths(f"{path}.widths", self)
        if not isinstance(self.preview_friction, bool):
            raise ConfigError(f"{path}.preview_friction must be true or false, got {self.preview_friction!r}")


def _check_widths(path: str, c) -> None:
    import numpy as np

    if c.centre_line is None:
        raise ConfigError(f"{path} needs a centre_line (one pair of widths per point)")
    w = c.widths
    if not isinstance(w, (tuple, list)) or len(w) != len(c.centre_line) or not all(
            isinstance(q, (tuple, list)) and len(q) == 2 and all(is_num(v) for v in q) for q in w):
        raise ConfigError(f"{path} must be one (right, left) pair of numbers [m] per centre_line point "
                          f"({len(c.centre_line)}), got {w!r:.200}")
    a = np.asarray(w, dtype=np.float64)
    if not (np.isfinite(a).all() and a.min() >= 0.5 and a.max() <= 1000.0):
        raise ConfigError(f"{path}: every width must be finite in [0.5, 1000] m")
    if a.min() < c.half_width:
        raise ConfigError(f"{path}: the narrowest width {a.min():g} m is under half_width {c.half_width:g} m "
                          "(the start pose's bound and the cross-track's scale): give half_width <= every width")


def _line_length(line, spacing) -> float:
    """The course length a centre line gives: its arc length, down to whole spacings (the
    resampled line's, course.centre_line_course)."""
    from .course import centre_line_course

    return (len(centre_line_course(line, spacing)[0]) - 1) * spacing


def _check_line(path: str, line, c) -> None:
    import numpy as np

    if not isinstance(line, (tuple, list)) or len(line) < 2 or not all(
            isinstance(q, (tuple, list)) and len(q) == 2 for q in line):
        raise ConfigError(f"{path} must be two or more (x, y) points, got {line!r:.200}")
    if not all(is_num(v) for q in line for v in q):
        raise ConfigError(f"{path}: every coordinate must be a number [m] (not a bool or a string), got {line!r:.200}")
    pts = np.asarray(line, dtype=np.float64)
    if not (np.isfinite(pts).all() and np.abs(pts).max() <= 1e6):
        raise ConfigError(f"{path} must be finite points within +-1e6 m")
    if not (np.hypot(np.diff(pts[:, 0]), np.diff(pts[:, 1])) > 1e-9).all():
        raise ConfigError(f"{path} repeats a point: every segment needs a length")
    least = 2 * c.spacing + c.goal_margin + c.lead_in
    if not least <= c.length <= 1e4:
        raise ConfigError(f"{path} gives a course of {c.length:g} m: it must be {least:g} m (two spacings, "
                          "goal_margin and lead_in) to 10 km long")


@dataclass(frozen=True)
class SensorConfig:
    """Optional observations that users of driving envs ask for (docs/env.md, "Sensors"), off by
    default, on both engines and differentiable on torch: a fan of range finders to the
    corridor's edges, and an ego-centred patch of the ground's friction and height ahead. They
    come after every other observation entry (model.task.sensor_names). Bounds in brackets."""

    beams: int = 0  # range finders; 0: none [0, 64]
    fan: float = math.pi  # [rad] the spread of the beams, centred on the heading (0, 2 pi]
    max_range: float = 40.0  # [m] a beam that meets no edge reads this (0, 200]
    patch_rows: int = 0  # ground patch points along the heading; 0: no patch [0, 16]
    patch_cols: int = 0  # ... and across it; both 0 or both positive [0, 16]
    patch_start: float = 2.0  # [m] the first row ahead of the centre of mass [-50, 200]
    patch_length: float = 20.0  # [m] from the first row to the last [0, 200]
    patch_width: float = 6.0  # [m] from the rightmost column to the leftmost [0, 200]

    def validate(self, path: str) -> None:
        check_int_range(f"{path}.beams", self.beams, 0, 64)
        check_range(f"{path}.fan", self.fan, 0.0, 2 * math.pi, lo_open=True)
        check_range(f"{path}.max_range", self.max_range, 0.0, 200.0, lo_open=True)
        check_int_range(f"{path}.patch_rows", self.patch_rows, 0, 16)
        check_int_range(f"{path}.patch_cols", self.patch_cols, 0, 16)
        if (self.patch_rows == 0) != (self.patch_cols == 0):
            raise ConfigError(f"{path}.patch_rows and patch_cols must both be 0 (no patch) or both positive, got "
                              f"{self.patch_rows} and {self.patch_cols}")
        check_range(f"{path}.patch_start", self.patch_start, -50.0, 200.0)
        check_range(f"{path}.patch_length", self.patch_length, 0.0, 200.0)
        check_range(f"{path}.patch_width", self.patch_width, 0.0, 200.0)


ACTIONS = ("accel", "driver")  # the action interfaces (docs/env.md, "Actions")

GroundConfig = RoughConfig  # the default terrain kind's config (dyn4_gym.ground.terrain)


@dataclass(frozen=True)
class EnvConfig:
    """Everything a run of ``Dyn4Humvee-v1`` depends on (``env.spec.kwargs`` records it)."""

    preset: str = "m998"  # the vehicle and its powertrain: "m998" or "chrono" (dyn4_gym.plant.presets)
    vehicle: dict = field(default_factory=dict)  # overrides of the preset's spec sheet, keys and bounds in envs/vehicle.py
    # overrides of the preset's powertrain, keys and bounds in envs/vehicle.py (POWERTRAIN_KEYS: a
    # fitted car's, dyn4_gym.fit, FitResult.env_kwargs; POWERTRAIN_SWITCHES: the physical overrun,
    # e.g. {"fuel_cut": True, "overrun": "turbine", "reverse_lockout": 1.5}); both engines drive it
    powertrain: dict = field(default_factory=dict)
    # domain randomisation: numeric vehicle keys -> [low, high], drawn per row and episode from the
    # row's seed stream (after the course's and the ground's draws), on both engines
    vehicle_ranges: dict = field(default_factory=dict)
    course: CourseConfig = field(default_factory=CourseConfig)
    sensors: SensorConfig = field(default_factory=SensorConfig)  # range finders and a ground patch (off by default)
    ground: object = field(default_factory=RoughConfig)  # a registered terrain kind's config; {"kind": name, ...}
    target_speed: float = 10.0  # [m/s] [0.5, 40]
    start_speed: float | None = None  # [m/s] at reset [0, 40]; None: the target speed
    # the start pose, from the course: arc length along it [0, length - goal_margin - 2 spacing],
    # offset to its left (-half_width, half_width), heading relative to it [-1.5, 1.5] rad
    start_s: float = 0.0  # [m]
    start_offset: float = 0.0  # [m]
    start_heading: float = 0.0  # [rad]
    control_dt: float = 0.05  # [s] one env step (20 Hz) [0.001, 1], a whole number (<= 1000) of substeps
    hdt: float = 0.01  # [s] plant substep [1e-4, 0.1]
    episode_steps: int = 800  # truncation (40 s at 20 Hz) [1, 10^7]
    # the progress term pays for at most this multiple of the target speed (per step: progress_cap
    # x target_speed x control_dt metres), so driving faster than the target earns nothing more and
    # the speed term makes it cost; None: uncapped, the -v0 ids' reward (docs/env.md, "Versions") [0.1, 100]
    progress_cap: float | None = 1.0
    roll_limit: float = 0.6  # [rad] |roll| past this terminates (rollover) (0, 1.5]
    # [s] the arrival's time budget: the "late" reward term costs every step that ends past it
    # (the eco task); None: no budget (0, 1e5]
    time_budget: float | None = None
    # also observe the clock against that budget: the time left and the lead over the uniform pace
    # that reaches the goal at the budget (docs/env.md, "Observation"; the eco task's -v1)
    observe_clock: bool = False
    # [s] the schedule reward term's uniform pace reaches the goal this long before time_budget: a
    # training margin that keeps a learner's arrival clear of the budget, where the term's kink
    # sits at margin 0 (the observed clock and the late term stay on time_budget itself; docs/env.md,
    # "The eco task") [0, time_budget)
    schedule_margin: float = 0.0
    reward_weights: dict = field(default_factory=dict)  # overrides of the default weights, by term name, each [0, 1e4]
    reward_terms: tuple = ()  # extra RewardTerm objects (users' own terms; not named like a built-in)
    dtype: str = "float32"  # "float32" or "float64"
    device: str = "cpu"  # a torch device that exists here ("cpu", "cuda", "cuda:1"...)
    compile: bool = False  # torch.compile the torch step, forward and backward (TaskCore.compiled_step): minutes to compile once
    engine: str = "auto"  # the numpy faces' engine: "auto" (numba on the CPU), "numba" or "torch" (envs/engines.py)
    action: str = "accel"  # "accel": (steer, accel) in [-1, 1]^2; "driver": (steer, throttle, brake) through the powertrain

    @property
    def substeps(self) -> int:
        return int(round(self.control_dt / self.hdt))

    @property
    def budget(self) -> float:
        """[s] ``time_budget``, inf when there is none (the late term's and the clock's)."""
        return math.inf if self.time_budget is None else float(self.time_budget)

    @property
    def pace(self) -> float:
        """[s] when the schedule term's uniform pace reaches the goal: the budget less
        ``schedule_margin``; inf when there is no budget. Both engines read it here."""
        return self.budget - self.schedule_margin

    def validate(self, path: str = "config") -> None:
        self.course.validate(f"{path}.course")
        if not isinstance(self.sensors, SensorConfig):
            raise ConfigError(f"{path}.sensors must be a mapping, got {type(self.sensors).__name__}")
        self.sensors.validate(f"{path}.sensors")
        kind = getattr(self.ground, "kind", None)
        if kind not in TERRAIN_KINDS or not isinstance(self.ground, TERRAIN_KINDS[kind].config):
            raise ConfigError(f"{path}.ground must be a registered terrain kind's config (known: {sorted(TERRAIN_KINDS)})")
        self.ground.validate(f"{path}.ground")
        check_range(f"{path}.target_speed", self.target_speed, 0.5, 40.0)
        if self.start_speed is not None:
            check_range(f"{path}.start_speed", self.start_speed, 0.0, 40.0)
        c = self.course
        check_range(f"{path}.start_s", self.start_s, 0.0, max(c.length - c.goal_margin - 2 * c.spacing, 0.0))
        check_range(f"{path}.start_offset", self.start_offset, -c.half_width, c.half_width, lo_open=True,
                    hi_open=True)
        check_range(f"{path}.start_heading", self.start_heading, -1.5, 1.5)
        check_range(f"{path}.control_dt", self.control_dt, 1e-3, 1.0)
        check_range(f"{path}.hdt", self.hdt, 1e-4, 0.1)
        if not (1 <= self.substeps <= 1000) or abs(self.substeps * self.hdt - self.control_dt) > 1e-9 * self.control_dt:
            raise ConfigError(f"{path}.control_dt must be a whole number (1 to 1000) of substeps hdt, "
                              f"got {self.control_dt} / {self.hdt}")
        check_int_range(f"{path}.episode_steps", self.episode_steps, 1, 10**7)
        if self.progress_cap is not None:
            check_range(f"{path}.progress_cap", self.progress_cap, 0.1, 100.0)
        check_range(f"{path}.roll_limit", self.roll_limit, 0.0, 1.5, lo_open=True)
        if self.time_budget is not None:
            check_range(f"{path}.time_budget", self.time_budget, 0.0, 1e5, lo_open=True)
        if not isinstance(self.observe_clock, bool):
            raise ConfigError(f"{path}.observe_clock must be true or false, got {self.observe_clock!r}")
        if self.observe_clock and self.time_budget is None:
            raise ConfigError(f"{path}.observe_clock needs a time_budget to observe the clock against")
        check_range(f"{path}.schedule_margin", self.schedule_margin, 0.0, 1e5)
        if self.schedule_margin > 0 and (self.time_budget is None or self.schedule_margin >= self.time_budget):
            raise ConfigError(f"{path}.schedule_margin must be less than a time_budget, got {self.schedule_margin!r} "
                              f"with time_budget {self.time_budget!r}")
        if not isinstance(self.preset, str) or self.preset not in PRESETS:
            raise ConfigError(f"{path}.preset must be one of {sorted(PRESETS)}, got {self.preset!r}")
        validate_vehicle(self.vehicle, f"{path}.vehicle")
        validate_powertrain(self.powertrain, f"{path}.powertrain")
        validate_vehicle_ranges(self.vehicle_ranges, self.vehicle, f"{path}.vehicle_ranges")
        if not isinstance(self.reward_weights, dict):
            raise ConfigError(f"{path}.reward_weights must be a dict, got {type(self.reward_weights).__name__}")
        resolve_terms(self.reward_weights, self.reward_terms, path)  # names and bounds
        if self.dtype not in ("float32", "float64"):
            raise ConfigError(f"{path}.dtype must be 'float32' or 'float64', got {self.dtype!r}")
        _check_device(f"{path}.device", self.device)
        if not isinstance(self.compile, bool):
            raise ConfigError(f"{path}.compile must be true or false, got {self.compile!r}")
        if self.engine not in ("auto", "numba", "torch"):
            raise ConfigError(f"{path}.engine must be 'auto', 'numba' or 'torch', got {self.engine!r}")
        if self.action not in ACTIONS:
            raise ConfigError(f"{path}.action must be one of {ACTIONS}, got {self.action!r}")
        if self.engine == "numba" and (self.compile or _device_type(self.device) != "cpu"):
            raise ConfigError(f"{path}.engine 'numba' runs on the CPU without torch.compile; "
                              f"device is {self.device!r}, compile is {self.compile}")

    @classmethod
    def from_dict(cls, values: dict | None = None, path: str = "config") -> "EnvConfig":
        """Build from (nested) dicts, strictly; see the module docstring."""
        cfg = _merge(cls(), values or {}, path)
        cfg.validate(path)
        return cfg

    def replace(self, values: dict, path: str = "config") -> "EnvConfig":
        """A copy with (nested) values merged in, validated."""
        cfg = _merge(self, values, path)
        cfg.validate(path)
        return cfg

    @classmethod
    def from_yaml(cls, file) -> "EnvConfig":
        """Load a YAML mapping (needs PyYAML: the ``sb3`` extra) of overrides."""
        from .._extras import require

        yaml = require("yaml", "EnvConfig.from_yaml")

        with open(file) as fh:
            data = yaml.safe_load(fh) or {}
        if not isinstance(data, dict):
            raise ConfigError(f"{file}: the YAML must be a mapping")
        return cls.from_dict(data, path=str(file))


_OPTIONAL_FLOATS = ("start_speed", "progress_cap", "time_budget")  # float fields that may be None


def _merge(obj, values: dict, path: str):
    if not isinstance(values, dict):
        raise ConfigError(f"{path} must be a mapping, got {type(values).__name__}")
    if isinstance(obj, CourseConfig) and "file" in values:  # a track from a file (envs/tracks.py)
        from .tracks import course_from_file

        values = course_from_file(values, path)
    known = {f.name: f for f in fields(obj)}
    changes = {}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"{path}.{key} is not a known key (known: {sorted(known)})")
        current = getattr(obj, key)
        if key == "ground" and isinstance(value, dict):
            # a new kind starts from that kind's defaults; the same kind merges into the current
            kind = value.get("kind", current.kind)
            base = current if kind == current.kind else terrain_config(kind, f"{path}.{key}")
            changes[key] = _merge(base, value, f"{path}.{key}")
        elif key == "ground":
            if value is not None and not any(isinstance(value, k.config) for k in TERRAIN_KINDS.values()):
                raise ConfigError(f"{path}.{key} must be a mapping or a terrain config, got {type(value).__name__}")
            changes[key] = current if value is None else value
        elif key == "kind":
            if value != current:
                raise ConfigError(f"{path}.kind cannot change here, got {value!r}")
        elif dataclasses.is_dataclass(current):
            changes[key] = current if value is None else (
                value if isinstance(value, type(current)) else _merge(current, value, f"{path}.{key}"))
        elif key in ("centre_line", "widths"):
            if value is not None and not isinstance(value, (list, tuple)):
                what = "(x, y) points" if key == "centre_line" else "(right, left) widths"
                raise ConfigError(f"{path}.{key} must be a list of {what}, got {type(value).__name__}")
            changes[key] = value
        elif key in ("preview", "origin"):
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"{path}.{key} must be a list of numbers, got {value!r}")
            changes[key] = tuple(value)
        elif key == "reward_terms":
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"{path}.{key} must be a list of RewardTerm objects, got {type(value).__name__}")
            changes[key] = tuple(value)
        elif isinstance(current, dict):
            if not isinstance(value, dict):
                raise ConfigError(f"{path}.{key} must be a mapping, got {type(value).__name__}")
            changes[key] = {**current, **value}  # merged, like the nested configs
        elif isinstance(current, bool) or isinstance(value, bool):
            if not isinstance(value, bool) or not isinstance(current, bool):
                raise ConfigError(f"{path}.{key} has the wrong type: {value!r}")
            changes[key] = value
        elif isinstance(current, int) and not isinstance(current, bool):
            if not (isinstance(value, int) and not isinstance(value, bool)):
                raise ConfigError(f"{path}.{key} must be an integer, got {value!r}")
            changes[key] = value
        elif isinstance(current, float) or (current is None and key in _OPTIONAL_FLOATS):
            if value is not None and not is_num(value):
                raise ConfigError(f"{path}.{key} must be a number, got {value!r}")
            try:
                changes[key] = None if value is None else float(value)
            except OverflowError:
                raise ConfigError(f"{path}.{key} is too large: {value!r}") from None
        elif isinstance(current, str):
            if not isinstance(value, str):
                raise ConfigError(f"{path}.{key} must be a string, got {value!r}")
            changes[key] = value
        else:
            changes[key] = value
    return dataclasses.replace(obj, **changes)


def _device_type(device: str) -> str:
    import torch

    return torch.device(device).type


def _check_device(path: str, device) -> None:
    """A device string torch understands and that exists on this machine."""
    import torch

    if not isinstance(device, str):
        raise ConfigError(f"{path} must be a string, got {device!r}")
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise ConfigError(f"{path} is not a torch device, got {device!r}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"{path} is {device!r} but CUDA is not available here")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"{path} is {device!r} but only {torch.cuda.device_count()} CUDA devices exist")
    elif dev.type != "cpu":
        raise ConfigError(f"{path} must be 'cpu' or a CUDA device, got {device!r}")
