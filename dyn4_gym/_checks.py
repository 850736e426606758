"""Configuration errors and the value checks every config dataclass uses (one place, dotted paths)."""

from __future__ import annotations

import math

__all__ = ["ConfigError", "CheckpointError", "GroundKernelError", "is_num", "check_positive", "check_nonneg", "check_int", "check_range", "check_int_range"]


class ConfigError(ValueError):
    """A bad configuration value; the message starts with the key's dotted path."""


class CheckpointError(ValueError):
    """A policy or checkpoint file that cannot be loaded (missing, truncated, foreign or crafted).
    Here, beside ``ConfigError``, so the scripts' error handling (cli.py) needs no trainer."""


class GroundKernelError(RuntimeError):
    """A user's terrain kind broke its Numba ground's contract (``GroundKernel``: a ``pack()`` that
    returns the wrong rows, dtype or non-finite values; a sampler that raises, returns a
    non-finite value or does not compile). The message names the kind. Never a reason to fall
    back to the torch engine: the user's code is wrong, not the engine's reach (issue 46)."""


def is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_positive(path, v):
    if not (is_num(v) and 0 < v < math.inf):
        raise ConfigError(f"{path} must be a positive finite number, got {v!r}")


def check_nonneg(path, v):
    if not (is_num(v) and 0 <= v < math.inf):
        raise ConfigError(f"{path} must be a finite number >= 0, got {v!r}")


def check_int(path, v, lo):
    if not (isinstance(v, int) and not isinstance(v, bool) and v >= lo):
        raise ConfigError(f"{path} must be an integer >= {lo}, got {v!r}")


def check_range(path, v, lo, hi, lo_open: bool = False, hi_open: bool = False):
    """A finite number (not a bool) in ``[lo, hi]`` (open at either end on request)."""
    ok = is_num(v)
    if ok:
        try:
            f = float(v)
        except OverflowError:
            ok = False
        else:
            ok = math.isfinite(f) and (f > lo if lo_open else f >= lo) and (f < hi if hi_open else f <= hi)
    if not ok:
        lb, rb = "(" if lo_open else "[", ")" if hi_open else "]"
        raise ConfigError(f"{path} must be a number in {lb}{lo:g}, {hi:g}{rb}, got {v!r}")


def check_int_range(path, v, lo, hi):
    if not (isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi):
        raise ConfigError(f"{path} must be an integer in [{lo}, {hi}], got {v!r}")
