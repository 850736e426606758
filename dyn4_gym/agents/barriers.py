"""Smooth surrogates of the race's termination (issue 44): what a gradient through the plant can
feel of the two limits that end an episode early, the corridor's edge and the roll limit.

The termination itself is a flag with no pathwise gradient (replaying SHAC's crashes 10-30 steps
before, d(return)/d(throttle) stayed positive: issue 44), so a learner that backpropagates
through the plant needs a term that grows smoothly as the car nears a limit:

    barrier = w_edge relu(|e| - (h - edge))^2 + w_roll relu(|phi| - roll_frac phi_max)^2

with ``e`` the cross-track error [m], ``h`` the corridor's half width [m], ``phi`` the roll angle
[rad] and ``phi_max`` the env's roll limit. Zero (with a zero gradient) well inside both limits, so
it changes nothing for a car that keeps away from them. The oracle adds it to its loss
(:mod:`dyn4_gym.agents.oracle`); SHAC subtracts it from its training reward
(``SHACConfig.edge_barrier``, ``roll_barrier``); the task's reward and metric stay the env's.
"""

from __future__ import annotations

import torch

__all__ = ["termination_barrier"]


def termination_barrier(cross_track: torch.Tensor, roll: torch.Tensor, half_width: float, roll_limit: float,
                        edge: float, w_edge: float, roll_frac: float, w_roll: float) -> torch.Tensor:
    """The barrier ``(B,)`` (units of the weights: ``w_edge`` per m^2, ``w_roll`` per rad^2):
    ``cross_track`` [m] and ``roll`` [rad] each ``(B,)``; the corridor's barrier starts ``edge``
    [m] inside its edge, the roll's at ``roll_frac`` of ``roll_limit`` [rad]."""
    over_edge = torch.relu(cross_track.abs() - (half_width - edge))
    over_roll = torch.relu(roll.abs() - roll_frac * roll_limit)
    return w_edge * over_edge**2 + w_roll * over_roll**2
