"""Fit the car to its logs: system identification through the differentiable plant (docs/fit.md).

>>> from dyn4_gym.fit import read_log, fit, FitConfig
>>> from dyn4_gym.plant.presets import PRESETS
>>> spec, pt = PRESETS["m998"]
>>> result = fit(read_log("run.csv"), spec, pt, ["drag_area", "driveline_efficiency"])  # doctest: +SKIP
>>> result.values, result.sd, result.unidentified  # doctest: +SKIP

``python -m dyn4_gym.fit LOG.csv --fields drag_area driveline_efficiency`` does the same from the
command line, with a plot and a JSON. The shipped presets are validated from published data, never
fitted: a fit makes a car of its own (:meth:`FitResult.env_kwargs`).
"""

from .core import DEFAULT_NOISE, FitConfig, FitResult, excitation, fit, record, simulate
from .fields import POWERTRAIN_FIELDS, SPEC_FIELDS, FitField, make_fields
from .logs import INPUTS, OUTPUTS, Log, LogError, read_log, write_log

__all__ = ["fit", "FitConfig", "FitResult", "simulate", "record", "excitation", "DEFAULT_NOISE", "Log", "LogError",
           "read_log", "write_log", "INPUTS", "OUTPUTS", "FitField", "make_fields", "SPEC_FIELDS", "POWERTRAIN_FIELDS"]
