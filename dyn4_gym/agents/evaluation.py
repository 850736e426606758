"""Evaluation on a fixed, held-out set of seeds: the figures every comparison reports.

One batch row per seed, run until each row's episode ends (no resets), with a deterministic
policy ``obs (B, 30) -> action (B, 2)`` in ``[-1, 1]`` (``(B, 32) -> (B, 3)`` with
``action="driver"``, which also reports fuel in litres per 100 km).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..envs import EnvConfig, TaskCore
from ..envs.inputs import check_actions
from ..model.state import DYN4
from .stats import iqm

__all__ = ["EVAL_SEEDS", "VALIDATION_SEEDS", "Evaluation", "evaluate", "counted_litres", "task_metric", "task_score",
           "task_figures"]

EVAL_SEEDS = tuple(range(10_000, 10_016))  # held out: training draws from seeds below 10,000
# for choosing settings (sweeps, early stopping): never the evaluation seeds, never training's
VALIDATION_SEEDS = tuple(range(20_000, 20_016))


@dataclass
class Evaluation:
    mean_return: float
    finished: float  # share of courses completed
    mean_speed: float  # [m/s] over the time driven
    cross_track_rms: float  # [m]
    energy_per_km: float  # [kJ/km] positive drive work per kilometre of progress
    time_per_km: float  # [s/km] time driven per kilometre of progress
    returns: np.ndarray
    traces: np.ndarray  # (T, B, 2) positions, NaN after a row's episode ended
    courses: np.ndarray  # (B, N, 2)
    energy: np.ndarray  # (T, B) cumulative positive drive work [kJ]
    terms: dict | None = None  # reward term -> its episode sum, averaged over the seeds (unweighted)
    books: dict | None = None  # books line -> its episode sum [J], averaged over the seeds
    litres_per_100km: float | None = None  # fuel per distance of progress (action="driver" only)
    arrival: np.ndarray | None = None  # [s] per seed: when its course was finished (inf: not finished)
    litres: np.ndarray | None = None  # [L/100 km] per seed, fuel per distance of progress (driver only)

    def row(self) -> dict:
        out = dict(mean_return=self.mean_return, finished=self.finished, mean_speed=self.mean_speed,
                   cross_track_rms=self.cross_track_rms, energy_per_km=self.energy_per_km, time_per_km=self.time_per_km)
        if self.litres_per_100km is not None:
            out["litres_per_100km"] = self.litres_per_100km
        return out


def _policy_actions(action, n: int, core: TaskCore) -> np.ndarray:
    """The policy's output as the ``(n, width)`` float64 actions the env takes, or ``ValueError``
    saying what the policy returned and what this env's action is (the faces' own check)."""
    if isinstance(action, torch.Tensor):
        action = action.detach().cpu()
    try:
        return check_actions(action, n, core.n_action, name="the policy's action")
    except ValueError as exc:
        raise ValueError(f"{exc} (this env's action is {core.cfg.action!r}: {core.n_action} entries per row; "
                         "a policy trained on the other action interface does not fit)") from None


@torch.no_grad()
def evaluate(policy, env_kwargs: dict | None = None, seeds=EVAL_SEEDS, max_steps: int | None = None) -> Evaluation:
    """Run ``policy`` on one row per seed until each episode ends (or ``max_steps``).

    The task runs on the env's engine (``env_kwargs["engine"]``; "auto": the Numba kernel on the
    CPU), so an evaluation costs what the policy costs; both engines give the same figures (to
    1e-9 in float64, tests/test_agents.py). The policy sees float32 observations as torch tensors.
    """
    from ..envs.engines import make_engine

    cfg = EnvConfig.from_dict(dict(env_kwargs or {}))
    core = TaskCore(cfg)
    eng = make_engine(core)
    n = len(seeds)
    state = eng.new_state(np.asarray(seeds, dtype=np.int64), np.zeros(n, dtype=np.int64))
    obs = eng.observe(state)
    steps = cfg.episode_steps if max_steps is None else max_steps
    alive = np.ones(n, dtype=bool)
    ret, dist, work, ct2, speed, count = (np.zeros(n) for _ in range(6))
    success = np.zeros(n, dtype=bool)
    arrival = np.full(n, np.inf)
    x = eng.task_state(state).x
    traces, energy = [x[:, DYN4.X:DYN4.Y + 1].double().numpy().copy()], [np.zeros(n)]
    terms, books = {}, {}
    for _ in range(steps):
        action = _policy_actions(policy(torch.as_tensor(obs, device=core.device)), n, core)
        state, obs, r, term, trunc, raw = eng.step(state, action)
        info = eng.info(raw)
        x = eng.task_state(state).x.double().numpy()
        a = alive.astype(np.float64)
        ret += r * a
        dist += info["progress"] * a
        work += np.maximum(info["books"]["supplied"], 0.0) * a
        ct2 += info["cross_track"] ** 2 * a
        speed += x[:, DYN4.VX] * a
        count += a
        arrival[info["success"] & alive] = count[info["success"] & alive] * cfg.control_dt
        success |= info["success"] & alive
        for acc, group in ((terms, "reward_terms"), (books, "books")):
            for k, v in info[group].items():
                acc[k] = acc.get(k, 0.0) + np.asarray(v, dtype=np.float64) * a
        pos = x[:, DYN4.X:DYN4.Y + 1].copy()
        pos[~alive] = np.nan  # rows already finished before this step are not drawn on
        alive &= ~(term | trunc)
        traces.append(pos)
        energy.append(work / 1e3)
        if not alive.any():
            break
    km = np.maximum(dist, 1.0) / 1000.0
    litres = None
    if core.driver:  # fuel energy -> litres with the powertrain's fuel data, per 100 km of progress
        litres = books["fuel"] / (core.pt.fuel_lhv * core.pt.fuel_density) / km * 100.0
    courses = eng.task_state(state).course_xy.double().numpy()
    return Evaluation(
        mean_return=float(ret.mean()), finished=float(success.mean()),
        mean_speed=float((speed / np.maximum(count, 1)).mean()),
        cross_track_rms=float(np.sqrt(ct2.sum() / max(count.sum(), 1.0))),
        energy_per_km=float((work / 1e3 / km).mean()), time_per_km=float((count * cfg.control_dt / km).mean()),
        returns=ret, traces=np.stack(traces),
        courses=courses, energy=np.stack(energy),
        terms={k: float(v.mean()) for k, v in terms.items()}, books={k: float(v.mean()) for k, v in books.items()},
        litres_per_100km=None if litres is None else float(litres.mean()), arrival=arrival, litres=litres)


def counted_litres(arrival, litres, time_budget: float) -> np.ndarray:
    """The eco task's metric per course: litres per 100 km where the car arrived within
    ``time_budget`` [s], ``inf`` where it did not count (late, or never arrived)."""
    arrival = np.asarray(arrival, dtype=np.float64)
    return np.where(arrival <= time_budget, np.asarray(litres, dtype=np.float64), np.inf)


def task_metric(ev: Evaluation, time_budget: float | None) -> np.ndarray:
    """Per course, the metric of the tasks at the limits (docs/env.md; lower is better): with a
    ``time_budget`` [s] (the eco task), litres per 100 km where the car arrived within it
    (:func:`counted_litres`); without (the race), the time to finish [s]. ``inf`` where a course
    does not count (not finished, or late)."""
    if time_budget is None:
        return np.asarray(ev.arrival, dtype=np.float64)
    if ev.litres is None:
        raise ValueError("a time budget's metric is litres per 100 km: the env needs action='driver'")
    return counted_litres(ev.arrival, ev.litres, time_budget)


def task_figures(ev: Evaluation, time_budget: float | None) -> dict:
    """The task's own figures as the docs' result tables give them (docs/results.md), for one deterministic run over
    its courses: the metric per course (:func:`task_metric`; ``inf`` where a course does not
    count), the share that counts and its IQM, each with rliable's stratified bootstrap 95 %
    interval over the courses (:func:`~.stats.bootstrap_ci`). A time budget's metric needs
    fuel (``action="driver"``); without fuel a budget's figure is the time to finish."""
    from .stats import bootstrap_ci, finish_rate

    fuel = time_budget is not None and ev.litres is not None
    per_course = task_metric(ev, time_budget if fuel else None)
    return dict(metric="fuel at arrival within the budget" if fuel else "time to finish",
                unit="L/100 km" if fuel else "s", counts="in budget" if fuel else "finished",
                time_budget=time_budget, per_course=per_course.tolist(), counted=finish_rate(per_course),
                counted_ci95=list(bootstrap_ci(per_course, stat=finish_rate)), iqm=iqm(per_course),
                ci95=list(bootstrap_ci(per_course)))


def task_score(per_course) -> float:
    """One finite number, higher is better, that orders evaluations as the tasks at the limits
    rank them, for schedulers that compare scalars (Ray's ASHA takes no ``inf``): any finite IQM
    of ``per_course`` beats every infinite one (more than a quarter of the courses uncounted);
    finite ones score ``1 + 1 / (1 + IQM)`` (in (1, 2], the lower IQM the higher); infinite ones
    score the share of courses that counted (in [0, 1))."""
    m = np.asarray(per_course, dtype=np.float64).ravel()
    if np.isnan(m).any() or (m < 0).any():
        raise ValueError("task_score takes metrics >= 0 (inf for a course that does not count), no NaN")
    q = iqm(m)
    return 1.0 + 1.0 / (1.0 + q) if np.isfinite(q) else float(np.isfinite(m).mean())
