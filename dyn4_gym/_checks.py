"""Configuration errors and the value checks every config dataclass uses (one place, dotted paths)."""

from __future__ import annotations

import math

__all__ = ["ConfigError", "is_num", "check_positive", "check_nonneg", "check_int"]


class ConfigError(ValueError):
    """A bad configuration value; the message starts with the key's dotted path."""


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
