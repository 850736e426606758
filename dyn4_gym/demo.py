"""The main job on built-in defaults: drive the Humvee through the standard manoeuvres.

``python -m dyn4_gym.demo`` runs a skidpad, a full-brake stop, a mu-split stop, a bump and a
steering weave over hills on the four-wheel plant, prints the envelope figures next to their
references and each manoeuvre's energy books, and writes a plot of the trajectories and the
wheel loads (``runs/demo/manoeuvres.png`` by default). Then the powertrain: a full-throttle run
from rest (speed, gear and engine speed against time) and a fuel table of steady cruises, with
their plot (``runs/demo/powertrain.png``).
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from . import cli
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
    pt = powertrain_section(out_dir, quick)
    return dict(skidpad=pad["ay_max"], stop=st["distance"], mu_split_yaw=split["yaw"],
                bump_peak=bp["peak_ratio"].tolist(), weave_books=wv["books"], plot=path, powertrain=pt)


def _drive(seconds, hdt, pedals):
    """Drive on Flat(mu=0.8) from rest with ``pedals(t, vx) -> (steer, throttle, brake)``, on the
    Numba engine; per-substep speed [m/s], gear, engine speed [rpm], x [m] and the powertrain's
    books (POWERTRAIN_LINES) summed over the last half."""
    from .engine import numba_plant
    from .engine.numba_powertrain import drive_step_np, pack_powertrain
    from .model.books import POWERTRAIN_LINES
    from .plant import dyn4_rest
    from .plant.powertrain import HUMVEE_POWERTRAIN, powertrain_rest

    p = dyn4_params(HUMVEE, dtype=torch.float64)
    g = Flat(mu=0.8)
    packed, ppt, ter = numba_plant.pack_params(p), pack_powertrain(HUMVEE_POWERTRAIN), numba_plant.pack_terrain(g, 1)
    x, s = dyn4_rest(p, g, (1,)).numpy(), powertrain_rest(HUMVEE_POWERTRAIN, (1,)).numpy()
    n = int(round(seconds / hdt))
    trace = np.empty((n + 1, 4))
    trace[0] = x[0, 3], s[0, 1], s[0, 0] * 30 / np.pi, x[0, 0]
    late = np.zeros(len(POWERTRAIN_LINES))
    for k in range(n):
        u = np.asarray([pedals(k * hdt, x[0, 3])], dtype=np.float64)
        x, s, _, pb = drive_step_np(x, s, u, packed, ppt, ter, hdt, books=True)
        trace[k + 1] = x[0, 3], s[0, 1], s[0, 0] * 30 / np.pi, x[0, 0]
        if k >= n // 2:
            late += pb[0]
    return trace, dict(zip(POWERTRAIN_LINES, late))


def powertrain_section(out_dir: str, quick: bool = False) -> dict:
    """The full-throttle run and the fuel table (printed), and their plot."""
    from .plant.powertrain import HUMVEE_POWERTRAIN as PT

    hdt = 0.01
    seconds = 40.0 if quick else 80.0
    full, _ = _drive(seconds, hdt, lambda t, v: (0.0, 1.0, 0.0))
    v_kmh = full[:, 0] * 3.6

    def t_to(k):
        i = np.flatnonzero(v_kmh >= k)
        return i[0] * hdt if i.size else float("nan")

    print()
    print(f"powertrain: full throttle from rest, flat ground, mu 0.8 ({seconds:.0f} s)")
    print(f"{'t [s]':>7s}{'speed [km/h]':>14s}{'gear':>6s}{'engine [rpm]':>14s}")
    for t in (0, 1, 2, 4, 6, 10, 15, 20, 30, 40, 60, 80):
        if t <= seconds:
            i = int(round(t / hdt))
            print(f"{t:7.0f}{v_kmh[i]:14.1f}{int(full[i, 1]):6d}{full[i, 2]:14.0f}")
    shifts = [(i * hdt, int(full[i, 1]), int(full[i + 1, 1])) for i in range(len(full) - 1) if full[i + 1, 1] != full[i, 1]]
    print("shifts: " + ", ".join(f"{a}->{b} at {t:.2f} s" for t, a, b in shifts))
    figures = dict(t_0_48=t_to(48.0), t_0_80=t_to(80.0), v_top=float(v_kmh[-1]))
    print(f"0-48 km/h {figures['t_0_48']:.1f} s, 0-80 km/h {figures['t_0_80']:.1f} s, {figures['v_top']:.1f} km/h "
          f"after {seconds:.0f} s (published M998 top speed: 105 km/h; see tests/test_powertrain.py)")
    print()
    print("fuel on steady cruises (PI cruise control; the last half of each run)")
    cols = ("L/100 km", "MJ/km", "engine", "converter", "driveline", "at wheels")
    print(f"{'cruise':>12s}" + "".join(f"{c:>11s}" for c in cols) + "   (shares of the fuel)")
    table = []
    for kmh in ((30.0, 60.0) if quick else (30.0, 45.0, 60.0, 80.0)):
        state = {"i": 0.0}

        def pedals(t, v, target=kmh / 3.6, st=state):
            err = target - v
            st["i"] += err * hdt
            return 0.0, min(max(0.3 * err + 0.05 * st["i"], 0.0), 1.0), 0.0

        tr, late = _drive(120.0, hdt, pedals)  # settled by 60 s at 80 km/h (rotating parts in)
        half = len(tr) // 2
        dist = tr[-1, 3] - tr[half, 3]
        fuel = late["fuel"]
        row = dict(kmh=kmh, l_100km=fuel / (PT.fuel_lhv * PT.fuel_density) / dist * 1e5, mj_km=fuel / dist / 1e3,
                   engine=late["engine"] / fuel, converter=late["converter"] / fuel,
                   driveline=late["driveline"] / fuel, wheels=late["drive"] / fuel)
        table.append(row)
        print(f"{kmh:9.0f} km/h" + "".join(f"{row[k]:11.2f}" if k in ("l_100km", "mj_km") else f"{row[k]:11.1%}"
                                           for k in ("l_100km", "mj_km", "engine", "converter", "driveline", "wheels")))
    path = os.path.join(out_dir, "powertrain.png")
    _plot_powertrain(path, full, hdt, table)
    print(f"plot written to {path}")
    return dict(figures, fuel=table, plot=path)


def _plot_powertrain(path, full, hdt, table) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.arange(len(full)) * hdt
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    ax[0].plot(t, full[:, 0] * 3.6)
    ax[0].set(xlabel="t [s]", ylabel="speed [km/h]", title="full throttle from rest")
    ax[1].plot(t, full[:, 2], color="tab:red", label="engine [rpm]")
    ax[1].set(xlabel="t [s]", ylabel="engine [rpm]", title="engine speed and gear")
    tw = ax[1].twinx()
    tw.step(t, full[:, 1], color="k", where="post", label="gear")
    tw.set(ylabel="gear", yticks=[1, 2, 3])
    kmh = [r["kmh"] for r in table]
    ax[2].plot(kmh, [r["l_100km"] for r in table], "o-")
    ax[2].set(xlabel="steady speed [km/h]", ylabel="L/100 km", title="fuel on steady cruises")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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


def parse_args(argv=None):
    ap = cli.Parser(prog="python -m dyn4_gym.demo", description=__doc__.splitlines()[0])
    ap.add_output("--out", "runs/demo", help="folder for the plot")
    ap.add_argument("--quick", action="store_true", help="fewer skidpad angles (for tests)")
    return ap.parse_args(argv)


@cli.script
def main(argv=None) -> None:
    args = parse_args(argv)
    cli.require("matplotlib", "the demo's plots")  # before the minutes of manoeuvres, not after
    run(args.out, args.quick)


def console() -> int:
    """The ``dyn4-gym-demo`` console command: the plant's manoeuvres."""
    main()
    return 0


if __name__ == "__main__":
    main()
