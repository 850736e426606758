"""The fields a fit may estimate, their bounds and priors, and the transform the optimiser sees.

A field is a numeric :class:`dyn4_gym.plant.VehicleSpec` field an env's ``vehicle={...}`` takes
(:data:`dyn4_gym.envs.vehicle.VEHICLE_KEYS`), or a powertrain field gradients reach
(:data:`dyn4_gym.plant.powertrain.DIFFERENTIABLE`); ``"powertrain.NAME"`` and ``"spec.NAME"`` say
which where it matters. The optimiser works on an unbounded ``theta`` per field: the value is
``lo + (hi - lo) sigmoid(theta)`` (on a log scale where ``lo > 0``), so every trial stays inside
the bounds, which are physical units like the priors.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from ..envs.vehicle import POWERTRAIN_KEYS, VEHICLE_KEYS
from ..plant.powertrain import DIFFERENTIABLE, PowertrainParams
from ..plant.spec import VehicleSpec

__all__ = ["FitField", "SPEC_FIELDS", "POWERTRAIN_FIELDS", "make_fields"]

# the spec's numeric fields an env can be given back (so the fitted car trains: docs/fit.md)
SPEC_FIELDS = tuple(k for k, (kind, *_) in VEHICLE_KEYS.items() if kind in ("num", "num_or_none", "lag"))
POWERTRAIN_FIELDS = DIFFERENTIABLE
BOUND_FACTOR = 3.0
EDGE = 1e-4  # a start on a bound starts this share of the span inside it (theta is finite)  # default bounds: the start value / 3 to x 3, within the field's range


@dataclass(frozen=True)
class FitField:
    """One estimated field: ``part`` ``"spec"`` or ``"powertrain"``, its start value, bounds
    ``[lo, hi]`` and an optional Gaussian prior ``(mean, sd)``, all in the field's units."""

    name: str
    part: str
    start: float
    lo: float
    hi: float
    prior: tuple | None = None

    @property
    def log_scale(self) -> bool:
        return self.lo > 0

    def _ends(self):
        return (math.log(self.lo), math.log(self.hi)) if self.log_scale else (self.lo, self.hi)

    def value(self, theta: torch.Tensor) -> torch.Tensor:
        """The physical value of ``theta`` (differentiable)."""
        a, b = self._ends()
        v = a + (b - a) * torch.sigmoid(theta)
        return torch.exp(v) if self.log_scale else v

    def theta(self, value: float) -> float:
        """The ``theta`` of a value within the bounds (one on a bound: 1e-4 of the span inside)."""
        a, b = self._ends()
        v = math.log(value) if self.log_scale else value
        v = min(max(v, a + EDGE * (b - a)), b - EDGE * (b - a))
        s = (v - a) / (b - a)
        return math.log(s / (1.0 - s))


def _split(name: str) -> tuple[str, str]:
    part, _, field = name.rpartition(".")
    if part and part not in ("spec", "powertrain"):
        raise ValueError(f"field {name!r}: the prefix must be 'spec.' or 'powertrain.'")
    if not part:
        part = "powertrain" if field in POWERTRAIN_FIELDS else "spec"
    known = SPEC_FIELDS if part == "spec" else POWERTRAIN_FIELDS
    if field not in known:
        raise ValueError(f"field {name!r} cannot be fitted; spec fields: {SPEC_FIELDS}; powertrain fields: "
                         f"{POWERTRAIN_FIELDS}")
    return part, field


def _range(part: str, field: str) -> tuple[float, float]:
    if part == "powertrain":
        return POWERTRAIN_KEYS[field]
    return VEHICLE_KEYS[field][1], VEHICLE_KEYS[field][2]


def make_fields(names, spec: VehicleSpec, powertrain: PowertrainParams, bounds: dict | None = None,
                priors: dict | None = None) -> tuple[FitField, ...]:
    """The :class:`FitField` of each name, starting at the preset's value. ``bounds`` name ->
    ``(lo, hi)`` and ``priors`` name -> ``(mean, sd)`` in the field's units; a field without
    bounds gets its start / 3 to x 3 within its physical range. Raises ``ValueError`` naming the
    field for an unknown or repeated name, a start outside its bounds (a preset's 0 needs bounds
    given), bad bounds or a bad prior."""
    bounds, priors = dict(bounds or {}), dict(priors or {})
    names = list(names)
    if not names:
        raise ValueError("name at least one field to fit")
    for extra, what in ((bounds, "bounds"), (priors, "priors")):
        for k in extra:
            if k not in names:
                raise ValueError(f"{what} name {k!r}, which is not a fitted field ({names})")
    out, seen = [], set()
    for name in names:
        part, field = _split(name)
        if (part, field) in seen:
            raise ValueError(f"field {name!r} is named twice")
        seen.add((part, field))
        start = getattr(spec if part == "spec" else powertrain, field)
        if start is None:
            raise ValueError(f"field {name!r} is None in the preset (derived from the box): give the sheet a number first")
        start = float(start)
        rlo, rhi = _range(part, field)
        if name in bounds:
            try:
                lo, hi = (float(v) for v in bounds[name])
            except (TypeError, ValueError):
                raise ValueError(f"bounds of {name!r} must be two numbers (lo, hi), got {bounds[name]!r}") from None
        else:
            if not start > 0:
                raise ValueError(f"field {name!r} starts at {start:g}: give its bounds (lo, hi)")
            lo, hi = max(start / BOUND_FACTOR, rlo), min(start * BOUND_FACTOR, rhi)
        if not (math.isfinite(lo) and math.isfinite(hi) and rlo <= lo < hi <= rhi):
            raise ValueError(f"bounds of {name!r} must satisfy {rlo:g} <= lo < hi <= {rhi:g}, got ({lo!r}, {hi!r})")
        if not lo <= start <= hi:
            raise ValueError(f"field {name!r} starts at {start:g}, outside its bounds ({lo:g}, {hi:g})")
        prior = priors.get(name)
        if prior is not None:
            try:
                mean, sd = (float(v) for v in prior)
            except (TypeError, ValueError):
                raise ValueError(f"prior of {name!r} must be (mean, sd), got {prior!r}") from None
            if not (math.isfinite(mean) and math.isfinite(sd) and sd > 0):
                raise ValueError(f"prior of {name!r} needs a finite mean and a positive finite sd, got {prior!r}")
            prior = (mean, sd)
        out.append(FitField(field, part, start, lo, hi, prior))
    return tuple(out)


def apply(fields, values, spec: VehicleSpec, powertrain: PowertrainParams):
    """``(spec, powertrain)`` with the fields set to ``values`` (numbers, or 0-d tensors for the
    powertrain's, so gradients reach them)."""
    sc = {f.name: float(v) for f, v in zip(fields, values) if f.part == "spec"}
    pc = {f.name: v for f, v in zip(fields, values) if f.part == "powertrain"}
    return (spec.replace(**sc) if sc else spec), (dataclasses.replace(powertrain, **pc) if pc else powertrain)
