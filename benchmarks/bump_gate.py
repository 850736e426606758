"""The bump gate (issue 45, item 6): the front-left wheel's peak load over bumps of two lengths and
two heights at 5-30 m/s, against a two-mass quarter-car, over four sample phases a crossing.

The rule, written in docs/plant.md ("Bumps at speed") before this ran: the M998 preset in
float64; the reference ``dyn4_gym.plant.quarter_car`` with Chrono's unsprung mass and LFDM's
TMeasy tire stiffness; **peak** (the mean over the phases of the plant's peak load over static)
within 15 % of the reference's in every cell; **phase spread** ((max - min) / (2 mean) over the
phases) within 3 % at 30 m/s for every shape.

    python benchmarks/bump_gate.py [--speeds 5 10 20 30] [--hdt 0.01] [--json out.json]
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from dyn4_gym import cli
from dyn4_gym.plant import HUMVEE, dyn4_params
from dyn4_gym.plant.manoeuvres import bump_peaks
from dyn4_gym.plant.quarter_car import UNSPRUNG, quarter_car_peak, tire_stiffness

LENGTHS = (0.5, 1.0)  # [m], the bump's length (twice its radius)
HEIGHTS = (0.05, 0.10)  # [m]
SPEEDS = (5.0, 10.0, 20.0, 30.0)  # [m/s]
PHASES = (0.0, 0.25, 0.5, 0.75)  # of a substep
PEAK_TOL, SPREAD_TOL, SPREAD_SPEED = 0.15, 0.03, 30.0  # the rule's two figures and where the second counts


def measure(lengths=LENGTHS, heights=HEIGHTS, speeds=SPEEDS, phases=PHASES, hdt: float = 0.01) -> list[dict]:
    """One row per (length, height, speed): the plant's peaks per phase, their mean and spread,
    the reference's peak and the difference."""
    p = dyn4_params(HUMVEE, dtype=torch.float64)
    fz0, k, c, kt = float(p.Fz0[0]), float(p.k[0]), float(p.damp[0]), tire_stiffness()
    rows = []
    for length in lengths:
        for height in heights:
            for v in speeds:
                peaks = bump_peaks(p, height=height, radius=length / 2, v=v, phases=phases, hdt=hdt)
                ref = quarter_car_peak(v, fz0, k, c, UNSPRUNG, kt, height=height, radius=length / 2)
                mean = float(np.mean(peaks))
                rows.append(dict(length=length, height=height, v=v, peaks=[float(x) for x in peaks], mean=mean,
                                 spread=float((peaks.max() - peaks.min()) / (2 * mean)), reference=ref,
                                 difference=mean / ref - 1))
    return rows


def verdict(rows: list[dict]) -> dict:
    """The rule's two figures: the worst peak difference over every cell, the worst phase spread
    at ``SPREAD_SPEED``, and whether each is within its tolerance."""
    worst = max(abs(r["difference"]) for r in rows)
    spreads = [r["spread"] for r in rows if r["v"] == SPREAD_SPEED]
    spread = max(spreads) if spreads else float("nan")
    return dict(worst_peak=float(worst), peak_met=bool(worst <= PEAK_TOL), worst_spread=float(spread),
                spread_met=bool(spreads) and spread <= SPREAD_TOL)


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speeds", nargs="+", type=cli.float_in(0.5, 60.0), default=list(SPEEDS))
    ap.add_argument("--hdt", type=cli.float_in(1e-4, 0.05), default=0.01, help="the plant's substep [s]")
    ap.add_argument("--json", default=None, help="also write the rows and the verdict here")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    rows = measure(speeds=tuple(args.speeds), hdt=args.hdt)
    print(f"the 14-state plant (M998, float64, substep {args.hdt * 1e3:g} ms) against the two-mass quarter-car; "
          f"peak load over static, the mean over phases {', '.join(f'{x:g}' for x in PHASES)}")
    print("| length | height | speed | plant (per phase) | plant, mean | quarter-car | difference | phase spread |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        per = " / ".join(f"{x:.2f}" for x in r["peaks"])
        print(f"| {r['length']:g} m | {r['height']:g} m | {r['v']:g} m/s | {per} | {r['mean']:.2f} | "
              f"{r['reference']:.2f} | {r['difference']:+.1%} | {r['spread']:.1%} |", flush=True)
    v = verdict(rows)
    print(f"\npeak within {PEAK_TOL:.0%} in every cell: {'met' if v['peak_met'] else 'missed'} "
          f"(worst {v['worst_peak']:.1%}); phase spread at {SPREAD_SPEED:g} m/s within {SPREAD_TOL:.0%}: "
          f"{'met' if v['spread_met'] else 'missed'} (worst {v['worst_spread']:.1%})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(hdt=args.hdt, rows=rows, verdict=v), f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
