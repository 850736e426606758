"""What the numpy faces check and convert at their edge: seeds, actions, infos."""

from __future__ import annotations

import math

import numbers

import numpy as np
import torch

from .. import _rng

__all__ = ["check_actions", "check_seed", "seed_keys", "seed_to_key", "to_numpy_info", "frozen_copy", "OwnSpec"]


def check_seed(seed, name: str = "seed"):
    """``None`` or an integer in ``[0, 2^64)`` (Python or numpy), as a Python int; else ``ValueError``."""
    if seed is None:
        return None
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (numbers.Integral, np.integer)):
        raise ValueError(f"{name} must be None or an integer in [0, 2**64), got {seed!r}")
    seed = int(seed)
    if not 0 <= seed < 2**64:
        raise ValueError(f"{name} must be None or an integer in [0, 2**64), got {seed}")
    return seed


def seed_keys(seeds) -> np.ndarray:
    """Row stream keys ``(n,)`` int64 from seeds in ``[0, 2^64)`` (numpy's entropy when ``None``),
    all 64 bits kept."""
    seeds = [int(np.random.SeedSequence().entropy % (2**64)) if s is None else check_seed(s) for s in seeds]
    return np.array([_rng.key_of_seed(s) for s in seeds], dtype=np.int64)


def seed_to_key(seeds) -> torch.Tensor:
    """:func:`seed_keys` as a torch long tensor."""
    return torch.from_numpy(seed_keys(seeds))


def check_actions(action, n: int | None, width: int = 2, name: str = "action") -> np.ndarray:
    """Validate an action (``n`` None: one ``(width,)`` action; else ``(n, width)``); never clips here.

    Raises ``ValueError`` for a wrong shape, a non-numeric dtype or a NaN/inf, so a bad call
    leaves the env untouched. ``name`` is what the message calls it.
    """
    try:
        a = np.asarray(action)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise ValueError(f"{name} must be array-like, got {type(action).__name__}") from exc
    if a.dtype.kind not in "fiu":  # float or integer; not bool, complex, object or strings
        raise ValueError(f"{name} must be a float array, got dtype {a.dtype}")
    want = (width,) if n is None else (n, width)
    if a.shape != want:
        raise ValueError(f"{name} must have shape {want}, got {a.shape}")
    a = np.ascontiguousarray(a, dtype=np.float64)
    # a finite sum means every entry is finite (cheap for the single env's two numbers); a
    # non-finite one may be an overflow of finite entries, so only then is each entry checked
    if not math.isfinite(a.sum()) and not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or inf")
    return a


def to_numpy_info(info: dict, row: int | None = None) -> dict:
    """Tensors or arrays (nested dicts) to numpy arrays, or to Python scalars for one ``row``."""
    out = {}
    for k, v in info.items():
        if isinstance(v, dict):
            out[k] = to_numpy_info(v, row)
        elif isinstance(v, (torch.Tensor, np.ndarray)):
            a = v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v
            out[k] = a if row is None else a[row].item()
        else:
            out[k] = v
    return out


def frozen_copy(value):
    """A deep copy of nested dicts, lists and tuples with every numpy array copied read-only."""
    if isinstance(value, dict):
        return {k: frozen_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(frozen_copy(v) for v in value)
    if isinstance(value, np.ndarray):
        a = value.copy()
        a.flags.writeable = False
        return a
    return value


class OwnSpec:
    """The ``spec`` attribute of the package's envs. ``gym.make`` and ``gym.make_vec`` set it with
    the caller's keyword arguments by reference (a grid map's array among them); it is kept as a
    copy, arrays read-only, so what the spec says the env was made with cannot change later."""

    def __set_name__(self, owner, name):
        self.attr = "_own_" + name

    def __get__(self, obj, objtype=None):
        return None if obj is None else obj.__dict__.get(self.attr)

    def __set__(self, obj, spec):
        if spec is not None and isinstance(getattr(spec, "kwargs", None), dict):
            import dataclasses

            spec = dataclasses.replace(spec, kwargs=frozen_copy(spec.kwargs))
        hook = getattr(obj, "_spec_set", None)
        obj.__dict__[self.attr] = spec if hook is None or spec is None else hook(spec)
