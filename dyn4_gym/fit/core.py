"""System identification through the differentiable plant: fit a preset's fields to recorded runs.

The loss is a teacher-forced multiple-shooting one (so a long run never explodes): each log is cut
into segments of ``FitConfig.segment`` seconds, all rolled out at once as rows of one batch of the
torch plant (float64, :func:`dyn4_gym.plant.drive.drive_step` on level ground of friction ``mu``).
Each segment starts from its *anchor*: the plant state the previous segment ended in, with what
the log measured written over it (pose, speed and yaw rate, each a local quadratic fit of the
samples within ``smooth`` seconds, so noise is not copied into the start; the engine's speed
scaled with the car's). The residuals are the predicted outputs at every sample against the
recorded ones, each over its noise scale (``FitConfig.noise``), plus the priors.

The optimiser is L-BFGS on the gradient autograd takes through every substep (and through the
spec sheet's derivation, :func:`dyn4_gym.plant.dyn4_params`, plain Python numbers, by its central
differences), in coordinates whitened by the Gauss-Newton curvature of the round's start (the
residuals' Jacobian by central differences), so a flat direction and a steep one take steps of
one scale. The anchors are held during a round and moved to the new segment ends between rounds.

After the fit, the Gauss-Newton covariance ``s^2 (J^T J + P)^-1`` (``J`` the residuals' Jacobian
in the fields' logs, ``s^2`` the reduced chi-square, ``P`` the priors' information) gives each
field's standard deviation and their correlations; a field whose relative sd exceeds
``FitConfig.max_rel_sd``, or whose correlation with another exceeds ``FitConfig.max_corr`` in
magnitude, or that moves no residual, is named as not identified by the data.
"""

from __future__ import annotations

import dataclasses
import math
import time as _time
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch

from .._checks import ConfigError, check_int, check_positive, check_range
from ..ground import Flat
from ..plant.drive import drive_step
from ..plant.dyn4 import dyn4_rest
from ..plant.params import Dyn4Params, dyn4_params
from ..plant.powertrain import PowertrainParams, powertrain_at, powertrain_rest
from ..plant.spec import VehicleSpec
from ..model.state import DYN4, PT
from .fields import FitField, apply, make_fields
from .logs import INPUTS, OUTPUTS, Log, LogError

__all__ = ["FitConfig", "FitResult", "fit", "simulate", "record", "excitation", "DEFAULT_NOISE"]

D = torch.float64
# [output unit] each output's default noise scale: what a residual is divided by (a GNSS fix, an
# IMU's yaw and gyro, a wheel-speed or GNSS speed, an accelerometer); only their ratios shape the
# fit, the covariance is rescaled by the residuals themselves
DEFAULT_NOISE = {"x": 0.1, "y": 0.1, "yaw": 0.01, "speed": 0.05, "yaw_rate": 0.01, "ay": 0.1}
_FD_REL = 1e-6  # relative step of the spec derivation's central differences
_FD_THETA = 1e-4  # step in theta of the Jacobian's central differences (theta is O(1))


@dataclass(frozen=True)
class FitConfig:
    """How :func:`fit` works; every time in seconds, every output in its :data:`OUTPUTS` unit."""

    mu: float = 0.8  # [-] friction of the level ground the runs were driven on
    hdt: float = 0.01  # [s] the plant's substep
    segment: float = 1.0  # [s] shooting segment
    smooth: float = 0.05  # [s] half-window of the local fit that gives a segment's measured start
    noise: dict = field(default_factory=dict)  # output -> scale, over DEFAULT_NOISE
    bounds: dict = field(default_factory=dict)  # field -> (lo, hi)
    priors: dict = field(default_factory=dict)  # field -> (mean, sd)
    rounds: int = 4  # anchor updates (each one L-BFGS run)
    max_iter: int = 25  # L-BFGS iterations per round
    tol: float = 1e-3  # stop when no field moves more than this (relative) in a round
    max_rel_sd: float = 0.05  # a field whose sd / value exceeds this is not identified
    max_corr: float = 0.95  # two fields correlated beyond this cannot be told apart

    def __post_init__(self):  # the project's checks (ConfigError, a ValueError)
        for name in ("mu", "hdt", "segment", "smooth", "tol", "max_rel_sd"):
            check_positive(f"FitConfig.{name}", getattr(self, name))
        if self.segment < 5 * self.hdt:
            raise ConfigError(f"FitConfig.segment must be at least 5 substeps ({5 * self.hdt:g} s), got {self.segment!r}")
        for name in ("rounds", "max_iter"):
            check_int(f"FitConfig.{name}", getattr(self, name), 1)
        check_range("FitConfig.max_corr", self.max_corr, 0.0, 1.0, lo_open=True, hi_open=True)
        for k, v in self.noise.items():
            if k not in OUTPUTS or not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"FitConfig.noise: {k!r} must be an output of {tuple(OUTPUTS)} with a positive scale, "
                                 f"got {v!r}")

    def scale(self, output: str) -> float:
        return float(self.noise.get(output, DEFAULT_NOISE[output]))


@dataclass(frozen=True)
class FitResult:
    """What :func:`fit` found. ``values``, ``start``, ``sd``: field -> number in its units;
    ``correlation`` (k, k) in ``fields`` order; ``unidentified``: field -> why the data cannot
    pin it; ``rms``: log -> output -> ``(start, fitted)`` RMS of the segment residuals in the
    output's units; ``residuals``: log -> output -> ``(n,)`` fitted residuals (NaN where no sample)."""

    spec: VehicleSpec
    powertrain: PowertrainParams
    fields: tuple
    values: dict
    start: dict
    sd: dict
    correlation: np.ndarray
    unidentified: dict
    rms: dict
    residuals: dict
    cost_start: float
    cost: float
    evaluations: int
    rounds: int
    wall_s: float

    def env_kwargs(self, preset: str, unidentified: bool = False) -> dict:
        """The keyword arguments that make an env drive the fitted car on top of ``preset``
        (``gym.make(id, **result.env_kwargs("m998"))``): ``vehicle`` and ``powertrain`` overrides
        of the identified fields (with a powertrain field, ``action="driver"``: only that action
        drives through the powertrain) (a field the logs cannot pin keeps the preset's value unless
        ``unidentified``: along a flat direction the optimiser's value means nothing)."""
        out = {"preset": preset}
        keep = [f for f in self.fields if unidentified or _key(f) not in self.unidentified]
        spec = {f.name: self.values[_key(f)] for f in keep if f.part == "spec"}
        pt = {f.name: self.values[_key(f)] for f in keep if f.part == "powertrain"}
        if spec:
            out["vehicle"] = spec
        if pt:  # only the driver's action goes through the powertrain
            out["powertrain"] = pt
            out["action"] = "driver"
        return out

    def as_dict(self) -> dict:
        """A JSON-ready summary (no arrays but the correlation, as nested lists)."""
        return {"fields": [_key(f) for f in self.fields], "values": self.values, "start": self.start, "sd": self.sd,
                "correlation": np.asarray(self.correlation).tolist(), "unidentified": self.unidentified,
                "rms": {k: {o: list(v) for o, v in d.items()} for k, d in self.rms.items()},
                "cost_start": self.cost_start, "cost": self.cost, "evaluations": self.evaluations,
                "rounds": self.rounds, "wall_s": self.wall_s}


def _key(f: FitField) -> str:
    return f"{f.part}.{f.name}"


# ------------------------------------------------------------------------------------- the plant
def _outputs(states: torch.Tensor, hdt: float) -> dict:
    """Each output along ``states (n + 1, B, 14)``: ``(n + 1, B)`` tensors."""
    vx, vy, r = states[..., DYN4.VX], states[..., DYN4.VY], states[..., DYN4.R]
    dvy = torch.diff(vy, dim=0) / hdt
    ay = torch.cat((dvy[:1], dvy), 0) + vx * r
    return {"x": states[..., DYN4.X], "y": states[..., DYN4.Y], "yaw": states[..., DYN4.PSI],
            "speed": torch.sqrt(vx * vx + vy * vy + 1e-12), "yaw_rate": r, "ay": ay}


def _rollout(x: torch.Tensor, s: torch.Tensor, inputs: torch.Tensor, p: Dyn4Params, pt: PowertrainParams, g, hdt):
    """States ``(n + 1, B, 14)`` and the last powertrain state from ``x (B, 14)``, ``s (B, 3)``
    under ``inputs (n, B, 4)``."""
    xs = [x]
    for u in inputs.unbind(0):
        x, s = drive_step(x, s, u, p, pt, g, hdt)
        xs.append(x)
    return torch.stack(xs, 0), s


def _params(fields, theta: torch.Tensor, spec: VehicleSpec, pt: PowertrainParams):
    """``(Dyn4Params, PowertrainParams)`` at ``theta`` with gradients to it: the powertrain's
    fields are 0-d tensors; the spec's enter through the derivation's central differences (its
    value exact, its slope to 1e-9 relative)."""
    values = [f.value(theta[i]) for i, f in enumerate(fields)]
    spec1, pt1 = apply(fields, [v if f.part == "powertrain" else float(v.detach()) for f, v in zip(fields, values)],
                       spec, pt)
    p = dyn4_params(spec1, dtype=D)
    grads = {}
    for i, f in enumerate(fields):
        if f.part != "spec":
            continue
        v = float(values[i].detach())
        h = _FD_REL * max(abs(v), 1e-3)
        hi = dyn4_params(spec1.replace(**{f.name: v + h}), dtype=D)
        try:
            lo, span = dyn4_params(spec1.replace(**{f.name: v - h}), dtype=D), 2 * h
        except ValueError:  # at a range's edge (a lag of 0): one-sided
            lo, span = p, h
        for pf in dataclasses.fields(Dyn4Params):
            a, b = getattr(hi, pf.name), getattr(lo, pf.name)
            if isinstance(a, torch.Tensor):
                d = (a - b) / span
                if torch.any(d != 0):
                    grads[pf.name] = grads.get(pf.name, 0.0) + (values[i] - values[i].detach()) * d
    if grads:
        p = dataclasses.replace(p, **{k: getattr(p, k) + v for k, v in grads.items()})
    return p, pt1


# ------------------------------------------------------------------------------------ a problem
def _engine_with(s: torch.Tensor, x_old: torch.Tensor, x_new: torch.Tensor) -> torch.Tensor:
    """The powertrain ``s`` with the engine's speed scaled as the measured speed rescaled the
    car's (``x_old -> x_new``, both moving): the converter keeps its speed ratio, so the drive does
    not jump at a segment's start."""
    v0, v1 = x_old[:, DYN4.VX], x_new[:, DYN4.VX]
    ok = (v0 > 0.5) & (v1 > 0.5)
    scale = torch.where(ok, v1 / v0.clamp_min(0.5), torch.ones_like(v0))
    return torch.cat((s[:, PT.OMEGA_E:PT.OMEGA_E + 1] * scale[:, None], s[:, PT.OMEGA_E + 1:]), -1)


def _local_fit(t: np.ndarray, y: np.ndarray, at: float, half: float):
    """``(value, slope)`` at ``at`` of a least-squares quadratic through the finite samples within
    ``half`` seconds (a line through 2, the sample itself through 1); ``(nan, nan)`` if none."""
    keep = (np.abs(t - at) <= half) & np.isfinite(y)
    n = int(keep.sum())
    if n == 0:
        return math.nan, math.nan
    tt, yy = t[keep] - at, y[keep]
    if n == 1:
        return float(yy[0]), math.nan
    deg = 2 if n >= 4 else 1
    c = np.polynomial.polynomial.polyfit(tt, yy, deg)
    return float(c[0]), float(c[1])


class _Samples(NamedTuple):
    """One output's finite samples in a log cut into segments."""

    seg: torch.Tensor  # each sample's segment
    i0: torch.Tensor  # the substep before it within the segment
    w: torch.Tensor  # its fraction of the way to the next substep
    y: torch.Tensor  # the recorded value
    inv: float  # 1 / the output's noise scale
    rows: np.ndarray  # its rows in the log


class _Problem:
    """One log cut into segments: the inputs per substep, the samples each segment scores, the
    measured starts."""

    def __init__(self, log: Log, cfg: FitConfig):
        self.log, self.cfg = log, cfg
        hdt = cfg.hdt
        self.n = max(int(round(cfg.segment / hdt)), 1)
        t0, t1 = float(log.time[0]), float(log.time[-1])
        self.M = max(int(math.ceil((t1 - t0) / (self.n * hdt) - 1e-9)), 1)
        self.starts = t0 + np.arange(self.M) * self.n * hdt
        sub = self.starts[None, :] + np.arange(self.n)[:, None] * hdt  # (n, M) substep times
        u = log.input_at(sub.ravel()).reshape(self.n, self.M, len(INPUTS))
        self.inputs = torch.tensor(np.concatenate((u, np.ones((self.n, self.M, 1))), -1), dtype=D)
        # each output's samples (_Samples)
        self.samples = {}
        for name, y in log.outputs.items():
            ok = np.isfinite(y)
            t = log.time[ok]
            j = np.clip(np.floor((t - t0) / (self.n * hdt) + 1e-9).astype(int), 0, self.M - 1)
            pos = np.clip((t - self.starts[j]) / hdt, 0.0, self.n)
            i0 = np.minimum(np.floor(pos).astype(int), self.n - 1)
            w = pos - i0
            rows = np.flatnonzero(ok)
            self.samples[name] = _Samples(torch.tensor(j), torch.tensor(i0), torch.tensor(w, dtype=D),
                                          torch.tensor(y[ok], dtype=D), 1.0 / cfg.scale(name), rows)
        # the measured starts: value (and, for positions, slope) at each segment's start
        self.measured = {}
        for name in ("x", "y", "yaw", "speed", "yaw_rate"):
            if name in log.outputs:
                y = log.outputs[name]
                if name == "yaw":
                    y = np.where(np.isfinite(y), np.unwrap(np.nan_to_num(y)), np.nan)
                self.measured[name] = np.array([_local_fit(log.time, y, a, cfg.smooth) for a in self.starts])

    @property
    def count(self) -> int:
        return sum(s.y.numel() for s in self.samples.values())

    def _settled(self, p: Dyn4Params, pt: PowertrainParams, g, rows: slice) -> tuple[torch.Tensor, torch.Tensor]:
        """The segments ``rows``' starts before any segment has run: a settled car with the
        measurements written over it, the powertrain at its speed (from rest: idling in first)."""
        n = len(range(self.M)[rows])
        x = self.teach(dyn4_rest(p, g, (n,)).detach(), rows=rows)
        s = torch.where((x[:, DYN4.VX] > 0.5)[:, None], powertrain_at(pt, x[:, DYN4.VX].clamp_min(0.0)),
                        powertrain_rest(pt, (n,), dtype=D))
        return x, s

    def start(self, p: Dyn4Params, pt: PowertrainParams, g) -> tuple[torch.Tensor, torch.Tensor]:
        """The log's first state ``(1, 14)`` and powertrain ``(1, 3)`` (:meth:`_settled`)."""
        with torch.no_grad():
            return self._settled(p, pt, g, slice(0, 1))

    def anchors(self, p: Dyn4Params, pt: PowertrainParams, g, passes: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
        """Every segment's start: settled cars with the measurements written over them
        (:meth:`_settled`), then ``passes`` times where the segment before ended, measured again
        (the first keeps the log's start; no gradient)."""
        with torch.no_grad():
            x, s = self._settled(p, pt, g, slice(None))
            for _ in range(passes):
                st, s_end = _rollout(x, s, self.inputs, p, pt, g, self.cfg.hdt)
                x, s = self.follow(x, s, st[-1], s_end)
        return x, s

    def follow(self, x: torch.Tensor, s: torch.Tensor, x_end: torch.Tensor, s_end: torch.Tensor):
        """The next anchors from the segments' ends: segment j + 1 starts where j ended, the
        measurements written over it; the first keeps its start."""
        x1 = torch.cat((x[:1], self.teach(x_end[:-1], rows=slice(1, None))), 0)
        s1 = torch.cat((s[:1], _engine_with(s_end[:-1], x_end[:-1], x1[1:])), 0)
        return x1, s1.detach()

    def teach(self, x: torch.Tensor, rows: slice = slice(None), dynamics: bool = True) -> torch.Tensor:
        """``x`` (the segments ``rows``' starts) with what the log measured written over it: the
        pose (position; heading, or the positions' slope less the plant's sideslip above 1 m/s
        where no heading is logged) and, with ``dynamics``, the speed (logged, or the positions'
        slope; the plant's sideslip kept) and the yaw rate. The rest (sideslip, body motion,
        lags, engine and gear) stays the plant's."""
        x = x.detach().clone()
        m = self.measured

        def put(idx, vals):
            v = torch.tensor(vals[rows], dtype=D)
            x[:, idx] = torch.where(torch.isfinite(v), v, x[:, idx])

        if "x" in m:
            put(DYN4.X, m["x"][:, 0])
        if "y" in m:
            put(DYN4.Y, m["y"][:, 0])
        if "yaw" in m:
            put(DYN4.PSI, m["yaw"][:, 0])
        beta = torch.atan2(x[:, DYN4.VY], x[:, DYN4.VX].abs().clamp_min(1e-6))  # the plant's sideslip
        ground = None
        if "x" in m and "y" in m:  # the velocity from the positions' slopes
            vwx, vwy = torch.tensor(m["x"][rows, 1], dtype=D), torch.tensor(m["y"][rows, 1], dtype=D)
            ground = torch.hypot(vwx, vwy)
            moving = torch.isfinite(ground) & (ground > 1.0)
            if "yaw" not in m:
                x[:, DYN4.PSI] = torch.where(moving, torch.atan2(vwy, vwx) - beta, x[:, DYN4.PSI])
        if not dynamics:
            return x
        speed = None
        if "speed" in m:
            speed = torch.tensor(m["speed"][rows, 0], dtype=D)
        elif ground is not None:
            speed = torch.where(moving, ground, torch.full_like(ground, math.nan))
        if speed is not None:
            ok = torch.isfinite(speed)
            sp = speed.clamp_min(0.0)
            x[:, DYN4.VX] = torch.where(ok, sp * torch.cos(beta), x[:, DYN4.VX])
            x[:, DYN4.VY] = torch.where(ok, sp * torch.sin(beta), x[:, DYN4.VY])
        if "yaw_rate" in m:
            put(DYN4.R, m["yaw_rate"][:, 0])
        return x

    def residuals(self, states: torch.Tensor) -> dict:
        """Output -> ``(count,)`` residuals over their scales from ``states (n + 1, M, 14)``."""
        outs = _outputs(states, self.cfg.hdt)
        res = {}
        for name, sm in self.samples.items():
            o = outs[name]
            d = (1.0 - sm.w) * o[sm.i0, sm.seg] + sm.w * o[sm.i0 + 1, sm.seg] - sm.y
            if name == "yaw":
                d = torch.atan2(torch.sin(d), torch.cos(d))
            res[name] = d * sm.inv
        return res


# ------------------------------------------------------------------------------------ public API
def _values(fl, theta: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return np.array([float(f.value(theta[i])) for i, f in enumerate(fl)])


def _check_logs(logs) -> list:
    if isinstance(logs, Log):
        logs = [logs]
    logs = list(logs)
    if not logs or not all(isinstance(lg, Log) for lg in logs):
        raise LogError("fit needs one or more dyn4_gym.fit.Log (read_log reads a CSV)")
    names = [lg.name for lg in logs]
    if len(set(names)) != len(names):
        raise LogError(f"logs must have distinct names, got {names}")
    return logs


def _loss(theta, fl, probs, anchors, spec, powertrain, g, hdt, count):
    """``(loss, residuals per log)``: half the mean square of the scaled residuals of every
    segment of every log from its anchor, plus the priors' (over the same count)."""
    p, pt = _params(fl, theta, spec, powertrain)
    total, per = 0.0, []
    for pr, (x0, s0) in zip(probs, anchors):
        st, _ = _rollout(x0, s0, pr.inputs, p, pt, g, hdt)
        res = pr.residuals(st)
        total = total + sum((r * r).sum() for r in res.values())
        per.append(res)
    for i, f in enumerate(fl):
        if f.prior is not None:
            total = total + ((f.value(theta[i]) - f.prior[0]) / f.prior[1]) ** 2
    return 0.5 * total / count, per


def fit(logs, spec: VehicleSpec, powertrain: PowertrainParams, fields, config: FitConfig | None = None,
        progress=None) -> FitResult:
    """Estimate ``fields`` (names, :mod:`dyn4_gym.fit.fields`) of the car ``(spec, powertrain)``
    from ``logs`` (one :class:`Log` or several). ``progress(round, evaluations, cost)`` is called
    after every loss evaluation. Returns a :class:`FitResult`; the fitted ``spec`` and
    ``powertrain`` are ordinary dataclasses of numbers (both engines drive them)."""
    t_start = _time.perf_counter()
    cfg = config or FitConfig()
    logs = _check_logs(logs)
    fl = make_fields(fields, spec, powertrain, cfg.bounds, cfg.priors)
    g = Flat(mu=cfg.mu)
    probs = [_Problem(lg, cfg) for lg in logs]
    theta = torch.tensor([f.theta(f.start) for f in fl], dtype=D)
    count = sum(pr.count for pr in probs)
    evals = [0]

    def loss_at(th, anchors):
        return _loss(th, fl, probs, anchors, spec, powertrain, g, cfg.hdt, count)

    def anchored(th, prev=None):
        with torch.no_grad():
            p, pt = _params(fl, th, spec, powertrain)
            if prev is None:
                return [pr.anchors(p, pt, g) for pr in probs]
            out = []
            for pr, (x, s) in zip(probs, prev):
                st, s_end = _rollout(x, s, pr.inputs, p, pt, g, cfg.hdt)
                out.append(pr.follow(x, s, st[-1], s_end))
            return out

    anchors = anchored(theta.detach())
    with torch.no_grad():
        cost0, res0 = loss_at(theta.detach(), anchors)
    cost_start = float(cost0)
    rounds_done = 0
    for rnd in range(cfg.rounds):
        before = _values(fl, theta)
        # L-BFGS in whitened coordinates: theta = centre + W phi, W from this round's Gauss-Newton
        # curvature (central differences); the gradient it follows is autograd's through the plant
        centre = theta.detach().clone()
        W = _whitening(fl, centre, _jacobian(centre, anchors, loss_at), count)
        phi = torch.zeros_like(centre, requires_grad=True)
        opt = torch.optim.LBFGS([phi], lr=1.0, max_iter=cfg.max_iter, history_size=10,
                                line_search_fn="strong_wolfe", tolerance_grad=1e-12, tolerance_change=1e-10)

        def closure():
            opt.zero_grad()
            loss, _ = loss_at(centre + W @ phi, anchors)
            loss.backward()
            evals[0] += 1
            if progress is not None:
                progress(rnd, evals[0], float(loss.detach()))
            return loss

        opt.step(closure)
        with torch.no_grad():
            theta.copy_(centre + W @ phi)
        rounds_done += 1
        anchors = anchored(theta.detach(), anchors)  # where the segments now end: the next round's starts
        after = _values(fl, theta)
        if np.max(np.abs(after - before) / np.maximum(np.abs(before), 1e-9)) < cfg.tol:
            break
    th = theta.detach()
    with torch.no_grad():
        cost, res1 = loss_at(th, anchors)
    values = [float(f.value(th[i])) for i, f in enumerate(fl)]
    sd, corr, unid = _uncertainty(fl, th, values, anchors, loss_at, cfg, res1)
    spec1, pt1 = apply(fl, values, spec, powertrain)
    rms, residuals = {}, {}
    for pr, r0, r1 in zip(probs, res0, res1):
        rms[pr.log.name] = {}
        residuals[pr.log.name] = {}
        for name in r1:
            scale = cfg.scale(name)
            a = r0[name].numpy() * scale
            b = r1[name].numpy() * scale
            rms[pr.log.name][name] = (float(np.sqrt(np.mean(a * a))), float(np.sqrt(np.mean(b * b))))
            full = np.full(pr.log.time.shape, np.nan)
            full[pr.samples[name].rows] = b
            residuals[pr.log.name][name] = full
    keys = [_key(f) for f in fl]
    return FitResult(spec=spec1, powertrain=pt1.as_numbers(), fields=fl, values=dict(zip(keys, values)),
                     start={_key(f): f.start for f in fl}, sd=dict(zip(keys, sd)), correlation=corr,
                     unidentified=unid, rms=rms, residuals=residuals, cost_start=cost_start, cost=float(cost),
                     evaluations=evals[0], rounds=rounds_done, wall_s=_time.perf_counter() - t_start)


def _flat(per) -> torch.Tensor:
    return torch.cat([torch.cat(list(d.values())) for d in per])


def _jacobian(th: torch.Tensor, anchors, loss_at) -> torch.Tensor:
    """``(N, k)``: the scaled residuals' derivatives in ``theta`` by central differences (one
    rollout of the segments per field and sign)."""
    cols = []
    with torch.no_grad():
        for i in range(th.numel()):
            rr = []
            for sign in (1.0, -1.0):
                t = th.clone()
                t[i] += sign * _FD_THETA
                rr.append(_flat(loss_at(t, anchors)[1]))
            cols.append((rr[0] - rr[1]) / (2 * _FD_THETA))
    return torch.stack(cols, -1)


def _whitening(fl, th: torch.Tensor, J: torch.Tensor, count: int) -> torch.Tensor:
    """``W (k, k)`` with ``theta = theta_c + W phi`` giving the loss a unit Gauss-Newton
    curvature in ``phi`` (``W = L^-T``, ``L L^T`` the loss's Gauss-Newton Hessian in theta plus
    the priors' and a small ridge), so L-BFGS starts well scaled along every direction."""
    H = (J.T @ J) / count
    for i, f in enumerate(fl):
        if f.prior is not None:  # d/dtheta of (value - mean) / sd, squared, over the count
            t = th[i].detach().clone().requires_grad_(True)
            (dv,) = torch.autograd.grad(f.value(t), t)
            H[i, i] += float(dv / f.prior[1]) ** 2 / count
    k = H.shape[0]
    ridge = 1e-8 * float(torch.max(torch.diagonal(H)).clamp_min(1e-30)) + 1e-30
    L = torch.linalg.cholesky(H + ridge * torch.eye(k, dtype=H.dtype))
    return torch.linalg.inv(L).T


def _uncertainty(fl, th, values, anchors, loss_at, cfg, res):
    """``(sd list, correlation (k, k), unidentified dict)`` from the Gauss-Newton covariance."""
    k = len(fl)
    Jt = _jacobian(th, anchors, loss_at)
    cols, pinned = [], {}
    for i, f in enumerate(fl):  # d r / d log(value): the theta step's change of the value's log
        v_hi, v_lo = (float(f.value(th[i] + s * _FD_THETA)) for s in (1.0, -1.0))
        d = (math.log(v_hi) - math.log(v_lo)) if v_hi > 0 and v_lo > 0 else (v_hi - v_lo) / max(abs(values[i]), 1e-12)
        span = (math.log(f.hi) - math.log(f.lo)) if f.log_scale else (f.hi - f.lo) / max(abs(values[i]), 1e-12)
        if not d > 1e-6 * _FD_THETA * span:  # the sigmoid is flat: the value sits on a bound
            side = "lower" if values[i] - f.lo < f.hi - values[i] else "upper"
            pinned[_key(f)] = (f"at its {side} bound ({f.lo:g} / {f.hi:g}): the logs push it out of its range, "
                               "so something they show is not in the model, or the bound is too tight")
            cols.append(torch.zeros_like(Jt[:, i]))
            continue
        cols.append(Jt[:, i] * (2 * _FD_THETA) / d)
    J = torch.stack(cols, -1).numpy()  # (N, k), residuals per relative change of each field
    r = _flat(res).numpy()
    dof = max(r.size - k, 1)
    s2 = float(r @ r) / dof
    H = J.T @ J
    for i, f in enumerate(fl):  # a prior's information, in the same relative units
        if f.prior is not None:
            H[i, i] += s2 * (values[i] / f.prior[1]) ** 2
    unid = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        try:
            cov = s2 * np.linalg.pinv(H, rcond=1e-12, hermitian=True)
        except np.linalg.LinAlgError:
            cov = np.full((k, k), np.inf)
        d = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        flat = np.diag(H) <= 1e-12 * max(float(np.max(np.diag(H))), 1e-300)
        corr = cov / np.outer(d, d)
    corr = np.where(np.isfinite(corr), corr, 0.0)
    np.fill_diagonal(corr, 1.0)
    sd = []
    for i, f in enumerate(fl):
        key = _key(f)
        if key in pinned:
            unid[key] = pinned[key]
            sd.append(math.inf)
            continue
        if flat[i]:
            unid[key] = "the logs do not move the residuals: nothing measured depends on it"
            sd.append(math.inf)
            continue
        rel = float(d[i])
        sd.append(rel * abs(values[i]))
        partners = [_key(fl[j]) for j in range(k) if j != i and not flat[j] and abs(corr[i, j]) > cfg.max_corr]
        if partners:
            unid[key] = f"correlated beyond {cfg.max_corr:g} with {', '.join(partners)}: the logs cannot tell them apart"
        elif rel > cfg.max_rel_sd:
            unid[key] = f"relative sd {rel:.3g} exceeds {cfg.max_rel_sd:g}"
    return sd, corr, unid


def simulate(log: Log, spec: VehicleSpec, powertrain: PowertrainParams, mu: float = 0.8, hdt: float = 0.01) -> dict:
    """Output -> ``(n,)`` predicted at the log's times in one shot from its measured start (no
    segments, no teacher forcing): a cross-validation's figures and a fit's plot."""
    cfg = FitConfig(mu=mu, hdt=hdt, segment=max(log.duration + hdt, 5 * hdt))
    pr = _Problem(log, cfg)
    g = Flat(mu=mu)
    p = dyn4_params(spec, dtype=D)
    with torch.no_grad():
        x, s = pr.start(p, powertrain, g)
        st, _ = _rollout(x, s, pr.inputs, p, powertrain, g, hdt)
    outs = _outputs(st, hdt)
    t = (log.time - pr.starts[0]) / hdt
    i0 = np.minimum(np.floor(t).astype(int), pr.n - 1)
    w = t - i0
    return {name: ((1 - w) * o[i0, 0].numpy() + w * o[i0 + 1, 0].numpy()) for name, o in outs.items()}


def record(spec: VehicleSpec, powertrain: PowertrainParams, time: np.ndarray, inputs: np.ndarray,
           outputs=tuple(OUTPUTS), noise: dict | None = None, seed: int = 0, mu: float = 0.8, hdt: float = 0.01,
           name: str = "recorded") -> Log:
    """A synthetic :class:`Log`: the car ``(spec, powertrain)`` driven from rest under ``inputs
    (n, 3)`` at ``time (n,)``, its ``outputs`` sampled there plus Gaussian noise of ``noise``
    output -> sd (none by default; ``seed`` seeds it)."""
    time = np.asarray(time, dtype=np.float64)
    bare = Log(time, inputs, {"speed": np.zeros_like(time)}, name)  # at rest: the start the plant takes
    pred = simulate(bare, spec, powertrain, mu, hdt)
    rng = np.random.default_rng(seed)
    noise = dict(noise or {})
    outs = {}
    for o in outputs:
        if o not in OUTPUTS:
            raise ValueError(f"unknown output {o!r}; outputs are {tuple(OUTPUTS)}")
        sd = float(noise.get(o, 0.0))
        outs[o] = pred[o] + (rng.normal(0.0, sd, time.shape) if sd > 0 else 0.0)
    return Log(time, inputs, outs, name)


def excitation(duration: float = 20.0, rate: float = 100.0) -> tuple[np.ndarray, np.ndarray]:
    """``(time (n,), inputs (n, 3))``: a test-track programme from rest that excites what a spec
    sheet sets: full throttle (drive, drag), a steering sweep at speed (tires, yaw inertia, steering
    lag), braking (brakes), a coast (rolling resistance, drag), a step steer. Scaled to ``duration``."""
    n = int(round(duration * rate)) + 1
    t = np.arange(n) / rate
    f = t / duration  # the programme's phase, 0..1
    throttle = np.where(f < 0.3, 1.0, np.where(f < 0.7, 0.5, np.where(f < 0.9, 0.0, 0.6)))  # brake, coast: 0
    brake = np.where((f >= 0.7) & (f < 0.8), 0.5, 0.0)
    phase = np.clip((f - 0.3) / 0.4, 0.0, 1.0)
    sweep = 0.25 * np.sin(2 * np.pi * (0.2 + 0.6 * phase) * (t - 0.3 * duration)) * ((f >= 0.3) & (f < 0.7))
    step = np.where(f >= 0.9, 0.3, 0.0)
    steer = sweep + step
    return t, np.stack((steer, throttle, brake), -1)
