"""Fit a preset's fields to recorded runs (docs/fit.md): the fitted fields with their standard
deviations and what the logs cannot pin, a plot of the fitted car against the recorded traces,
and the env keyword arguments that train on it.

    python -m dyn4_gym.fit run1.csv run2.csv --fields drag_area driveline_efficiency steer_lag
    python -m dyn4_gym.fit acc.csv --preset chrono --fields drag_area --check steer.csv --out runs/fit
    python -m dyn4_gym.fit --chrono acc --check-chrono steer --fields ...   # the bundled Chrono runs

Writes ``<out>/fit.json`` (fitted fields, sd, correlation, residual RMS, every log's one-shot
position RMS before and after, the env kwargs), ``<out>/env_kwargs.json`` (``gym.make(id,
**kwargs)``, or ``--env-kwargs "$(cat <out>/env_kwargs.json)"`` for the training scripts) and
``<out>/fit.png`` (with matplotlib).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

import numpy as np

from .. import cli
from ..plant.presets import PRESETS
from .core import FitConfig, fit, simulate
from .fields import POWERTRAIN_FIELDS, SPEC_FIELDS, make_fields
from .logs import LogError, read_log
from .chrono import CHRONO_RUNS, chrono_log


def parse_args(argv=None):
    ap = cli.Parser(prog="python -m dyn4_gym.fit", description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="*", help="CSV logs to fit to (docs/fit.md gives the columns)")
    ap.add_argument("--chrono", nargs="*", choices=CHRONO_RUNS, default=[],
                    help="bundled Chrono HMMWV runs to fit to (positions only)")
    ap.add_argument("--check", nargs="*", default=[], help="CSV logs to test the fitted car on (not fitted)")
    ap.add_argument("--check-chrono", nargs="*", choices=CHRONO_RUNS, default=[],
                    help="bundled Chrono runs to test on (not fitted)")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="m998", help="the car the fit starts from")
    ap.add_argument("--fields", nargs="+", required=True,
                    help=f"fields to fit: spec {SPEC_FIELDS} or powertrain {POWERTRAIN_FIELDS}")
    ap.add_argument("--mu", type=cli.float_in(0.05, 3.0), default=0.8, help="friction of the runs' level ground")
    ap.add_argument("--segment", type=cli.float_in(0.05, 1e4), default=FitConfig.segment,
                    help="[s] shooting segment")
    ap.add_argument("--bounds", type=cli.json_object, default={}, help='JSON: field -> [lo, hi] in its units')
    ap.add_argument("--priors", type=cli.json_object, default={}, help='JSON: field -> [mean, sd] in its units')
    ap.add_argument("--noise", type=cli.json_object, default={}, help='JSON: output -> noise scale in its units')
    ap.add_argument("--rounds", type=cli.int_in(1, 100), default=FitConfig.rounds)
    ap.add_output("--out", "runs/fit")
    args = ap.parse_args(argv)
    if not args.logs and not args.chrono:
        ap.fail("logs", "give at least one log to fit to (a CSV, or --chrono NAME)")
    for path in args.logs + args.check:
        ap.check_file("logs", path)
    try:
        args.config = FitConfig(mu=args.mu, segment=args.segment, bounds=args.bounds, priors=args.priors,
                                noise=args.noise, rounds=args.rounds)
    except ValueError as exc:
        ap.fail("--segment/--noise", str(exc))
    spec, pt = PRESETS[args.preset]
    try:
        make_fields(args.fields, spec, pt, args.bounds, args.priors)
    except ValueError as exc:
        ap.fail("--fields", str(exc))
    return args


def _load(paths, chrono) -> list:
    try:
        return [read_log(p) for p in paths] + [chrono_log(n) for n in chrono]
    except LogError as exc:
        raise cli.UsageError(str(exc)) from None


def position_rms(log, pred: dict) -> float | None:
    """[m] one-shot position RMS of a prediction against a log with positions (None without)."""
    if "x" not in log.outputs or "y" not in log.outputs:
        return None
    d = np.hypot(pred["x"] - log.outputs["x"], pred["y"] - log.outputs["y"])
    d = d[np.isfinite(d)]
    return float(np.sqrt(np.mean(d * d)))


def _plot(path, rows, start, fitted, mu):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outs = [o for o in ("speed", "yaw_rate", "yaw", "ay") if any(o in lg.outputs for lg, _ in rows)]
    fig, axes = plt.subplots(len(rows), 1 + len(outs), figsize=(4 * (1 + len(outs)), 3.2 * len(rows)), squeeze=False)
    for ax_row, (lg, role) in zip(axes, rows):
        a = simulate(lg, *start, mu=mu)
        b = simulate(lg, *fitted, mu=mu)
        ax = ax_row[0]
        if "x" in lg.outputs and "y" in lg.outputs:
            ax.plot(lg.outputs["x"], lg.outputs["y"], "k.", ms=1.5, label="recorded")
            ax.plot(a["x"], a["y"], "C0--", lw=1, label="preset")
            ax.plot(b["x"], b["y"], "C1-", lw=1, label="fitted")
            ax.set_aspect("equal", "datalim")
        ax.set_title(f"{lg.name} ({role}): path [m]")
        ax.legend(fontsize=7)
        for axo, o in zip(ax_row[1:], outs):
            if o in lg.outputs:
                axo.plot(lg.time, lg.outputs[o], "k.", ms=1.5)
            axo.plot(lg.time, a[o], "C0--", lw=1)
            axo.plot(lg.time, b[o], "C1-", lw=1)
            axo.set_title(f"{o} over time [s]")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@cli.script
def main(argv=None):
    args = parse_args(argv)
    cli.require("matplotlib", "the fit's plot")
    logs = _load(args.logs, args.chrono)
    checks = _load(args.check, args.check_chrono)
    spec, pt = PRESETS[args.preset]
    os.makedirs(args.out, exist_ok=True)
    print(f"fitting {', '.join(args.fields)} of preset {args.preset!r} to {len(logs)} log(s) "
          f"({sum(lg.duration for lg in logs):.1f} s); the plant's float64 gradients, L-BFGS", flush=True)
    t0 = time.perf_counter()

    def progress(rnd, evals, cost):
        sys.stdout.write(f"\r  round {rnd + 1}, evaluation {evals}: cost {cost:.6g}  ({time.perf_counter() - t0:.0f} s)")
        sys.stdout.flush()

    try:
        res = fit(logs, spec, pt, args.fields, args.config, progress=progress)
    except ValueError as exc:  # a LogError or a field the fit refuses
        raise cli.UsageError(str(exc)) from None
    print()
    print(f"{'field':38s} {'preset':>12s} {'fitted':>12s} {'sd':>10s}")
    for k in res.values:
        print(f"{k:38s} {res.start[k]:12.6g} {res.values[k]:12.6g} {res.sd[k]:10.3g}"
              + ("   not identified: " + res.unidentified[k] if k in res.unidentified else ""))
    rows = [(lg, "fitted to") for lg in logs] + [(lg, "check") for lg in checks]
    kwargs = res.env_kwargs(args.preset)  # the identified fields: the car an env drives
    car = (spec.replace(**kwargs.get("vehicle", {})), dataclasses.replace(pt, **kwargs.get("powertrain", {})))
    one_shot = {}
    for lg, role in rows:
        before = position_rms(lg, simulate(lg, spec, pt, mu=args.mu))
        after = position_rms(lg, simulate(lg, *car, mu=args.mu))
        one_shot[lg.name] = {"role": role, "position_rms_preset": before, "position_rms_fitted": after}
        if before is not None:
            print(f"{lg.name} ({role}): one-shot position RMS {before:.3f} m with the preset, {after:.3f} m with the "
                  "fitted car (its identified fields)")
    summary = dict(res.as_dict(), preset=args.preset, one_shot=one_shot, env_kwargs=kwargs, mu=args.mu)
    cli.write_json(os.path.join(args.out, "fit.json"), summary, indent=1)
    cli.write_json(os.path.join(args.out, "env_kwargs.json"), kwargs)
    print(f"fitted in {res.wall_s:.1f} s ({res.evaluations} evaluations, {res.rounds} rounds); wrote "
          f"{args.out}/fit.json and env_kwargs.json")
    try:
        _plot(os.path.join(args.out, "fit.png"), rows, (spec, pt), car, args.mu)
        print(f"wrote {args.out}/fit.png")
    except ImportError:
        print("no plot: matplotlib is not installed (pip install 'dyn4-gym[plot]')")
    return summary


if __name__ == "__main__":
    main()
