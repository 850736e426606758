"""Standard manoeuvres on the plants: the envelope figures the tests gate and the demo prints.

Each function runs a batch of scenarios in one torch batch, without gradients, and returns
plain numbers and numpy traces. All speeds m/s, distances m, accelerations m/s^2.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..ground import Flat, Ground
from .corners import forces_at
from .dyn4 import dyn4_rest, dyn4_step, slip_angles
from .energy import sum_books
from .spec import HUMVEE
from .state import DYN4

__all__ = ["wheel_loads", "stop", "skidpad", "circle", "mu_split_stop", "bump", "bump_peaks", "weave", "kinematic_stop", "ramp_steer"]


def wheel_loads(x: torch.Tensor, p, g: Ground | None = None) -> torch.Tensor:
    """The four corner loads ``(..., 4)`` [N] (FL, FR, RL, RR) at state ``x``."""
    return forces_at(x, x[..., DYN4.DELTA], x[..., DYN4.A], p, Flat() if g is None else g).Fz


def _start(p, g, v0: float, n: int = 1, X: float = 0.0, Y: float = 0.0) -> torch.Tensor:
    x = dyn4_rest(p, g, (n,), X=X, Y=Y)
    return torch.cat((x[..., :DYN4.VX], torch.full_like(x[..., DYN4.VX:DYN4.VX + 1], v0), x[..., DYN4.VX + 1:]), -1)


def _full_brake(p, g, v0: float, hdt: float, steps: int, stop_below: float | None = None):
    """Full brake, steering straight, from ``v0``: the trace ``(T, 14)`` and the summed books."""
    x = _start(p, g, v0)
    u = torch.stack((torch.zeros_like(p.a_brake), -p.a_brake)).expand(1, 2).to(x)
    trace, books = [x], []
    for _ in range(steps):
        x, b = dyn4_step(x, u, p, g, hdt, books=True)
        trace.append(x)
        books.append(b)
        if stop_below is not None and float(x[0, DYN4.VX]) < stop_below:
            break
    return torch.stack(trace, 0)[:, 0], sum_books(books)


@torch.no_grad()
def stop(p, g: Ground | None = None, v0: float = 20.0, hdt: float = 0.01, t_max: float = 20.0) -> dict:
    """Full-brake stop from ``v0``: distance from the brake command to ``vx < 0.01``."""
    tr, books = _full_brake(p, Flat() if g is None else g, v0, hdt, int(t_max / hdt), stop_below=0.01)
    dist = float(torch.hypot(tr[-1, 0] - tr[0, 0], tr[-1, 1] - tr[0, 1]))
    return dict(distance=dist, time=(len(tr) - 1) * hdt, trace=tr.numpy(), books=books)


@torch.no_grad()
def skidpad(p, g: Ground | None = None, deltas=(0.08, 0.12, 0.18, 0.26), v0: float = 4.0,
            ramp: float = 0.4, hdt: float = 0.01, window: float = 1.0, t_max: float = 60.0) -> dict:
    """Peak sustained body lateral acceleration ``vy' + r vx`` at fixed steer, speed ramped.

    For each steer angle (one batch row each) a speed loop drives the target speed up from
    ``v0`` at ``ramp`` m/s^2; the lateral acceleration is averaged over ``window`` seconds and
    its maximum taken while the car is still turning (yaw rate positive). Returns the max over
    the steer angles and the per-angle figures.
    """
    g = Flat() if g is None else g
    n = len(deltas)
    x = _start(p, g, v0, n)
    d = torch.as_tensor(deltas, dtype=x.dtype)
    ay_hist = []
    for k in range(int(t_max / hdt)):
        v_t = v0 + ramp * k * hdt
        a_cmd = (1.5 * (v_t - x[:, DYN4.VX])).clamp(-2.0, float(p.a_drive))
        x1 = dyn4_step(x, torch.stack((d, a_cmd), -1), p, g, hdt)
        ay = (x1[:, DYN4.VY] - x[:, DYN4.VY]) / hdt + x1[:, DYN4.R] * x1[:, DYN4.VX]
        ay = torch.where(x1[:, DYN4.R] > 0, ay, torch.zeros_like(ay))
        ay_hist.append(ay)
        x = x1
    hist = torch.stack(ay_hist, 0).numpy()
    w = int(window / hdt)
    kernel = np.ones(w) / w
    per = [float(np.convolve(hist[:, i], kernel, mode="valid").max()) for i in range(n)]
    return dict(ay_max=max(per), per_delta=dict(zip(deltas, per)))


@torch.no_grad()
def circle(p, g: Ground | None = None, deltas=(0.15, 0.30, 0.45), v: float = 3.0, hdt: float = 0.01,
           t: float = 20.0) -> dict:
    """Steer held at each ``delta`` at speed ``v``: the rear axle's circle radius vs ``L / tan(delta)``."""
    g = Flat() if g is None else g
    x = _start(p, g, v, len(deltas))
    d = torch.as_tensor(deltas, dtype=x.dtype)
    for _ in range(int(t / hdt)):
        a_cmd = 2.0 * (v - x[:, DYN4.VX])
        x = dyn4_step(x, torch.stack((d, a_cmd), -1), p, g, hdt)
    vx, vy, r = x[:, DYN4.VX], x[:, DYN4.VY], x[:, DYN4.R]
    radius = torch.hypot(vx, vy - r * p.lr) / r
    kin = p.L / torch.tan(d)
    return dict(radius=radius.numpy(), kinematic=kin.numpy(), rel_error=(radius / kin - 1).numpy())


@torch.no_grad()
def ramp_steer(p, g: Ground | None = None, v: float = 20.0, rate: float = 0.2, hdt: float = 0.01,
               fit=(0.1, 0.4)) -> dict:
    """A constant-speed ramp steer (ISO 13674-2's slow ramp; SAE J266's steady-state method): the
    steer of the virtual centre wheel rises at ``rate`` deg/s while a speed loop holds ``v``,
    until the lateral acceleration passes ``fit[1]`` g or the steer hits its limit.

    Returns the understeer gradient ``K`` [deg/g], the slope of ``delta - L kappa`` (the steer
    beyond Ackermann's for the path's curvature ``kappa = r / v``) against ``a_y / g`` with
    ``a_y = v r``, fitted by least squares over ``fit`` g; and the traces. ``K > 0``: understeer.
    """
    g = Flat() if g is None else g
    x = _start(p, g, v)
    gravity = float(p.g)
    delta, ay, kappa = [], [], []
    n = int(float(p.delta_max) / math.radians(rate) / hdt)
    for k in range(n):
        d = torch.full_like(x[:, DYN4.DELTA], math.radians(rate) * k * hdt)
        a_cmd = 2.0 * (v - x[:, DYN4.VX])
        x = dyn4_step(x, torch.stack((d, a_cmd), -1), p, g, hdt)
        speed = float(torch.hypot(x[0, DYN4.VX], x[0, DYN4.VY]))
        delta.append(float(x[0, DYN4.DELTA]))
        ay.append(speed * float(x[0, DYN4.R]) / gravity)
        kappa.append(float(x[0, DYN4.R]) / speed)
        if ay[-1] > fit[1] + 0.05:
            break
    delta, ay, kappa = np.array(delta), np.array(ay), np.array(kappa)
    excess = np.degrees(delta - float(p.L) * kappa)
    sel = (ay >= fit[0]) & (ay <= fit[1])
    K = float(np.polyfit(ay[sel], excess[sel], 1)[0])
    return dict(K=K, delta=delta, ay=ay, kappa=kappa, excess=excess)


@torch.no_grad()
def mu_split_stop(p, g: Ground, v0: float = 20.0, hdt: float = 0.01, t: float = 1.8) -> dict:
    """Full brake from ``v0`` on a split ground, steering fixed straight: yaw after ``t`` s."""
    tr, books = _full_brake(p, g, v0, hdt, int(t / hdt))
    return dict(yaw=float(tr[-1, DYN4.PSI]), trace=tr.numpy(), books=books)


def _bump_ahead(p, v: float, height: float, radius: float):
    """The bump of :func:`bump` and :func:`bump_peaks`: on the front-left wheel's track, its
    centre ``2 + v`` m ahead of the origin (a second's drive from a car started there at ``v``)."""
    from ..ground import Bump

    return Bump(x=2.0 + v, y=float(p.y_w[..., 0]), height0=height, radius=radius)


def _hold_speed(x, v: float, p, g, hdt: float, books: bool = False):
    """One straight substep with the speed held at ``v`` (a proportional loop, 2/s)."""
    a_cmd = 2.0 * (v - x[:, DYN4.VX])
    return dyn4_step(x, torch.stack((torch.zeros_like(a_cmd), a_cmd), -1), p, g, hdt, books=books)


@torch.no_grad()
def bump(p, height: float = 0.1, v: float = 5.0, hdt: float = 0.01, t: float = 3.0) -> dict:
    """Drive straight at ``v`` over a bump under the front-left wheel's track.

    Returns the peak load of each wheel over its static load, and the load trace.
    """
    g = _bump_ahead(p, v, height, 0.5)
    x = _start(p, g, v, X=0.0)
    loads = [wheel_loads(x, p, g)]
    trace, books = [x], []
    for _ in range(int(t / hdt)):
        x, b = _hold_speed(x, v, p, g, hdt, books=True)
        loads.append(wheel_loads(x, p, g))
        trace.append(x)
        books.append(b)
    Fz = torch.stack(loads, 0)[:, 0]
    peak = (Fz.max(0).values / p.Fz0).numpy()
    return dict(peak_ratio=peak, loads=Fz.numpy(), trace=torch.stack(trace, 0)[:, 0].numpy(), ground=g,
                books=sum_books(books))


@torch.no_grad()
def bump_peaks(p, height: float = 0.1, radius: float = 0.5, v: float = 20.0, phases=(0.0,), hdt: float = 0.01,
               t: float | None = None) -> np.ndarray:
    """The front-left wheel's peak load over its static load ``(len(phases),)``, driving straight
    at ``v`` over :func:`bump`'s bump of ``height`` and ``radius`` (length ``2 radius``), one row
    a sample phase: row ``j`` starts ``phases[j] v hdt`` further back, so its substeps sample the
    profile ``phases[j]`` of a step later (phases in [0, 1); issue 45's bump gate). ``t`` [s]
    defaults to the front wheel's crossing plus 1 s."""
    g = _bump_ahead(p, v, height, radius)
    shift = torch.tensor([-float(ph) * v * hdt for ph in phases], dtype=p.dtype)
    x = _start(p, g, v, n=len(phases), X=shift)
    t = (g.x + radius - float(p.x_w[..., 0])) / v + 1.0 if t is None else t
    peak = wheel_loads(x, p, g)[:, 0]
    for _ in range(int(round(t / hdt))):
        x = _hold_speed(x, v, p, g, hdt)
        peak = torch.maximum(peak, wheel_loads(x, p, g)[:, 0])
    return (peak / p.Fz0[..., 0]).numpy()


@torch.no_grad()
def weave(p, g: Ground | None = None, hdt: float = 0.01, t: float = 8.0, v: float = 12.0, amp: float = 0.5,
          freq: float = 0.2, peak_slip: float = HUMVEE.tire_peak_slip, drive: float | None = None) -> dict:
    """A ``freq`` Hz steering weave of amplitude ``amp`` rad from ``v`` m/s, with books.

    The drive command holds the speed (a proportional loop, 1/s) or, with ``drive`` [m/s^2],
    is that constant.

    Returns the per-step books (a list), their sum, the share of steps with a tire past its
    peak slip angle (``peak_slip``), and the trace.
    """
    g = Flat() if g is None else g
    x = _start(p, g, v)
    books, trace, past = [], [x], 0
    n = int(round(t / hdt))
    for k in range(n):
        d = amp * math.sin(2 * math.pi * freq * k * hdt)
        a_cmd = v - x[:, DYN4.VX] if drive is None else torch.full_like(x[:, DYN4.A], drive)
        u = torch.stack((torch.full_like(x[:, DYN4.DELTA], d), a_cmd), -1)
        x, b = dyn4_step(x, u, p, g, hdt, books=True)
        books.append(b)
        trace.append(x)
        past += int(slip_angles(x, p).abs().max() > peak_slip)
    return dict(steps=books, books=sum_books(books), past_peak=past / n, trace=torch.stack(trace, 0)[:, 0].numpy())


def kinematic_stop(v0: float, mu: float, g: float = 9.81) -> float:
    """``v^2 / (2 mu g)`` [m]."""
    return v0 * v0 / (2.0 * mu * g)


