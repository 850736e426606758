"""The two bundled Chrono HMMWV runs as :class:`~dyn4_gym.fit.logs.Log` (positions only).

``dyn4_gym/data/chrono_runs/`` (uwsbel/low-fidelity-dynamic-models at 992faca, MIT; SOURCE.md):
driver inputs ``acc.txt`` / ``steer.txt`` (time [s], steer in [-1, 1], throttle, brake; linear
between rows) and Chrono's trajectories ``chrono_acc.txt`` / ``chrono_steer.txt`` (time, x, y at
100 Hz) from rest at the origin heading +x on level ground. benchmarks/chrono_runs.py gates the
presets on them; the fit tutorial (docs/fit.md) fits on one and checks on the other.
"""

from __future__ import annotations

from importlib.resources import files

import numpy as np

from .logs import Log

__all__ = ["CHRONO_RUNS", "load_run", "chrono_log"]

CHRONO_RUNS = ("acc", "steer")


def load_run(name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(inputs (n, 4): time, steer, throttle, brake; reference (m, 3): time, x, y)``."""
    if name not in CHRONO_RUNS:
        raise ValueError(f"unknown Chrono run {name!r}; runs are {CHRONO_RUNS}")
    data = files("dyn4_gym").joinpath("data/chrono_runs")
    with data.joinpath(f"{name}.txt").open() as f:
        inputs = np.loadtxt(f)
    with data.joinpath(f"chrono_{name}.txt").open() as f:
        ref = np.loadtxt(f, delimiter=",", skiprows=1)
    return inputs, ref


def chrono_log(name: str) -> Log:
    """Run ``name`` as a log: Chrono's positions at its sample times, the inputs interpolated there."""
    inputs, ref = load_run(name)
    t = ref[:, 0]
    u = np.stack([np.interp(t, inputs[:, 0], inputs[:, j]) for j in (1, 2, 3)], -1)
    return Log(t, u, {"x": ref[:, 1], "y": ref[:, 2]}, f"chrono_{name}")
