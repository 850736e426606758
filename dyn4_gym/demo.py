"""The main job on built-in defaults: drive the Humvee through the standard manoeuvres.

``python -m dyn4_gym.demo`` runs a skidpad, a full-brake stop, a mu-split stop, a bump and a
steering weave over hills on the four-wheel plant, prints the envelope figures next to their
references and each manoeuvre's energy books, and writes a plot of the trajectories and the
wheel loads (``runs/demo/manoeuvres.png`` by default).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from .ground import Flat, MuSplit
from .plant import HUMVEE, dyn4_params
from .ground import Hills
from .plant.manoeuvres import bump, kinematic_stop, mu_split_stop, skidpad, stop, weave

JOLT_SKIDPAD = 6.85  # m/s^2, the seeds' Jolt Humvee (anchor_figures.json)
JOLT_STOP = 25.90  # m from 20 m/s at mu 0.8


def run(out_dir: str = "runs/demo", quick: bool = False) -> dict:
    """Run the manoeuvres, print the table, write the plot; returns the figures."""
    t0 = time.perf_counter()
    p = dyn4_params(HUMVEE, dtype=torch.float64)
    mu = 0.8
    pad = skidpad(p, Flat(mu=mu), deltas=(0.12, 0.26) if quick else (0.08, 0.12, 0.18, 0.26),
                  t_max=40.0 if quick else 60.0)
    st = stop(p, Flat(mu=mu))
    split = mu_split_stop(p, MuSplit(mu_left=0.8, mu_right=0.3))
    bp = bump(p)
    wv = weave(p, Hills(), t=4.0 if quick else 8.0)
    rows = [
        ("skidpad: peak sustained a_y [m/s^2]", pad["ay_max"], f"Jolt {JOLT_SKIDPAD:.2f}; mu g = {mu * 9.81:.2f}"),
        ("stop from 20 m/s at mu 0.8 [m]", st["distance"], f"Jolt {JOLT_STOP:.2f}; v^2/(2 mu g) = {kinematic_stop(20.0, mu):.2f}"),
        ("mu-split stop (0.8 L / 0.3 R): yaw after 1.8 s [rad]", split["yaw"], "> 0: toward the high-mu side"),
        ("bump under FL: peak load / static, FL", bp["peak_ratio"][0], f"FR {bp['peak_ratio'][1]:.2f}"),
    ]
    print(f"dyn4-gym demo: {HUMVEE.name}, four-wheel plant, hdt 0.01 s")
    print(f"{'figure':58s} {'value':>9s}  reference")
    for name, value, ref in rows:
        print(f"{name:58s} {value:9.3f}  {ref}")
    print()
    print("energy books [kJ] (dH = supplied - dissipated + lever + grade + ground + limiter + residual)")
    cols = ("dH", "supplied", "tire", "damper", "drag", "lever", "ground", "limiter", "residual")
    print(f"{'manoeuvre':30s}" + "".join(f"{c:>10s}" for c in cols))
    for name, b in (("stop from 20 m/s", st["books"]), ("mu-split stop", split["books"]),
                    ("bump at 5 m/s", bp["books"]), (f"weave over hills ({wv['past_peak']:.0%} past peak)", wv["books"])):
        print(f"{name:30s}" + "".join(f"{float(getattr(b, c).sum()) / 1e3:10.2f}" for c in cols))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "manoeuvres.png")
    _plot(path, st, split, bp)
    print(f"plot written to {path} ({time.perf_counter() - t0:.1f} s)")
    return dict(skidpad=pad["ay_max"], stop=st["distance"], mu_split_yaw=split["yaw"],
                bump_peak=bp["peak_ratio"].tolist(), weave_books=wv["books"], plot=path)


def _plot(path, st, split, bp) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    tr = st["trace"]
    ax[0].plot(tr[:, 0], tr[:, 1], label="stop, mu 0.8")
    tr = split["trace"]
    ax[0].plot(tr[:, 0], tr[:, 1], label="stop, mu split 0.8 / 0.3")
    ax[0].set(xlabel="X [m]", ylabel="Y [m]", title="trajectories")
    ax[0].axis("equal")
    ax[0].legend()
    t = np.arange(len(split["trace"])) * 0.01
    ax[1].plot(t, split["trace"][:, 2], label="yaw [rad]")
    ax[1].plot(t, split["trace"][:, 3] / 20.0, label="vx / 20 m/s")
    ax[1].set(xlabel="t [s]", title="mu-split stop")
    ax[1].legend()
    t = np.arange(len(bp["loads"])) * 0.01
    for i, name in enumerate(("FL", "FR", "RL", "RR")):
        ax[2].plot(t, bp["loads"][:, i] / 1e3, label=name)
    ax[2].set(xlabel="t [s]", ylabel="load [kN]", title="wheel loads over a bump under FL")
    ax[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/demo", help="folder for the plot")
    ap.add_argument("--quick", action="store_true", help="fewer skidpad angles (for tests)")
    args = ap.parse_args(argv)
    run(args.out, args.quick)


if __name__ == "__main__":
    main()
