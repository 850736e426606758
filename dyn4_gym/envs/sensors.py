"""The optional sensors' torch side (EnvConfig.sensors; docs/env.md, "Sensors"): range finders to
the corridor's edges and a patch of the ground ahead, batched and differentiable in the car's pose.

The Numba engine computes the same in ``engine/numba_task._sensors_row``; both lay their entries
out from model.task (``sensor_names``, ``beam_angles``, ``patch_points``, ``range_window``), and
tests/test_sensors_issue47.py holds them equal to 1e-9 in float64.

The corridor's edges are the centre line's points moved along each point's normal (the course
heading's left) by the corridor's width on that side there, joined by straight segments: the polylines the task's corridor
check approximates to the centre line's sampling. A beam starts at the centre of mass, in the
ground plane, and reads the distance to its first crossing of either edge among the segments in
a window around the car's course segment (model.task.range_window), ``max_range`` where it
crosses none.
"""

from __future__ import annotations

import torch

__all__ = ["range_finder", "ground_patch"]


def _edges(course_xy, course_heading, j, widths):
    """Both edges' points at course points ``j (B, W)``: ``(B, 2W, 2)``, the left edge's first;
    ``widths (N, 2)`` the corridor's right and left of each point."""
    p = torch.gather(course_xy, 1, j.unsqueeze(-1).expand(*j.shape, 2))
    th = torch.gather(course_heading, 1, j)
    normal = torch.stack((-torch.sin(th), torch.cos(th)), -1)
    w = widths[j]  # (B, W, 2)
    return torch.cat((p + normal * w[..., 1:], p - normal * w[..., :1]), 1)


def range_finder(course_xy: torch.Tensor, course_heading: torch.Tensor, idx: torch.Tensor, widths: torch.Tensor,
                 origin: torch.Tensor, psi: torch.Tensor, angles: torch.Tensor, max_range: float,
                 window: int) -> torch.Tensor:
    """[m] Each beam's distance to the corridor's edge: ``(B, len(angles))``.

    ``course_xy (B, N, 2)`` / ``course_heading (B, N)``: the rows' courses, ``widths (N, 2)`` [m]
    their corridor's right and left of each point (course.course_widths); ``idx (B,)`` the car's
    course segment (the last projection's); ``origin (B, 2)`` [m] and ``psi (B,)`` [rad] the car's
    position and yaw (world frame); ``angles (K,)`` [rad] the beams from the heading. A beam
    crossing no edge segment within ``max_range`` reads ``max_range``. Differentiable in
    ``origin`` and ``psi`` (the crossing that is nearest carries the gradient).
    """
    n = course_xy.shape[1]
    offs = torch.arange(-window, window + 1, device=idx.device)
    j = (idx.unsqueeze(-1) + offs).clamp(0, n - 2)  # (B, W) segments j -> j + 1
    with torch.no_grad():  # the course is data, not a function of the car
        p0 = _edges(course_xy, course_heading, j, widths)
        seg = _edges(course_xy, course_heading, j + 1, widths) - p0  # (B, 2W, 2)
    a = psi.unsqueeze(-1) + angles  # (B, K)
    dx, dy = torch.cos(a).unsqueeze(-1), torch.sin(a).unsqueeze(-1)  # (B, K, 1)
    wx = (p0[..., 0] - origin[:, 0:1]).unsqueeze(1)  # (B, 1, 2W)
    wy = (p0[..., 1] - origin[:, 1:2]).unsqueeze(1)
    ex, ey = seg[..., 0].unsqueeze(1), seg[..., 1].unsqueeze(1)
    # origin + t d = p0 + u seg: t = (w x seg) / (d x seg), u = (w x d) / (d x seg)
    den = dx * ey - dy * ex  # (B, K, 2W)
    parallel = den == 0.0
    den = torch.where(parallel, torch.ones_like(den), den)  # no crossing; a finite quotient keeps the gradient finite
    t = (wx * ey - wy * ex) / den
    u = (wx * dy - wy * dx) / den
    hit = ~parallel & (u >= 0.0) & (u <= 1.0) & (t > 0.0) & (t < max_range)
    return torch.where(hit, t, torch.full_like(t, max_range)).amin(-1)


def ground_patch(terrain, origin: torch.Tensor, psi: torch.Tensor, points: torch.Tensor):
    """The ground at the patch: ``(mu (B, P), height (B, P))``, the height [m] over the ground's
    under ``origin``. ``points (P, 2)`` [m] in the body frame (x ahead, y left), turned by ``psi
    (B,)`` and moved to ``origin (B, 2)``; ``terrain`` the rows' ground (its ``(mu, height)`` at
    world points)."""
    c, s = torch.cos(psi).unsqueeze(-1), torch.sin(psi).unsqueeze(-1)
    px, py = points[:, 0], points[:, 1]
    world = torch.stack((origin[:, 0:1] + c * px - s * py, origin[:, 1:2] + s * px + c * py), -1)  # (B, P, 2)
    mu, h = terrain(torch.cat((origin.unsqueeze(1), world), 1))
    return mu[:, 1:], h[:, 1:] - h[:, :1]
