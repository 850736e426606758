"""Plant parameters derived from a spec sheet (the seeds' ``dyn_bike_si_of`` / ``dyn4_si_of``).

Parameters are frozen dataclasses of tensors. Every tensor broadcasts against the batch: a
scalar field may be ``()`` or ``(B,)``, a per-wheel field ``(n,)`` or ``(B, n)`` with ``n = 2``
axles for the single track and ``n = 4`` corners (FL, FR, RL, RR) for the four-wheel plant. So a
batch can carry per-environment mass or friction, and gradients flow into every field.

Derivations (docs/plant.md, "Parameters"):

- static loads ``Fz0_front = m g lr / (2 L)``, ``Fz0_rear = m g lf / (2 L)`` per corner (twice
  that per axle for the single track);
- corner springs ``k_i = m_i (2 pi f_axle)^2`` with ``m_i = Fz0_i / g``, dampers
  ``c_i = 2 zeta sqrt(k_i m_i)``. With the same frequency on both axles, heave and pitch decouple
  exactly (``sum m_i x_i = 0``); heave rings at ``f``, pitch at ``f sqrt(m lf lr / Iy)``;
- the tire's Pacejka ``B, C, E`` from ``mu``, ``K_a`` and ``alpha_peak`` (:func:`fit_pacejka`);
- drive split by drivetrain: four-wheel drive splits the drive force equally over the four
  wheels (open differentials deliver equal torque), two-wheel drive over the driven pair;
- drag ``F = 1/2 rho CdA vx^2`` plus rolling resistance ``c_rr m g tanh(vx / v_roll)``.

:func:`params_in_frame` rescales to a scene whose length unit is not the metre.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields

import torch

from .spec import VehicleSpec

__all__ = [
    "BikeParams",
    "Dyn4Params",
    "bike_params",
    "dyn4_params",
    "fit_pacejka",
    "params_in_frame",
]


def _f(length_exp: int, doc: str):
    """A tensor field whose value scales as ``length ** length_exp`` under a unit change."""
    return field(metadata={"length_exp": length_exp, "doc": doc})


@dataclass(frozen=True)
class BikeParams:
    """Single-track (bicycle) plant parameters. Units: kg, m, s, rad, N (or the scene's unit)."""

    m: torch.Tensor = _f(0, "[kg] mass")
    Iz: torch.Tensor = _f(2, "[kg m^2] yaw inertia")
    lf: torch.Tensor = _f(1, "[m] CG to front axle")
    lr: torch.Tensor = _f(1, "[m] CG to rear axle")
    h: torch.Tensor = _f(1, "[m] CG height above the contact patches")
    g: torch.Tensor = _f(1, "[m/s^2] gravity")
    x_w: torch.Tensor = _f(1, "[m] (n,) wheel x in the body frame")
    y_w: torch.Tensor = _f(1, "[m] (n,) wheel y in the body frame (left +)")
    Fz0: torch.Tensor = _f(1, "[N] (n,) static wheel (axle) load")
    B: torch.Tensor = _f(0, "[1/rad] (n,) Pacejka stiffness factor")
    C: torch.Tensor = _f(0, "[-] (n,) Pacejka shape factor")
    E: torch.Tensor = _f(0, "[-] (n,) Pacejka curvature factor")
    eps_load: torch.Tensor = _f(0, "[-] tire load sensitivity")
    delta_max: torch.Tensor = _f(0, "[rad] steering limit")
    a_drive: torch.Tensor = _f(1, "[m/s^2] largest drive command")
    a_brake: torch.Tensor = _f(1, "[m/s^2] largest brake command (magnitude)")
    power: torch.Tensor = _f(2, "[W] drive power cap (kg m^2/s^3)")
    tau_steer: torch.Tensor = _f(0, "[s] steering lag (0: none)")
    tau_drive: torch.Tensor = _f(0, "[s] drive/brake lag (0: none)")
    drive_share: torch.Tensor = _f(0, "[-] (n,) share of the drive force per wheel, sums to 1")
    c_drag: torch.Tensor = _f(-1, "[kg/m] quadratic drag 1/2 rho CdA")
    f_roll: torch.Tensor = _f(1, "[N] rolling resistance force c_rr m g")
    v_lat: torch.Tensor = _f(1, "[m/s] low-speed blend of the slip angle")
    v_roll: torch.Tensor = _f(1, "[m/s] rolling resistance fade-in speed")

    n_wheels = 2

    @property
    def L(self) -> torch.Tensor:
        """[m] wheelbase."""
        return self.lf + self.lr

    @property
    def dtype(self) -> torch.dtype:
        return self.m.dtype

    @property
    def device(self) -> torch.device:
        return self.m.device

    def replace(self, **changes) -> "BikeParams":
        """A copy with some fields changed (values are converted to tensors of this dtype)."""
        known = {f.name for f in fields(self)}
        for name in changes:
            if name not in known:
                raise TypeError(f"{type(self).__name__} has no parameter {name!r}")
        conv = {}
        for name, value in changes.items():
            if isinstance(getattr(self, name), torch.Tensor):
                value = torch.as_tensor(value, dtype=self.dtype, device=self.device)
            conv[name] = value
        return dataclasses.replace(self, **conv)

    def to(self, dtype: torch.dtype | None = None, device=None) -> "BikeParams":
        """The same parameters as another dtype and/or on another device."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = v.to(dtype=dtype, device=device) if isinstance(v, torch.Tensor) else v
        return dataclasses.replace(self, **out)


@dataclass(frozen=True)
class Dyn4Params(BikeParams):
    """Four-wheel plant parameters: the single track's plus roll, pitch and the four corners.

    Wheels are FL, FR, RL, RR at ``(lf, +tf), (lf, -tf), (-lr, +tr), (-lr, -tr)``, ``tf``, ``tr``
    half tracks.
    """

    Ix: torch.Tensor = _f(2, "[kg m^2] roll inertia")
    Iy: torch.Tensor = _f(2, "[kg m^2] pitch inertia")
    k: torch.Tensor = _f(0, "[N/m] (4,) corner spring rates (kg/s^2)")
    damp: torch.Tensor = _f(0, "[N s/m] (4,) corner damper rates (kg/s)")
    m_rot: torch.Tensor = _f(0, "[kg] the parts spinning with the wheels as a mass: rotating inertia / r^2 (driven plant only)")
    grade_force: bool = field(default=False, metadata={"doc": "apply the slopes' horizontal reaction (docs/plant.md)"})
    damper: str = field(default="passive", metadata={
        "doc": "'passive': dampers on each corner's rate relative to the ground under it; 'skyhook': on the body's"})

    def __post_init__(self):
        if self.damper not in ("passive", "skyhook"):
            raise ValueError(f"Dyn4Params.damper must be 'passive' or 'skyhook', got {self.damper!r}")
        if not isinstance(self.grade_force, bool):
            raise ValueError(f"Dyn4Params.grade_force must be a bool, got {self.grade_force!r}")

    n_wheels = 4

    @property
    def road_share(self) -> torch.Tensor:
        """``m / (m + m_rot)``: the share of a driven wheel's torque over its radius that reaches
        the road while it rolls; the rest spins up what turns with it (docs/plant.md, "Rotating
        inertia")."""
        return self.m / (self.m + self.m_rot)

    @property
    def tf(self) -> torch.Tensor:
        """[m] front half track."""
        return self.y_w[..., 0]

    @property
    def tr(self) -> torch.Tensor:
        """[m] rear half track."""
        return self.y_w[..., 2]


def fit_pacejka(mu: float, stiffness: float, peak_slip: float) -> tuple[float, float, float]:
    """Pacejka ``B, C, E`` with slope ``mu B C = stiffness`` at 0 and the maximum at ``peak_slip``.

    ``F / Fz = mu sin(C atan(B a - E (B a - atan(B a))))``. With ``E = 0`` the maximum is where
    ``B a = tan(pi / (2 C))``; we solve that for ``C`` in ``[1.05, 1.95]`` (bisection) and, if the
    root falls outside, clip ``C`` and solve the peak condition for ``E`` instead:
    ``E = (B a_p - tan(pi / 2C)) / (B a_p - atan(B a_p))``.
    """
    if not (mu > 0 and stiffness > 0 and peak_slip > 0):
        raise ValueError("fit_pacejka needs positive mu, stiffness and peak_slip")
    bc = stiffness / mu  # B C

    def gap(c: float) -> float:
        return math.tan(math.pi / (2 * c)) - bc * peak_slip / c

    lo, hi = 1.05, 1.95
    if gap(lo) > 0 > gap(hi):
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if gap(mid) > 0:
                lo = mid
            else:
                hi = mid
        c = 0.5 * (lo + hi)
    else:
        c = lo if gap(lo) <= 0 else hi
    b = bc / c
    ba = b * peak_slip
    e = (ba - math.tan(math.pi / (2 * c))) / (ba - math.atan(ba))
    if abs(e) < 1e-12:
        e = 0.0
    if e >= 1.0:
        raise ValueError("tire data give Pacejka E >= 1: the curve would not be monotone")
    return b, c, e


def _t(x, dtype, device) -> torch.Tensor:
    return torch.as_tensor(x, dtype=dtype, device=device)


def _common(spec: VehicleSpec, n: int) -> dict:
    """Fields shared by both plants, as Python numbers; ``n`` is 2 (axles) or 4 (corners)."""
    m, g = spec.mass, spec.gravity
    lf, lr = spec.cg_to_front, spec.cg_to_rear
    L = spec.wheelbase
    per = 2 if n == 4 else 1  # wheels per axle
    fz_f, fz_r = m * g * lr / (per * L), m * g * lf / (per * L)
    tf, tr = spec.track_front / 2, spec.track_rear / 2
    if n == 4:
        x_w = [lf, lf, -lr, -lr]
        y_w = [tf, -tf, tr, -tr]
        front = [True, True, False, False]
    else:
        x_w, y_w, front = [lf, -lr], [0.0, 0.0], [True, False]
    tire_f = fit_pacejka(spec.tire_mu, spec.tire_cornering_stiffness * spec.front_stiffness, spec.tire_peak_slip)
    tire_r = fit_pacejka(spec.tire_mu, spec.tire_cornering_stiffness, spec.tire_peak_slip)
    tires = [tire_f if f else tire_r for f in front]
    driven = {"4wd": [True] * n, "fwd": front, "rwd": [not f for f in front]}[spec.drivetrain]
    share = [1.0 / sum(driven) if d else 0.0 for d in driven]
    iz = spec.inertia_yaw if spec.inertia_yaw is not None else m * (spec.box_length**2 + spec.box_width**2) / 12
    return dict(
        m=m, Iz=iz, lf=lf, lr=lr, h=spec.cg_height, g=g, x_w=x_w, y_w=y_w,
        Fz0=[fz_f if f else fz_r for f in front],
        B=[t[0] for t in tires], C=[t[1] for t in tires], E=[t[2] for t in tires],
        eps_load=spec.tire_load_sensitivity, delta_max=spec.max_steer,
        a_drive=spec.max_drive_accel, a_brake=spec.max_brake_accel, power=spec.max_power,
        tau_steer=spec.steer_lag, tau_drive=spec.drive_lag_s, drive_share=share,
        c_drag=0.5 * spec.air_density * spec.drag_area, f_roll=spec.rolling_resistance * m * g,
        v_lat=spec.lateral_blend_speed, v_roll=spec.rolling_blend_speed,
    ), front


def _split_overrides(spec: VehicleSpec, cls, overrides: dict) -> tuple[VehicleSpec, dict]:
    spec_names = {f.name for f in fields(VehicleSpec)}
    param_names = {f.name for f in fields(cls)}
    spec_changes = {k: v for k, v in overrides.items() if k in spec_names}
    param_changes = {k: v for k, v in overrides.items() if k in param_names and k not in spec_names}
    unknown = set(overrides) - spec_names - param_names
    if unknown:
        raise TypeError(f"unknown {cls.__name__} override(s) {sorted(unknown)}: not a VehicleSpec field nor a parameter")
    return (spec.replace(**spec_changes) if spec_changes else spec), param_changes


_FLAGS = ("grade_force", "damper")  # parameters that are not tensors


def _build(cls, values: dict, dtype, device, param_changes: dict):
    made = {k: v if k in _FLAGS else _t(v, dtype, device) for k, v in values.items()}
    p = cls(**made)
    return p.replace(**param_changes) if param_changes else p


def bike_params(spec: VehicleSpec, dtype: torch.dtype = torch.float32, device=None, **overrides) -> BikeParams:
    """Single-track parameters from a spec sheet (the seeds' ``dyn_bike_si_of``).

    Keyword overrides may name a :class:`VehicleSpec` field (applied before deriving) or a
    :class:`BikeParams` field (applied after).
    """
    spec, changes = _split_overrides(spec, BikeParams, overrides)
    values, _ = _common(spec, 2)
    return _build(BikeParams, values, dtype, device, changes)


def dyn4_params(spec: VehicleSpec, dtype: torch.dtype = torch.float32, device=None, **overrides) -> Dyn4Params:
    """Four-wheel parameters from a spec sheet (the seeds' ``dyn4_si_of``).

    Keyword overrides may name a :class:`VehicleSpec` field (``track_front=0.0``,
    ``ride_freq_front=20.0``...) or a :class:`Dyn4Params` field (``grade_force=True``,
    ``damper="skyhook"``...).
    """
    spec, changes = _split_overrides(spec, Dyn4Params, overrides)
    values, front = _common(spec, 4)
    m, g = spec.mass, spec.gravity
    ix = spec.inertia_roll if spec.inertia_roll is not None else m * (spec.box_width**2 + spec.box_height**2) / 12
    iy = spec.inertia_pitch if spec.inertia_pitch is not None else m * (spec.box_length**2 + spec.box_height**2) / 12
    k, damp = [], []
    for fz, is_front in zip(values["Fz0"], front):
        mi = fz / g
        f = spec.ride_freq_front if is_front else spec.ride_freq_rear
        zeta = spec.damping_ratio_front if is_front else spec.damping_ratio_rear
        ki = mi * (2 * math.pi * f) ** 2
        k.append(ki)
        damp.append(2 * zeta * math.sqrt(ki * mi))
    # the rotating parts' kinetic energy 1/2 J (vx / r)^2 as a mass on vx (docs/plant.md, "Rotating inertia")
    m_rot = spec.rotating_inertia / spec.tire_radius**2
    values.update(Ix=ix, Iy=iy, k=k, damp=damp, m_rot=m_rot, grade_force=False, damper="passive")
    return _build(Dyn4Params, values, dtype, device, changes)


def params_in_frame(p: BikeParams, unit: float) -> BikeParams:
    """Rescale SI parameters to a scene whose length unit is ``unit`` metres.

    Mass and time keep their units (kg, s), so a field with length dimension ``L^k`` is divided
    by ``unit ** k``: lengths, speeds and accelerations (k = 1), forces (kg L / s^2, k = 1),
    inertias and power (k = 2), the drag coefficient (kg / L, k = -1). Spring and damper rates
    (kg/s^2, kg/s) do not change. The seeds' ``dyn4_params_of`` / ``dyn4_params_at``.
    """
    if not unit > 0:
        raise ValueError("unit must be positive")
    out = {}
    for f in fields(p):
        v = getattr(p, f.name)
        exp = f.metadata.get("length_exp")
        out[f.name] = v / unit**exp if exp else v
    return dataclasses.replace(p, **out)
