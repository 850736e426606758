"""Top-down rendering with matplotlib (the ``plot`` extra), imported only when asked for.

The view follows the car: the course and its corridor, friction patches shaded by mu (darker
is grippier), bumps, and the car with its four wheels coloured by load relative to static
(blue light, red heavy).
"""

from __future__ import annotations

import numpy as np
import torch

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

    def draw(self, state, row: int = 0):
        from matplotlib.patches import Circle, Polygon

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
        for j in range(ter.patch_x.shape[1]):
            mu = float(ter.patch_mu[row, j])
            ax.add_patch(Circle((float(ter.patch_x[row, j]), float(ter.patch_y[row, j])), float(ter.patch_r[row, j]),
                                color=(0.45, 0.35, 0.2), alpha=0.15 + 0.5 * (mu - 0.3), lw=0))
        ax.plot(xy[:, 0], xy[:, 1], color="0.5", lw=0.8, ls="--")
        for side in (1, -1):
            edge = xy + side * hw * nrm
            ax.plot(edge[:, 0], edge[:, 1], color="k", lw=1.2)
        ax.scatter(ter.bump_x[row].cpu().numpy(), ter.bump_y[row].cpu().numpy(), s=12, c="tab:orange", marker="^")
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
