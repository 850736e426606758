"""Draw a task's course, ground height and friction for a seed (a picture), without driving.

    python envs/preview.py --seed 3 --out runs/preview/seed3.png
    python envs/preview.py --env-kwargs '{"ground": {"n_patches": 8}}'
"""

from __future__ import annotations

import os

import numpy as np
import torch

from dyn4_gym import cli


def preview(env_kwargs: dict, seed: int, out: str, n: int = 200) -> dict:
    """Write the picture; returns the course's figures (length, curvature, height and friction ranges)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dyn4_gym.envs import Dyn4Env

    env = Dyn4Env(engine="torch", **env_kwargs)  # the torch state samples any ground kind
    env.reset(seed=seed)
    st = env.state
    core = env.core
    xy = st.course_xy[0].double().numpy()
    heading = st.course_heading[0].double().numpy()
    hw = core.cfg.course.half_width
    lo, hi = xy.min(0) - 3 * hw, xy.max(0) + 3 * hw
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], n), np.linspace(lo[1], hi[1], n))
    pts = torch.as_tensor(np.stack((gx, gy), -1).reshape(1, -1, 2), dtype=core.dtype)
    with torch.no_grad():
        mu, h = st.terrain(pts)
    mu, h = mu.reshape(n, n).double().numpy(), h.reshape(n, n).double().numpy()
    nrm = np.stack((-np.sin(heading), np.cos(heading)), -1)
    fig, ax = plt.subplots(1, 2, figsize=(13, 5.5))
    ext = (lo[0], hi[0], lo[1], hi[1])
    for a, field, title, cmap in ((ax[0], h, "ground height [m]", "terrain"), (ax[1], mu, "friction mu", "YlOrBr_r")):
        im = a.imshow(field, origin="lower", extent=ext, cmap=cmap, aspect="equal")
        fig.colorbar(im, ax=a, shrink=0.8)
        a.plot(xy[:, 0], xy[:, 1], "k--", lw=0.8)
        for side in (1, -1):
            edge = xy + side * hw * nrm
            a.plot(edge[:, 0], edge[:, 1], "k", lw=1.0)
        a.plot(*xy[0], "go", ms=6)
        a.plot(*xy[-1], "rs", ms=6)
        a.set_title(title)
        a.set_xlabel("X [m]")
        a.set_ylabel("Y [m]")
    spacing = core.cfg.course.spacing
    kappa = np.abs(np.diff(heading)) / spacing
    figures = dict(length=float((len(xy) - 1) * spacing), max_curvature=float(kappa.max()),
                   height_range=(float(h.min()), float(h.max())), mu_range=(float(mu.min()), float(mu.max())))
    fig.suptitle(f"seed {seed}: {figures['length']:.0f} m course, |curvature| <= {figures['max_curvature']:.4f} 1/m, "
                 f"target {core.cfg.target_speed} m/s")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return figures


def parse_args(argv=None):
    ap = cli.Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=cli.seed, default=0)
    ap.add_output("--out", "runs/preview/course.png", kind="file")
    ap.add_env_kwargs()
    return ap.parse_args(argv)


@cli.script
def main(argv=None):
    args = parse_args(argv)
    figures = preview(args.env_kwargs, args.seed, args.out)
    print(", ".join(f"{k} {v}" for k, v in figures.items()), "->", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
