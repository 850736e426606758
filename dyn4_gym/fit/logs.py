"""Recorded runs for :mod:`dyn4_gym.fit`: what a log holds, its CSV format and its checks.

A log is one run of a car on level ground: the driver's inputs and whatever the car's loggers
measured, sampled at the same times. The CSV has one header row naming its columns, any order:

=============  ===========================================================================
column         meaning
=============  ===========================================================================
``time``       [s] sample time, strictly increasing (required)
``steer``      [-] steering in [-1, 1] of the preset's max steer, left + (required)
``throttle``   [-] in [0, 1] (required)
``brake``      [-] in [0, 1] (required)
``x``, ``y``   [m] world position of the CG's ground projection (GNSS after its lever arm)
``yaw``        [rad] heading, counter-clockwise from +x (unwrapped or not: residuals wrap)
``speed``      [m/s] ground speed, the magnitude of the CG's velocity
``yaw_rate``   [rad/s] counter-clockwise +
``ay``         [m/s^2] lateral acceleration in the body frame, left +: ``vy' + vx r``
=============  ===========================================================================

At least one output column. An empty output cell (or ``nan``) is a missing sample; inputs may
not be missing, and no value may be infinite. Inputs are held linearly between samples, as
:func:`dyn4_gym.plant.drive.drive_step` takes them each substep.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field

import numpy as np

__all__ = ["INPUTS", "OUTPUTS", "Log", "LogError", "read_log", "write_log"]

INPUTS = ("steer", "throttle", "brake")
# output name -> its unit and meaning (the module's table)
OUTPUTS = {
    "x": "[m] world x of the CG's ground projection",
    "y": "[m] world y of the CG's ground projection",
    "yaw": "[rad] heading, counter-clockwise from +x",
    "speed": "[m/s] ground speed",
    "yaw_rate": "[rad/s] yaw rate, counter-clockwise +",
    "ay": "[m/s^2] lateral acceleration in the body frame, left +",
}
_RANGES = {"steer": (-1.0, 1.0), "throttle": (0.0, 1.0), "brake": (0.0, 1.0)}


class LogError(ValueError):
    """A log that cannot be fitted to: the message names the log, the column and the first bad row."""


@dataclass(frozen=True, eq=False)
class Log:
    """One recorded run: ``time (n,)`` [s], ``inputs (n, 3)`` = steer, throttle, brake, and
    ``outputs`` name -> ``(n,)`` (NaN where a sample is missing), names from :data:`OUTPUTS`."""

    time: np.ndarray
    inputs: np.ndarray
    outputs: dict = field(default_factory=dict)
    name: str = "log"

    def __post_init__(self):
        where = f"log {self.name!r}"
        t = np.asarray(self.time, dtype=np.float64)
        if t.ndim != 1 or t.size < 2:
            raise LogError(f"{where}: time must be a 1-d array of at least 2 samples, got shape {t.shape}")
        bad = np.flatnonzero(~np.isfinite(t))
        if bad.size:
            raise LogError(f"{where}: time is not finite at row {bad[0]}")
        back = np.flatnonzero(np.diff(t) <= 0)
        if back.size:
            raise LogError(f"{where}: time must increase strictly; row {back[0] + 1} ({t[back[0] + 1]!r} s) "
                           f"does not follow row {back[0]} ({t[back[0]]!r} s)")
        u = np.asarray(self.inputs, dtype=np.float64)
        if u.shape != (t.size, len(INPUTS)):
            raise LogError(f"{where}: inputs must have shape ({t.size}, 3) = steer, throttle, brake, got {u.shape}")
        for j, name in enumerate(INPUTS):
            lo, hi = _RANGES[name]
            bad = np.flatnonzero(~(np.isfinite(u[:, j]) & (u[:, j] >= lo) & (u[:, j] <= hi)))
            if bad.size:
                raise LogError(f"{where}: {name} must be finite and within [{lo:g}, {hi:g}]; row {bad[0]} "
                               f"has {u[bad[0], j]!r}")
        if not isinstance(self.outputs, dict) or not self.outputs:
            raise LogError(f"{where}: needs at least one output of {tuple(OUTPUTS)}")
        outs = {}
        for name, v in self.outputs.items():
            if name not in OUTPUTS:
                raise LogError(f"{where}: unknown output {name!r}; outputs are {tuple(OUTPUTS)}")
            y = np.asarray(v, dtype=np.float64)
            if y.shape != t.shape:
                raise LogError(f"{where}: output {name} must have shape {t.shape}, got {y.shape}")
            bad = np.flatnonzero(np.isinf(y))
            if bad.size:
                raise LogError(f"{where}: output {name} is infinite at row {bad[0]} (a missing sample is empty or nan)")
            if not np.isfinite(y).any():
                raise LogError(f"{where}: output {name} has no sample")
            outs[name] = y
        for name, value in (("time", t), ("inputs", u), ("outputs", outs)):
            object.__setattr__(self, name, value)

    @property
    def duration(self) -> float:
        """[s] last sample time minus the first."""
        return float(self.time[-1] - self.time[0])

    def input_at(self, t: np.ndarray) -> np.ndarray:
        """``(len(t), 3)`` inputs linearly interpolated at times ``t`` [s] (held past the ends)."""
        return np.stack([np.interp(t, self.time, self.inputs[:, j]) for j in range(len(INPUTS))], -1)

    def window(self, t0: float, t1: float, name: str | None = None) -> "Log":
        """The samples with ``t0 <= time <= t1`` as a log of their own."""
        keep = (self.time >= t0) & (self.time <= t1)
        return Log(self.time[keep], self.inputs[keep], {k: v[keep] for k, v in self.outputs.items()},
                   name or f"{self.name}[{t0:g}:{t1:g}]")


def read_log(path: str | os.PathLike, name: str | None = None) -> Log:
    """A :class:`Log` from a CSV with a header row (the module's table); errors name the row."""
    name = name or os.path.splitext(os.path.basename(str(path)))[0]
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError) as exc:
        raise LogError(f"log {name!r}: cannot read {path}: {exc}") from None
    rows = [r for r in rows if any(c.strip() for c in r)]
    if len(rows) < 3:
        raise LogError(f"log {name!r}: {path} needs a header row and at least two samples")
    header = [c.strip() for c in rows[0]]
    known = ("time",) + INPUTS + tuple(OUTPUTS)
    for col in header:
        if col not in known:
            raise LogError(f"log {name!r}: unknown column {col!r}; columns are {known}")
    if len(set(header)) != len(header):
        raise LogError(f"log {name!r}: a column is named twice in {header}")
    for col in ("time",) + INPUTS:
        if col not in header:
            raise LogError(f"log {name!r}: column {col!r} is missing (required: time, steer, throttle, brake)")
    data = np.full((len(rows) - 1, len(header)), np.nan)
    for i, row in enumerate(rows[1:]):
        if len(row) != len(header):
            raise LogError(f"log {name!r}: row {i} has {len(row)} cells, the header {len(header)}")
        for j, cell in enumerate(row):
            cell = cell.strip()
            if not cell:
                continue
            try:
                data[i, j] = float(cell)
            except ValueError:
                raise LogError(f"log {name!r}: row {i}, column {header[j]}: {cell!r} is not a number") from None
    col = {c: data[:, header.index(c)] for c in header}
    for c in ("time",) + INPUTS:
        missing = np.flatnonzero(np.isnan(col[c]))
        if missing.size:
            raise LogError(f"log {name!r}: {c} is missing at row {missing[0]} (only outputs may be missing)")
    return Log(col["time"], np.stack([col[c] for c in INPUTS], -1),
               {c: col[c] for c in header if c in OUTPUTS}, name)


def write_log(log: Log, path: str | os.PathLike) -> None:
    """Write ``log`` as the module's CSV (a missing sample is an empty cell)."""
    names = [n for n in OUTPUTS if n in log.outputs]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time", *INPUTS, *names])
        for i in range(log.time.size):
            outs = [log.outputs[n][i] for n in names]
            w.writerow([repr(float(log.time[i])), *(repr(float(v)) for v in log.inputs[i]),
                        *("" if math.isnan(v) else repr(float(v)) for v in outs)])
