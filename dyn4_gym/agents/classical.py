"""The classical reference controller: pure pursuit on the course preview plus a speed loop.

A policy from observations to actions (``(B, 30) -> (B, 2)``), batched torch, differentiable.

- Steering: pure pursuit (Coulter 1992) on the preview point at the lookahead distance
  ``L_d = clamp(k_la vx, min, max)`` (linear interpolation between the observation's preview
  points): curvature ``kappa = 2 y / (x^2 + y^2)`` of the arc through it, steer
  ``atan(L kappa)``, clipped to the max steer.
- Speed: the target speed, capped in corners by the lateral-acceleration cap,
  ``v <= sqrt(a_lat / |kappa_ahead|)``, with ``kappa_ahead`` the largest curvature of the
  arcs to the farther preview points; a proportional loop on ``vx`` gives the drive/brake
  command, scaled to the action's range (``a_drive`` up, ``a_brake`` down).
- With ``driver=True`` (``action="driver"``): the same loop on the pedals, throttle
  ``throttle_hold + throttle_gain (v_ref - vx)`` and the brake below ``-brake_deadband`` of the
  drive/brake command (a driver does not brake for a small excess of speed; drag slows the car).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..envs.config import CourseConfig
from ..envs.core import OBS_INDEX, obs_scale
from ..plant import HUMVEE, VehicleSpec

__all__ = ["PurePursuitParams", "PurePursuit"]


@dataclass(frozen=True)
class PurePursuitParams:
    lookahead_gain: float = 0.9  # [s] L_d = gain * vx
    lookahead_min: float = 6.0  # [m]
    lookahead_max: float = 30.0  # [m]
    lat_accel: float = 4.0  # [m/s^2] corner-speed cap
    speed_gain: float = 1.0  # [1/s] proportional speed loop
    throttle_hold: float = 0.1  # driver: the throttle at the reference speed (road load at ~10 m/s)
    throttle_gain: float = 0.4  # [s/m] driver: throttle per m/s of speed error
    brake_deadband: float = 0.5  # [m/s^2] driver: no brake for smaller decelerations


class PurePursuit:
    """``policy(obs) -> action``; reads ``Dyn4Humvee-v1``'s observation by name (``OBS_TABLE``).

    ``preview`` must be the env's ``course.preview`` distances (the default course's by default).
    """

    def __init__(self, params: PurePursuitParams = PurePursuitParams(), spec: VehicleSpec = HUMVEE,
                 preview=CourseConfig().preview, driver: bool = False):
        self.params = params
        self.driver = driver
        self.L = spec.wheelbase
        self.delta_max = spec.max_steer
        self.a_drive = spec.max_drive_accel
        self.a_brake = spec.max_brake_accel
        self.preview = tuple(preview)
        self._i_vx, self._s_vx = OBS_INDEX["vx"], obs_scale("vx")
        self._i_vt, self._s_vt = OBS_INDEX["target_speed"], obs_scale("target_speed")
        self._i_pts = [OBS_INDEX[f"preview{k}_{c}"] for k in range(len(self.preview)) for c in ("x", "y")]
        self._s_pts = torch.tensor([obs_scale(f"preview{k}_{c}") for k in range(len(self.preview)) for c in ("x", "y")])

    @classmethod
    def for_env(cls, env_kwargs: dict | None = None, params: PurePursuitParams = PurePursuitParams()) -> "PurePursuit":
        """The controller for the env ``env_kwargs`` configure: its action interface (the pedals
        for ``action="driver"``) and its course's preview distances. The one way every script
        builds its reference, so a driver env is never scored with the acceleration action."""
        from ..envs import EnvConfig

        cfg = EnvConfig.from_dict(dict(env_kwargs or {}))
        return cls(params, preview=cfg.course.preview, driver=cfg.action == "driver")

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        prm = self.params
        vx = obs[:, self._i_vx] * self._s_vx
        v_target = obs[:, self._i_vt] * self._s_vt
        n = len(self.preview)
        pts = (obs[:, self._i_pts] * self._s_pts.to(obs)).reshape(-1, n, 2)  # body-frame preview points [m]
        d = torch.tensor(self.preview, dtype=obs.dtype, device=obs.device)
        la = (prm.lookahead_gain * vx).clamp(prm.lookahead_min, prm.lookahead_max)
        # interpolate the preview polyline at the lookahead distance
        j = torch.searchsorted(d, la.detach().unsqueeze(-1)).squeeze(-1).clamp(1, len(self.preview) - 1)
        d0, d1 = d[j - 1], d[j]
        w = ((la - d0) / (d1 - d0)).clamp(0.0, 1.0).unsqueeze(-1)
        idx = j.view(-1, 1, 1).expand(-1, 1, 2)
        p0 = torch.gather(pts, 1, idx - 1).squeeze(1)
        p1 = torch.gather(pts, 1, idx).squeeze(1)
        target = p0 + w * (p1 - p0)
        kappa = 2 * target[:, 1] / (target * target).sum(-1).clamp_min(1.0)
        steer = torch.atan(self.L * kappa) / self.delta_max
        far = pts[:, 2:]
        k_far = (2 * far[..., 1] / (far * far).sum(-1).clamp_min(1.0)).abs().amax(-1)
        v_cap = torch.sqrt(prm.lat_accel / k_far.clamp_min(1e-4))
        v_ref = torch.minimum(v_target, v_cap)
        a_cmd = prm.speed_gain * (v_ref - vx)
        if self.driver:
            throttle = (prm.throttle_hold + prm.throttle_gain * (v_ref - vx)).clamp(0.0, 1.0)
            brake = ((-a_cmd - prm.brake_deadband) / self.a_brake).clamp(0.0, 1.0)
            return torch.stack((steer.clamp(-1.0, 1.0), throttle, brake), -1)
        lon = torch.where(a_cmd >= 0, a_cmd / self.a_drive, a_cmd / self.a_brake)
        return torch.stack((steer, lon), -1).clamp(-1.0, 1.0)
