"""Driving the four-wheel plant through the powertrain: ``drive_step`` and ``drive_rollout``
(docs/plant.md, "Powertrain").

Driver inputs ``(..., 3)`` or ``(..., 4)`` per row: ``steer`` in [-1, 1] of the max steer,
``throttle`` and ``brake`` in [0, 1], and optionally ``direction`` (+1 forward, the default; -1
reverse). Inputs outside their range are clamped, as a pedal stops at the floor.
"""

from __future__ import annotations

import torch

from ..ground import Flat, Ground
from .dyn4 import dyn4_drive_step, dyn4_rest
from .params import Dyn4Params
from .powertrain import PowertrainParams, crank_update, powertrain_books, powertrain_forces, powertrain_rest, select_gear
from .state import DYN4

__all__ = ["drive_step", "drive_rollout", "split_driver"]


def split_driver(driver: torch.Tensor):
    """``(steer, throttle, brake, direction)``, each (...), clamped to their ranges."""
    if not isinstance(driver, torch.Tensor) or driver.shape[-1] not in (3, 4):
        raise ValueError("driver inputs must be a tensor of shape (..., 3) = (steer, throttle, brake) or (..., 4) with a "
                         f"direction, got {getattr(driver, 'shape', type(driver))}")
    steer = driver[..., 0].clamp(-1.0, 1.0)
    throttle = driver[..., 1].clamp(0.0, 1.0)
    brake = driver[..., 2].clamp(0.0, 1.0)
    if driver.shape[-1] == 4:
        direction = torch.where(driver[..., 3] < 0, -torch.ones_like(steer), torch.ones_like(steer))
    else:
        direction = torch.ones_like(steer)
    return steer, throttle, brake, direction


def drive_step(x: torch.Tensor, s: torch.Tensor, driver: torch.Tensor, p: Dyn4Params, pt: PowertrainParams,
               g: Ground | None = None, hdt: float = 0.01, books: bool = False, f_ext: torch.Tensor | None = None):
    """One substep from plant state ``x (..., 14)`` and powertrain state ``s (..., 3)`` under
    driver inputs ``driver (..., 3 or 4)``. Returns ``(x+, s+)``; with ``books=True``,
    ``(x+, s+, Books, PowertrainBooks)``. Differentiable in everything but the gear choice."""
    if not isinstance(s, torch.Tensor) or s.shape[-1:] != (3,):
        raise ValueError(f"powertrain state must be a tensor of shape (..., 3), got {getattr(s, 'shape', type(s))}")
    steer, throttle, brake, direction = split_driver(driver)
    vx = x[..., DYN4.VX]
    s = select_gear(s, direction, vx, pt, hdt)
    pf = powertrain_forces(s, throttle, brake, vx, pt)
    out = dyn4_drive_step(x, steer * p.delta_max, pf.drive, p, g, hdt, books=books, f_ext=f_ext)
    s1 = crank_update(s, pf, pt, hdt)
    if not books:
        return out, s1
    x1, bk, work = out
    return x1, s1, bk, powertrain_books(s, s1, pf, work, pt, hdt)


def drive_rollout(p: Dyn4Params, pt: PowertrainParams, g: Ground | None = None, inputs: torch.Tensor | None = None,
                  hdt: float = 0.01, x0: torch.Tensor | None = None, s0: torch.Tensor | None = None,
                  powertrain: bool = False):
    """Plant states ``(T + 1, ..., 14)`` under driver inputs ``(T, ..., 3 or 4)``.

    From ``x0`` / ``s0`` or, by default, at rest at the origin heading +X on ``g`` with the engine
    idling in first gear. ``powertrain=True`` also returns the powertrain states ``(T + 1, ..., 3)``.
    The loop is over time only.
    """
    if not isinstance(inputs, torch.Tensor) or inputs.ndim < 2 or inputs.shape[-1] not in (3, 4):
        raise ValueError(f"inputs must have shape (T, ..., 3 or 4), got {getattr(inputs, 'shape', type(inputs))}")
    g = Flat() if g is None else g
    batch = inputs.shape[1:-1]
    x = dyn4_rest(p, g, batch_shape=batch) if x0 is None else x0
    s = powertrain_rest(pt, batch, dtype=p.dtype, device=p.device) if s0 is None else s0
    xs, ss = [x], [s]
    for u in inputs.unbind(0):
        x, s = drive_step(x, s, u, p, pt, g, hdt)
        xs.append(x)
        ss.append(s)
    states = torch.stack(xs, 0)
    return (states, torch.stack(ss, 0)) if powertrain else states

