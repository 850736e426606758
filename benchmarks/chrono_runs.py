"""The plant against Project Chrono's HMMWV on the two public reference runs LFDM validates its
18-DOF model against (issue 22): position RMS over each run, beside LFDM's published figures.

The runs (uwsbel/low-fidelity-dynamic-models at 992faca, MIT; bundled in
``dyn4_gym/data/chrono_runs/`` with the licence): driver inputs ``acc.txt`` and ``steer.txt``
(time [s], steer in [-1, 1], throttle, brake in [0, 1], linearly interpolated between the rows)
and Chrono's trajectories ``chrono_acc.txt`` / ``chrono_steer.txt`` (time, x, y at 100 Hz), from
rest at the origin heading +x on flat ground. Our plant is driven through its powertrain
(``drive_step``, steer times the preset's max steer) from the same rest state on ``Flat(mu)``,
with the M998 preset and the Chrono preset (``HMMWV_CHRONO``, ``HMMWV_CHRONO_POWERTRAIN``).

Nothing here is fitted to these traces: they are a gate, never a target.

    python benchmarks/chrono_runs.py [--mu 0.8] [--presets m998 chrono] [--plot docs/chrono_runs.png]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from dyn4_gym.ground import Flat
from dyn4_gym.plant import dyn4_params, dyn4_rest
from dyn4_gym.plant.drive import drive_step
from dyn4_gym.plant.powertrain import powertrain_rest
from dyn4_gym.plant.presets import PRESETS
from dyn4_gym.fit.chrono import load_run

LFDM_RMS = {"acc": 2.38, "steer": 3.61}  # [m] LFDM's 18-DOF model against the same Chrono runs (issue 22)
D = torch.float64


def drive(inputs: np.ndarray, t: np.ndarray, p, pt, mu: float, hdt: float = 0.01) -> np.ndarray:
    """Our plant's ``(x, y)`` at times ``t`` (multiples of ``hdt``) under the interpolated inputs."""
    g = Flat(mu=mu)
    x = dyn4_rest(p, g, (1,))
    s = powertrain_rest(pt, (1,))
    n = int(round(t[-1] / hdt))
    out = np.empty((n + 1, 2))
    out[0] = x[0, :2].numpy()
    with torch.no_grad():
        for k in range(n):
            tk = k * hdt
            u = [np.interp(tk, inputs[:, 0], inputs[:, j]) for j in (1, 2, 3)]
            drv = torch.tensor([[u[0], u[1], u[2], 1.0]], dtype=D)
            x, s = drive_step(x, s, drv, p, pt, g, hdt)
            out[k + 1] = x[0, :2].numpy()
    idx = np.round(t / hdt).astype(int)
    return out[idx]


def rms(name: str, preset: str, mu: float = 0.8) -> tuple[float, np.ndarray, np.ndarray]:
    """``(position RMS [m], Chrono's (m, 3) trace, ours (m, 2))`` of run ``name`` with a preset."""
    spec, pt = PRESETS[preset]
    inputs, ref = load_run(name)
    ours = drive(inputs, ref[:, 0], dyn4_params(spec, dtype=D), pt, mu)
    err = np.hypot(ours[:, 0] - ref[:, 1], ours[:, 1] - ref[:, 2])
    return float(np.sqrt(np.mean(err ** 2))), ref, ours


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mu", type=float, default=0.8)
    ap.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    ap.add_argument("--plot", type=str, default=None)
    return ap.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    results = {}
    curves = {}
    for preset in args.presets:
        for name in ("acc", "steer"):
            r, ref, ours = rms(name, preset, args.mu)
            results[(preset, name)] = r
            curves[(preset, name)] = (ref, ours)
            print(f"{preset:6s} {name:6s} run ({ref[-1, 0]:.1f} s): position RMS {r:6.2f} m; LFDM 18-DOF "
                  f"{LFDM_RMS[name]:.2f} m; Chrono ends at ({ref[-1, 1]:.1f}, {ref[-1, 2]:.1f}), ours at "
                  f"({ours[-1, 0]:.1f}, {ours[-1, 1]:.1f})")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
        for ax, name in zip(axes, ("acc", "steer")):
            ref = curves[(args.presets[0], name)][0]
            straight = name == "acc"  # a straight run: distance against time says more than the path
            ax.plot(ref[:, 0] if straight else ref[:, 1], ref[:, 1] if straight else ref[:, 2], "k-",
                    label="Chrono HMMWV")
            for k, preset in enumerate(args.presets):
                ours = curves[(preset, name)][1]
                ax.plot(ref[:, 0] if straight else ours[:, 0], ours[:, 0] if straight else ours[:, 1], f"C{k}--",
                        label=f"dyn4 {preset} preset (RMS {results[(preset, name)]:.2f} m)")
            if straight:
                ax.set_title("acc run: distance"), ax.set_xlabel("t [s]"), ax.set_ylabel("x [m]")
            else:
                ax.set_title(f"{name} run: path"), ax.set_xlabel("x [m]"), ax.set_ylabel("y [m]"), ax.axis("equal")
            ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"wrote {args.plot}")
    return results


if __name__ == "__main__":
    main()
