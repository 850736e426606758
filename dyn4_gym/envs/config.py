"""Environment configuration: frozen dataclasses with defaults in code, and one strict loader.

``EnvConfig.from_dict`` (used for ``gym.make`` keyword arguments and YAML files) merges nested
dicts into the dataclasses and rejects an unknown key, a wrong type or an out-of-range value
with the dotted path of the offender (``course.half_width must be positive, got -1``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields

from .._checks import ConfigError, check_int as _int, check_nonneg as _nonneg, check_positive as _positive, is_num as _is_num
from ..ground.terrain import TERRAIN_KINDS, RoughConfig, terrain_config

__all__ = ["CourseConfig", "GroundConfig", "EnvConfig", "ConfigError"]


@dataclass(frozen=True)
class CourseConfig:
    """The course: a seeded, smooth, curvature-bounded centre line and its corridor."""

    length: float = 300.0  # [m] along the centre line
    spacing: float = 1.0  # [m] between centre-line points
    half_width: float = 3.0  # [m] corridor half-width; outside it the episode terminates
    lat_accel: float = 3.0  # [m/s^2] design lateral acceleration: |curvature| <= lat_accel / v_target^2
    n_waves: int = 3  # sine components of the curvature profile
    wavelength_min: float = 40.0  # [m]
    wavelength_max: float = 160.0  # [m]
    lead_in: float = 20.0  # [m] straight start (curvature fades in over it)
    goal_margin: float = 2.0  # [m] success when within this of the course's end
    preview: tuple = (5.0, 10.0, 20.0, 30.0, 40.0)  # [m] ahead: course points in the observation

    def validate(self, path: str) -> None:
        for name in ("length", "spacing", "half_width", "lat_accel", "wavelength_min", "wavelength_max"):
            _positive(f"{path}.{name}", getattr(self, name))
        _nonneg(f"{path}.lead_in", self.lead_in)
        _nonneg(f"{path}.goal_margin", self.goal_margin)
        _int(f"{path}.n_waves", self.n_waves, 1)
        if self.wavelength_max < self.wavelength_min:
            raise ConfigError(f"{path}.wavelength_max must be >= {path}.wavelength_min")
        if self.length < 2 * self.spacing + self.goal_margin + self.lead_in:
            raise ConfigError(f"{path}.length is too short for its lead_in, goal_margin and spacing")
        if len(self.preview) != 5 or not all(_is_num(v) and v > 0 for v in self.preview):
            raise ConfigError(f"{path}.preview must be 5 positive distances, got {self.preview!r}")


GroundConfig = RoughConfig  # the default terrain kind's config (dyn4_gym.ground.terrain)


@dataclass(frozen=True)
class EnvConfig:
    """Everything a run of ``Dyn4Humvee-v0`` depends on (``env.spec.kwargs`` records it)."""

    vehicle: dict = field(default_factory=dict)  # dyn4_params overrides: spec fields or parameters
    course: CourseConfig = field(default_factory=CourseConfig)
    ground: object = field(default_factory=RoughConfig)  # a registered terrain kind's config; {"kind": name, ...}
    target_speed: float = 10.0  # [m/s]
    start_speed: float | None = None  # [m/s] at reset; None: the target speed
    control_dt: float = 0.05  # [s] one env step (20 Hz)
    hdt: float = 0.01  # [s] plant substep
    episode_steps: int = 800  # truncation (40 s at 20 Hz)
    roll_limit: float = 0.6  # [rad] |roll| past this terminates (rollover)
    reward_weights: dict = field(default_factory=dict)  # overrides of the default weights, by term name
    reward_terms: tuple = ()  # extra RewardTerm objects (users' own terms)
    dtype: str = "float32"
    device: str = "cpu"
    compile: bool = False  # torch.compile the step (numpy faces only): minutes to compile, then faster

    @property
    def substeps(self) -> int:
        return int(round(self.control_dt / self.hdt))

    def validate(self, path: str = "config") -> None:
        self.course.validate(f"{path}.course")
        kind = getattr(self.ground, "kind", None)
        if kind not in TERRAIN_KINDS or not isinstance(self.ground, TERRAIN_KINDS[kind].config):
            raise ConfigError(f"{path}.ground must be a registered terrain kind's config (known: {sorted(TERRAIN_KINDS)})")
        self.ground.validate(f"{path}.ground")
        _positive(f"{path}.target_speed", self.target_speed)
        if self.start_speed is not None:
            _nonneg(f"{path}.start_speed", self.start_speed)
        _positive(f"{path}.control_dt", self.control_dt)
        _positive(f"{path}.hdt", self.hdt)
        if self.hdt > 0.1:
            raise ConfigError(f"{path}.hdt must be at most 0.1 s, got {self.hdt!r}")
        if abs(self.substeps * self.hdt - self.control_dt) > 1e-9 * self.control_dt or self.substeps < 1:
            raise ConfigError(f"{path}.control_dt must be a whole number of substeps hdt, got {self.control_dt} / {self.hdt}")
        _int(f"{path}.episode_steps", self.episode_steps, 1)
        _positive(f"{path}.roll_limit", self.roll_limit)
        if not isinstance(self.vehicle, dict):
            raise ConfigError(f"{path}.vehicle must be a dict of overrides, got {type(self.vehicle).__name__}")
        if not isinstance(self.reward_weights, dict):
            raise ConfigError(f"{path}.reward_weights must be a dict, got {type(self.reward_weights).__name__}")
        if self.dtype not in ("float32", "float64"):
            raise ConfigError(f"{path}.dtype must be 'float32' or 'float64', got {self.dtype!r}")
        if not isinstance(self.device, str):
            raise ConfigError(f"{path}.device must be a string, got {self.device!r}")

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
        """Load a YAML mapping (needs PyYAML) of overrides."""
        import yaml

        with open(file) as fh:
            data = yaml.safe_load(fh) or {}
        if not isinstance(data, dict):
            raise ConfigError(f"{file}: the YAML must be a mapping")
        return cls.from_dict(data, path=str(file))


def _merge(obj, values: dict, path: str):
    if not isinstance(values, dict):
        raise ConfigError(f"{path} must be a mapping, got {type(values).__name__}")
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
        elif key in ("preview", "origin"):
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"{path}.{key} must be a list of numbers, got {value!r}")
            changes[key] = tuple(value)
        elif key == "reward_terms":
            changes[key] = tuple(value)
        elif isinstance(current, dict):
            if not isinstance(value, dict):
                raise ConfigError(f"{path}.{key} must be a mapping, got {type(value).__name__}")
            changes[key] = dict(value)
        elif isinstance(current, bool) or isinstance(value, bool):
            if not isinstance(value, bool) or not isinstance(current, bool):
                raise ConfigError(f"{path}.{key} has the wrong type: {value!r}")
            changes[key] = value
        elif isinstance(current, int) and not isinstance(current, bool):
            if not (isinstance(value, int) and not isinstance(value, bool)):
                raise ConfigError(f"{path}.{key} must be an integer, got {value!r}")
            changes[key] = value
        elif isinstance(current, float) or (current is None and key == "start_speed"):
            if value is not None and not _is_num(value):
                raise ConfigError(f"{path}.{key} must be a number, got {value!r}")
            changes[key] = None if value is None else float(value)
        elif isinstance(current, str):
            if not isinstance(value, str):
                raise ConfigError(f"{path}.{key} must be a string, got {value!r}")
            changes[key] = value
        else:
            changes[key] = value
    return dataclasses.replace(obj, **changes)
