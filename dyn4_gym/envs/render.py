"""Top-down rendering with matplotlib (the ``plot`` extra), imported only when asked for.

The view follows the car: the ground's friction shaded (darker is grippier) and its height in
contours, for any terrain kind; the course and its corridor; and the car with its four wheels coloured by load relative to static
(blue light, red heavy).
"""

from __future__ import annotations

import numpy as np
import torch

from .._tree import take_rows
from ..plant.corners import forces_at

__all__ = ["TopDownRenderer"]


class TopDownRenderer:
    def __init__(self, core, human: bool = False, size: int = 480, span: float = 60.0):
        import matplotlib

        if not human:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        self.plt = plt
        self.core = core
        self.human = human
        self.span = span
        self.fig, self.ax = plt.subplots(figsize=(size / 100, size / 100), dpi=100)
        if human:
            plt.ion()

    def _ground_image(self, ter, row: int, centre, n: int = 160):
        """Friction (shaded) and height (contours) of any terrain kind, sampled over the view."""
        side = self.span
        lo = np.asarray(centre) - side / 2
        gx, gy = np.meshgrid(np.linspace(lo[0], lo[0] + side, n), np.linspace(lo[1], lo[1] + side, n))
        pts = torch.as_tensor(np.stack((gx, gy), -1).reshape(1, -1, 2), dtype=self.core.dtype, device=self.core.device)
        with torch.no_grad():
            mu, h = take_rows(ter, slice(row, row + 1))(pts)
        mu = mu.reshape(n, n).double().cpu().numpy()
        h = h.reshape(n, n).double().cpu().numpy()
        ext = (lo[0], lo[0] + side, lo[1], lo[1] + side)
        self.ax.imshow(mu, origin="lower", extent=ext, cmap="YlOrBr_r", vmin=0.2, vmax=1.2, alpha=0.45)
        if float(h.max() - h.min()) > 1e-6:
            self.ax.contour(gx, gy, h, levels=8, colors="0.55", linewidths=0.4)

    def draw(self, state, row: int = 0):
        from matplotlib.patches import Polygon

        core, ax = self.core, self.ax
        ax.clear()
        with torch.no_grad():
            x = state.x[row].double().cpu().numpy()
            xy = state.course_xy[row].double().cpu().numpy()
            th = state.course_heading[row].double().cpu().numpy()
            ter = state.terrain
            f = forces_at(state.x, state.x[:, 12], state.x[:, 13], core.p, ter)
            load = (f.Fz[row] / core.p.Fz0).double().cpu().numpy()
        hw = core.cfg.course.half_width
        nrm = np.stack((-np.sin(th), np.cos(th)), -1)
        self._ground_image(ter, row, x[:2])
        ax.plot(xy[:, 0], xy[:, 1], color="0.5", lw=0.8, ls="--")
        for side in (1, -1):
            edge = xy + side * hw * nrm
            ax.plot(edge[:, 0], edge[:, 1], color="k", lw=1.2)
        c, s = np.cos(x[2]), np.sin(x[2])
        rot = np.array([[c, -s], [s, c]])
        p = core.p
        lf, lr = float(p.lf), float(p.lr)
        w = float(p.y_w[0]) + 0.25
        body = np.array([[lf + 0.9, w], [lf + 0.9, -w], [-lr - 0.9, -w], [-lr - 0.9, w]]) @ rot.T + x[:2]
        ax.add_patch(Polygon(body, closed=True, fc=(0.35, 0.45, 0.3), ec="k", lw=1.0))
        cmap = self.plt.get_cmap("coolwarm")
        for i in range(4):
            cx, cy = float(p.x_w[i]), float(p.y_w[i])
            d = float(state.x[row, 12]) if i < 2 else 0.0
            cd, sd = np.cos(d), np.sin(d)
            wheel = np.array([[0.47, 0.16], [0.47, -0.16], [-0.47, -0.16], [-0.47, 0.16]])
            wheel = wheel @ np.array([[cd, -sd], [sd, cd]]).T + [cx, cy]
            ax.add_patch(Polygon(wheel @ rot.T + x[:2], closed=True,
                                 fc=cmap(float(np.clip(0.5 + (load[i] - 1.0), 0, 1))), ec="k", lw=0.6))
        half = self.span / 2
        ax.set_xlim(x[0] - half, x[0] + half)
        ax.set_ylim(x[1] - half, x[1] + half)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(f"v {x[3]:.1f} m/s   s {float(state.s[row]):.0f} m   t {int(state.t[row]) * core.cfg.control_dt:.1f} s",
                     fontsize=9)
        self.fig.canvas.draw()
        img = np.asarray(self.fig.canvas.buffer_rgba())[..., :3].copy()
        if self.human:
            self.plt.pause(0.001)
        return img

    def close(self):
        self.plt.close(self.fig)
