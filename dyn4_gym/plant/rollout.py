"""Roll a plant forward over a sequence of inputs."""

from __future__ import annotations

import torch

__all__ = ["rollout"]


def rollout(step, x0: torch.Tensor, inputs: torch.Tensor, p, g=None, hdt: float = 0.01) -> torch.Tensor:
    """States ``(T + 1, ..., n)`` from ``x0 (..., n)`` under ``inputs (T, ..., 2)``.

    ``step`` is :func:`bike_step` or :func:`dyn4_step`. Differentiable end to end; the loop is
    over time only (the batch stays one tensor).
    """
    if not isinstance(inputs, torch.Tensor) or inputs.ndim < 2 or inputs.shape[-1] != 2:
        raise ValueError(f"inputs must have shape (T, ..., 2), got {getattr(inputs, 'shape', type(inputs))}")
    xs = [x0]
    x = x0
    for u in inputs.unbind(0):
        x = step(x, u, p, g, hdt=hdt)
        xs.append(x)
    return torch.stack(xs, 0)
