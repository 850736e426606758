"""The plants' flat state vectors: named indices (their home, with units and frames, is
:mod:`dyn4_gym.model.state`) and :func:`dyn4_state`, a state from named entries."""

from __future__ import annotations

from ..model.state import BIKE, BIKE_NAMES, DYN4, DYN4_NAMES, N_DYN4, WHEELS

__all__ = ["BIKE", "DYN4", "BIKE_NAMES", "DYN4_NAMES", "WHEELS", "dyn4_state", "with_entries"]


def dyn4_state(dtype=None, device=None, **named):
    """A ``(N_DYN4,)`` four-wheel state from named entries, the rest 0: ``dyn4_state(vx=10.0, delta=0.1)``."""
    import torch

    x = torch.zeros(N_DYN4, dtype=dtype or torch.float64, device=device)
    for k, v in named.items():
        try:
            x[DYN4[k.upper()]] = v
        except KeyError:
            raise TypeError(f"unknown state entry {k!r}; entries are {DYN4_NAMES}") from None
    return x


def with_entries(x, named: dict):
    """The state ``x (..., n)`` with the entries in ``named`` (index -> ``(...)`` tensor) replaced
    and every other carried over unchanged: a stage writes its own entries only, so a state grown
    past today's (a schema entry appended to :class:`~dyn4_gym.model.state.DYN4`) passes through
    it (issue 49). Differentiable; one ``stack``."""
    import torch

    return torch.stack([named[i] if i in named else x[..., i] for i in range(x.shape[-1])], -1)
