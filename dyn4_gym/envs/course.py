"""Courses: seeded, smooth, curvature-bounded centre lines, and a differentiable projection.

A course is sampled every ``spacing`` metres of arc length: points ``(B, N, 2)`` and unwrapped
headings ``(B, N)``. Its curvature is a normalised sum of sine waves in arc length,
``kappa(s) = kappa_max sum_k a_k sin(2 pi s / lambda_k + phi_k) / sum_k a_k``, faded in over the
straight lead-in, so ``|kappa| <= kappa_max = lat_accel / v_target^2``: drivable at the target
speed with ``lat_accel`` of lateral acceleration. Heading and position integrate it with the
midpoint rule. The car starts at the origin heading along +X.

The projection searches a short window of segments around the last index (no search over the
whole course), picks the nearest with the gradient cut, then measures in it: arc length
``s = (j + lambda) spacing``, signed cross-track ``e`` (left +: the distance to the segment's line
beside it, to its end point past an end, so ``e`` is continuous on the outside of a bend) and
the interpolated course heading, all differentiable in the query point.
"""

from __future__ import annotations

import math

import torch

__all__ = ["make_courses", "centre_line_course", "course_widths", "widths_at", "corridor_edges", "course_points", "goal_arc", "project", "preview_points",
           "wrap_angle"]


def course_points(c) -> int:
    """N, the points every course of the course config ``c`` has (both engines' courses):
    ``round(length / spacing) + 1`` (a centre line's ``length`` is its arc length down to whole
    spacings, CourseConfig)."""
    return int(round(c.length / c.spacing)) + 1


# [m] How far from the world origin a course may reach on the torch engine in float32 (issue 46).
# A float32 position is rounded to half an ulp, |X| 6e-8, and every substep adds a move of 0.05-0.4
# m to it, so the rounding grows with the distance. Measured on one course shifted from the origin
# (torch float32 against float64, which matches the Numba engine to 1e-9; 51 steps): the return
# differs by 4e-6 at the origin, 6e-4 at 1 km, 5e-3 at 10 km, 9e-2 at 100 km. Up to the longest
# course the config draws (10 km) float32 runs; beyond it the float32 torch engine refuses
# the course, and float64 (or the Numba engine, float64 always) runs it exactly.
FLOAT32_REACH = 1e4


def course_reach(c) -> float:
    """[m] How far from the world origin a course config ``c`` reaches: its given centre line's
    largest coordinate, or a drawn course's length (a drawn course starts at the origin)."""
    import numpy as np

    if c.centre_line is not None:
        return float(np.abs(np.asarray(c.centre_line, dtype=np.float64)).max())
    return float(c.length)


def goal_arc(c) -> float:
    """[m] The arc length that finishes a course of the course config ``c``: its last point's,
    ``(N - 1) spacing``, less ``goal_margin``. TaskCore.goal gives the same from a state's
    points, as the numba kernels' ``_goal`` does from theirs."""
    return (course_points(c) - 1) * c.spacing - c.goal_margin


def _arc(pts):
    """The cumulative arc length ``(M,)`` [m] of a polyline ``pts (M, 2)`` (numpy), from 0."""
    import numpy as np

    return np.concatenate(([0.0], np.cumsum(np.hypot(np.diff(pts[:, 0]), np.diff(pts[:, 1])))))


def centre_line_course(points, spacing: float):
    """A user's centre line ``points (M, 2)`` [m, world frame] resampled every ``spacing`` metres of
    its arc length: ``(xy (N, 2), heading (N,))`` as float64 numpy arrays, ``N = floor(L / spacing)
    + 1`` for its length ``L``. The heading at a point is the mean of its two segments' directions
    (unwrapped; a segment's alone at the ends). Both engines take the course from here."""
    import numpy as np

    pts = np.asarray(points, dtype=np.float64)
    s = _arc(pts)
    n = int(math.floor(s[-1] / spacing + 1e-9)) + 1
    t = np.arange(n) * spacing
    xy = np.stack((np.interp(t, s, pts[:, 0]), np.interp(t, s, pts[:, 1])), -1)
    d = np.diff(xy, axis=0)
    th = np.unwrap(np.arctan2(d[:, 1], d[:, 0]))
    heading = np.concatenate(([th[0]], 0.5 * (th[1:] + th[:-1]), [th[-1]]))
    return xy, heading


def course_widths(c):
    """The corridor's widths ``(N, 2)`` [m] at each of the course's points (course_points(c) of
    them), right then left of the centre line, as float64 numpy: ``c.widths`` (given per point of
    ``c.centre_line``) interpolated in its arc length onto the resampled line, or ``c.half_width``
    on both sides everywhere. Both engines take them from here."""
    import numpy as np

    if c.widths is None:
        return np.full((course_points(c), 2), float(c.half_width))
    s = _arc(np.asarray(c.centre_line, dtype=np.float64))
    t = np.arange(course_points(c)) * c.spacing
    w = np.asarray(c.widths, dtype=np.float64)
    return np.stack((np.interp(t, s, w[:, 0]), np.interp(t, s, w[:, 1])), -1)


def widths_at(widths: torch.Tensor, j: torch.Tensor, s: torch.Tensor, spacing: float):
    """The corridor's ``(right, left)`` widths [m] at arc length ``s (B,)`` on segment ``j (B,)``
    (course.project's), linear along the segment; ``widths (N, 2)`` (:func:`course_widths`)."""
    lam = s / spacing - j.to(s.dtype)
    w0, w1 = widths[j], widths[j + 1]
    w = w0 + lam.unsqueeze(-1) * (w1 - w0)
    return w[:, 0], w[:, 1]


def corridor_edges(xy, heading, widths):
    """The corridor's edges as numpy polylines ``(left (N, 2), right (N, 2))`` [m]: the centre
    line's points ``xy (N, 2)`` moved along their normals (``heading (N,)``'s left) by ``widths
    (N, 2)`` (right, left; :func:`course_widths`): what the renderer draws and the range finders
    (envs/sensors.py, the kernel's) meet."""
    import numpy as np

    normal = np.stack((-np.sin(heading), np.cos(heading)), -1)
    return xy + normal * widths[:, 1:], xy - normal * widths[:, :1]


def make_courses(u: torch.Tensor, cfg, target_speed: torch.Tensor):
    """Centre lines from uniforms ``u (B, 3 n_waves)``; returns ``(xy (B, N, 2), heading (B, N))``.
    With ``cfg.centre_line`` every row gets that line (:func:`centre_line_course`) instead."""
    c = cfg
    B = u.shape[0]
    if c.centre_line is not None:
        xy, heading = centre_line_course(c.centre_line, c.spacing)
        kw = dict(dtype=target_speed.dtype, device=u.device)
        return (torch.as_tensor(xy, **kw).expand(B, -1, -1).contiguous(),
                torch.as_tensor(heading, **kw).expand(B, -1).contiguous())
    n = course_points(c)
    dt = target_speed.dtype
    s = torch.arange(n, dtype=dt, device=u.device) * c.spacing
    k = c.n_waves
    amp = 0.5 + 0.5 * u[:, :k]
    lam = c.wavelength_min + (c.wavelength_max - c.wavelength_min) * u[:, k:2 * k]
    phase = 2 * math.pi * u[:, 2 * k:3 * k]
    waves = (amp[:, None, :] * torch.sin(2 * math.pi * s[None, :, None] / lam[:, None, :] + phase[:, None, :])).sum(-1)
    kappa_max = c.lat_accel / target_speed**2
    fade = torch.ones_like(s) if c.lead_in <= 0 else (s / c.lead_in).clamp(0.0, 1.0)
    fade = fade * fade * (3 - 2 * fade)  # smoothstep
    kappa = kappa_max[:, None] * waves / amp.sum(-1, keepdim=True) * fade
    dth = 0.5 * (kappa[:, 1:] + kappa[:, :-1]) * c.spacing
    heading = torch.cat((torch.zeros(B, 1, dtype=dt, device=u.device), torch.cumsum(dth, -1)), -1)
    mid = 0.5 * (heading[:, 1:] + heading[:, :-1])
    step = torch.stack((torch.cos(mid), torch.sin(mid)), -1) * c.spacing
    xy = torch.cat((torch.zeros(B, 1, 2, dtype=dt, device=u.device), torch.cumsum(step, 1)), 1)
    return xy, heading


def _gather_pts(xy, idx):
    """``xy (B, N, 2)`` at ``idx (B, W)`` -> ``(B, W, 2)``."""
    return torch.gather(xy, 1, idx.unsqueeze(-1).expand(*idx.shape, 2))


def wrap_angle(a: torch.Tensor) -> torch.Tensor:
    """Wrap to ``(-pi, pi]`` (differentiable away from the cut)."""
    return torch.atan2(torch.sin(a), torch.cos(a))


def project(xy_course, heading, idx, point, spacing: float, back: int = 2, fwd: int = 6):
    """Project ``point (B, 2)`` onto the course near segment ``idx (B,)``.

    Returns ``(idx, s, e, course_heading)``: the new segment index (long, no gradient), arc
    length [m], signed cross-track [m] and the course heading [rad] at the foot point.
    """
    n = xy_course.shape[1]
    offs = torch.arange(-back, fwd + 1, device=idx.device)
    cand = (idx.unsqueeze(-1) + offs).clamp(0, n - 2)
    with torch.no_grad():
        p0 = _gather_pts(xy_course, cand)
        d = _gather_pts(xy_course, cand + 1) - p0
        rel = point.detach().unsqueeze(1) - p0
        lam = ((rel * d).sum(-1) / (d * d).sum(-1)).clamp(0.0, 1.0)
        dist2 = ((rel - lam.unsqueeze(-1) * d) ** 2).sum(-1)
        j = torch.gather(cand, 1, dist2.argmin(-1, keepdim=True)).squeeze(-1)
    p0 = _gather_pts(xy_course, j.unsqueeze(-1)).squeeze(1)
    d = _gather_pts(xy_course, (j + 1).unsqueeze(-1)).squeeze(1) - p0
    rel = point - p0
    dd = (d * d).sum(-1)
    lam_free = (rel * d).sum(-1) / dd
    lam = lam_free.clamp(0.0, 1.0)
    cross = d[..., 0] * rel[..., 1] - d[..., 1] * rel[..., 0]
    # beside the segment: the signed distance to its line; past an end (the outside of a bend):
    # the distance to that end point, signed by side, so e is continuous where the nearest
    # segment changes there
    inside = (lam_free > 0.0) & (lam_free < 1.0)
    foot2 = ((rel - lam.unsqueeze(-1) * d) ** 2).sum(-1)
    dist = torch.sqrt(torch.where(inside, torch.ones_like(foot2), foot2))
    e = torch.where(inside, cross / torch.sqrt(dd), torch.where(cross >= 0, dist, -dist))
    s = (j.to(point.dtype) + lam) * spacing
    h0 = torch.gather(heading, 1, j.unsqueeze(-1)).squeeze(-1)
    h1 = torch.gather(heading, 1, (j + 1).unsqueeze(-1)).squeeze(-1)
    return j, s, e, h0 + lam * (h1 - h0)


def preview_points(xy_course, s: torch.Tensor, ahead: torch.Tensor, spacing: float):
    """World points ``(B, K, 2)`` of the centre line at arc lengths ``s + ahead`` (clamped to the end)."""
    n = xy_course.shape[1]
    st = (s.unsqueeze(-1) + ahead).clamp(0.0, (n - 1) * spacing)
    f = st / spacing
    j = f.detach().floor().long().clamp(0, n - 2)
    lam = (f - j.to(f.dtype)).unsqueeze(-1)
    p0, p1 = _gather_pts(xy_course, j), _gather_pts(xy_course, j + 1)
    return p0 + lam * (p1 - p0)
