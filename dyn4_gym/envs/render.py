"""Top-down rendering with pygame (the ``render`` extra), imported only when asked for, as
Gymnasium's own classic-control envs draw.

The view follows the car, north up, ``span`` metres across: the ground's friction shaded (darker
is grippier; any terrain kind) with its height as light and shade, the course's centre line and
its corridor, the car with its four wheels (steered at the front, coloured by load relative to
static: blue light, red heavy) and its heading, and a readout of speed, steer, distance and time.
``rgb_array`` draws off-screen (no display needed); ``human`` shows the same frame in a window.
Measured here: about 2 ms a frame at 480 x 480 (benchmarks/env.py --render), against 183 ms for
the matplotlib renderer it replaced.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from .._tree import take_rows, tree_map
from ..model.state import DYN4
from ..plant.corners import forces_at
from .course import corridor_edges

__all__ = ["TopDownRenderer", "import_pygame", "check_render_mode", "renderer_for"]

GROUND_CELL = 0.5  # [m] the ground is sampled once an episode on this grid, then scaled per frame


def import_pygame():
    """pygame, or an ``ImportError`` (:class:`dyn4_gym.cli.MissingExtra`) naming the extra."""
    from .._extras import require

    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    return require("pygame", "rendering")


def check_render_mode(render_mode, modes) -> None:
    """A face's ``render_mode``: None or one of ``modes`` (``ValueError``); a mode needs pygame,
    named now (:func:`import_pygame`), not at the first frame."""
    if render_mode is None:
        return
    if render_mode not in modes:
        raise ValueError(f"render_mode must be None or one of {list(modes)}, got {render_mode!r}")
    import_pygame()


def renderer_for(renderer, core, human: bool = False) -> "TopDownRenderer":
    """``renderer`` if it draws ``core``'s task, else a new one (options may have changed the
    task since it was made); the old one is closed."""
    if renderer is not None and renderer.core is core:
        return renderer
    if renderer is not None:
        renderer.close()
    return TopDownRenderer(core, human=human)


def _load_colour(load: np.ndarray) -> np.ndarray:
    """Wheel load relative to static -> RGB (blue at 0.5, white at 1, red at 1.5; clipped)."""
    t = np.clip(load - 1.0, -0.5, 0.5)[:, None] * 2.0  # -1 .. 1
    white, blue, red = np.array([235.0, 235, 235]), np.array([59.0, 76, 192]), np.array([180.0, 4, 38])
    return np.where(t < 0, white + (white - blue) * t, white + (red - white) * t).astype(int)


class TopDownRenderer:
    """Draws one row of a task state: ``draw(state, row) -> (size, size, 3) uint8``."""

    def __init__(self, core, human: bool = False, size: int = 480, span: float = 60.0):
        self.pg = pg = import_pygame()
        self.core, self.human, self.size, self.span = core, human, int(size), float(span)
        self.scale = self.size / self.span  # [px / m]
        if human:
            pg.display.init()
            self.window = pg.display.set_mode((self.size, self.size))
            pg.display.set_caption("dyn4-gym")
            self.clock = pg.time.Clock()
        self.surface = pg.Surface((self.size, self.size))
        pg.font.init()
        self.font = pg.font.Font(None, 20)
        self._grounds = {}  # row -> (episode fingerprint, ground surface, its world origin [m])

    def _px(self, pts: np.ndarray, centre: np.ndarray) -> np.ndarray:
        """World points ``(..., 2)`` [m] -> pixel coordinates (x right, y down)."""
        d = (pts - centre) * self.scale
        return np.stack((self.size / 2 + d[..., 0], self.size / 2 - d[..., 1]), -1)

    def _ground_surface(self, state, row: int, xy: np.ndarray):
        """The row's ground over its whole course (plus half a view around it), drawn once an
        episode: friction as colour (darker is grippier), height as light and shade (its
        x-slope, lit from the west), one pixel per ``GROUND_CELL``; north is up."""
        pg = self.pg
        fp = (int(state.key[row]), int(state.episode[row]), float(xy[-1, 0]), float(xy[-1, 1]))
        cached = self._grounds.get(row)
        if cached is not None and cached[0] == fp:
            return cached[1], cached[2]
        margin = self.span / 2 + float(self.core.widths.max()) + 5.0  # the view while the car is on the corridor
        lo, hi = xy.min(0) - margin, xy.max(0) + margin
        nx, ny = (np.ceil((hi - lo) / GROUND_CELL)).astype(int)
        gx = lo[0] + (np.arange(nx) + 0.5) * GROUND_CELL
        gy = hi[1] - (np.arange(ny) + 0.5) * GROUND_CELL  # image row 0 at the top (north)
        pts = np.stack(np.meshgrid(gx, gy), -1).reshape(1, -1, 2)
        with torch.no_grad():
            mu, h = take_rows(state.terrain, slice(row, row + 1))(
                torch.as_tensor(pts, dtype=self.core.dtype, device=self.core.device))
        mu = mu.reshape(ny, nx).double().cpu().numpy()
        h = h.reshape(ny, nx).double().cpu().numpy()
        shade = np.clip(np.gradient(h, axis=1) / GROUND_CELL * 2.0, -0.25, 0.25) if nx > 1 else 0.0
        g = np.clip(1.2 - mu, 0.0, 1.0)  # 0 grippy .. 1 slippery
        rgb = np.stack((150 + 90 * g, 120 + 110 * g, 80 + 150 * g), -1) * (1.0 - shade)[..., None]
        surf = pg.surfarray.make_surface(np.clip(rgb, 0, 255).astype(np.uint8).transpose(1, 0, 2))
        origin = np.array([lo[0], hi[1]])  # the world point at the image's top-left corner
        self._grounds[row] = (fp, surf, origin)
        return surf, origin

    def _ground(self, state, row: int, xy: np.ndarray, centre: np.ndarray):
        """Blit the part of the row's ground under the view, scaled to the frame."""
        pg = self.pg
        surf, origin = self._ground_surface(state, row, xy)
        # the view's top-left corner in ground pixels, split into whole cells and a remainder
        corner = np.array([(centre[0] - self.span / 2 - origin[0]), (origin[1] - (centre[1] + self.span / 2))]) / GROUND_CELL
        whole = np.floor(corner).astype(int)
        n = int(np.ceil(self.span / GROUND_CELL)) + 2
        rect = pg.Rect(int(whole[0]), int(whole[1]), n, n).clip(surf.get_rect())
        if rect.w <= 0 or rect.h <= 0:
            self.surface.fill((200, 190, 170))
            return
        k = GROUND_CELL * self.scale  # frame pixels per ground pixel
        crop = pg.transform.scale(surf.subsurface(rect), (int(round(rect.w * k)), int(round(rect.h * k))))
        self.surface.fill((200, 190, 170))
        self.surface.blit(crop, (int(round((rect.x - corner[0]) * k)), int(round((rect.y - corner[1]) * k))))

    def draw(self, state, row: int = 0, loads: np.ndarray | None = None) -> np.ndarray | None:
        """Draw ``row`` of ``state`` (a :class:`TaskState`); ``loads (B, 4)`` relative wheel loads
        of every row if the caller has them (a vector env drawing all rows computes them once)."""
        pg, core, surf = self.pg, self.core, self.surface
        with torch.no_grad():
            x = state.x[row].double().cpu().numpy()
            xy = state.course_xy[row].double().cpu().numpy()
            th = state.course_heading[row].double().cpu().numpy()
            if loads is None:
                loads = self.loads(state)
        centre = x[:2]
        self._ground(state, row, xy, centre)
        # the course: centre line and corridor, only the points near the view
        near = np.abs(xy - centre).max(-1) < self.span
        if near.sum() >= 2:
            idx = np.flatnonzero(near)
            seg = slice(idx[0], idx[-1] + 1)
            pg.draw.lines(surf, (110, 110, 110), False, self._px(xy[seg], centre).tolist(), 1)
            for edge in corridor_edges(xy[seg], th[seg], core.widths[seg]):  # the corridor's own widths
                pg.draw.lines(surf, (20, 20, 20), False, self._px(edge, centre).tolist(), 2)
        # the car: body, wheels (front ones steered), a heading mark
        p = core.params_of(state)
        p = p if state.p is None else tree_map(lambda t: t[row], p)  # the row's own vehicle
        c, s = np.cos(x[2]), np.sin(x[2])
        rot = np.array([[c, -s], [s, c]])
        lf, lr, w = float(p.lf), float(p.lr), float(p.y_w[0]) + 0.25
        body = np.array([[lf + 0.9, w], [lf + 0.9, -w], [-lr - 0.9, -w], [-lr - 0.9, w]]) @ rot.T + centre
        pg.draw.polygon(surf, (89, 115, 77), self._px(body, centre).tolist())
        pg.draw.polygon(surf, (0, 0, 0), self._px(body, centre).tolist(), 1)
        colours = _load_colour(np.asarray(loads[row], dtype=np.float64))
        wheel = np.array([[0.47, 0.16], [0.47, -0.16], [-0.47, -0.16], [-0.47, 0.16]])
        for i in range(4):
            d = float(x[12]) if i < 2 else 0.0
            cd, sd = np.cos(d), np.sin(d)
            pts = (wheel @ np.array([[cd, -sd], [sd, cd]]).T + [float(p.x_w[i]), float(p.y_w[i])]) @ rot.T + centre
            pg.draw.polygon(surf, colours[i].tolist(), self._px(pts, centre).tolist())
            pg.draw.polygon(surf, (0, 0, 0), self._px(pts, centre).tolist(), 1)
        nose = np.array([[lf + 0.9, 0.0], [lf + 2.4, 0.0]]) @ rot.T + centre
        pg.draw.line(surf, (250, 250, 250), *self._px(nose, centre).tolist(), 2)
        # the readout
        steer = float(x[12]) / float(p.delta_max)
        text = (f"v {x[3]:5.1f} m/s  steer {steer:+.2f}  s {float(state.s[row]):5.0f} m  "
                f"t {int(state.t[row]) * core.cfg.control_dt:5.1f} s")
        pg.draw.rect(surf, (255, 255, 255), (0, 0, self.size, 20))
        surf.blit(self.font.render(text, True, (0, 0, 0)), (6, 3))
        if self.human:
            self.pg.event.pump()
            self.window.blit(surf, (0, 0))
            self.pg.display.flip()
            self.clock.tick(round(1.0 / core.cfg.control_dt))
        return np.ascontiguousarray(pg.surfarray.array3d(surf).transpose(1, 0, 2))

    def draw_all(self, state) -> list:
        """Every row's frame (the wheel loads computed once for all of them)."""
        loads = self.loads(state)
        return [self.draw(state, i, loads) for i in range(state.batch_size)]

    def loads(self, state) -> np.ndarray:
        """``(B, 4)`` wheel loads relative to static, every row."""
        with torch.no_grad():
            p = self.core.params_of(state)
            f = forces_at(state.x, state.x[:, DYN4.DELTA], state.x[:, DYN4.A], p, state.terrain)
            return (f.Fz / p.Fz0).double().cpu().numpy()

    def close(self):
        if self.human:
            self.pg.display.quit()
