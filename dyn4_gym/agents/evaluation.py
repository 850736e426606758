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

__all__ = ["EVAL_SEEDS", "Evaluation", "evaluate"]

EVAL_SEEDS = tuple(range(10_000, 10_016))  # held out: training draws from seeds below 10,000


@dataclass
class Evaluation:
    mean_return: float
    finished: float  # share of courses completed
    mean_speed: float  # [m/s] over the time driven
    cross_track_rms: float  # [m]
    energy_per_km: float  # [kJ/km] positive drive work per kilometre of progress
    returns: np.ndarray
    traces: np.ndarray  # (T, B, 2) positions, NaN after a row's episode ended
    courses: np.ndarray  # (B, N, 2)
    energy: np.ndarray  # (T, B) cumulative positive drive work [kJ]
    terms: dict | None = None  # reward term -> its episode sum, averaged over the seeds (unweighted)
    books: dict | None = None  # books line -> its episode sum [J], averaged over the seeds
    litres_per_100km: float | None = None  # fuel per distance of progress (action="driver" only)

    def row(self) -> dict:
        out = dict(mean_return=self.mean_return, finished=self.finished, mean_speed=self.mean_speed,
                   cross_track_rms=self.cross_track_rms, energy_per_km=self.energy_per_km)
        if self.litres_per_100km is not None:
            out["litres_per_100km"] = self.litres_per_100km
        return out


@torch.no_grad()
def evaluate(policy, env_kwargs: dict | None = None, seeds=EVAL_SEEDS, max_steps: int | None = None) -> Evaluation:
    cfg = EnvConfig.from_dict(dict(env_kwargs or {}))
    core = TaskCore(cfg)
    n = len(seeds)
    state, obs = core.reset(torch.tensor(seeds, dtype=torch.long), torch.zeros(n, dtype=torch.long))
    steps = cfg.episode_steps if max_steps is None else max_steps
    alive = torch.ones(n, dtype=torch.bool)
    ret = torch.zeros(n, dtype=torch.float64)
    dist = torch.zeros(n, dtype=torch.float64)
    work = torch.zeros(n, dtype=torch.float64)
    ct2 = torch.zeros(n, dtype=torch.float64)
    speed = torch.zeros(n, dtype=torch.float64)
    count = torch.zeros(n, dtype=torch.float64)
    success = torch.zeros(n, dtype=torch.bool)
    traces, energy = [state.x[:, :2].double().numpy()], [np.zeros(n)]
    terms, books = {}, {}
    for _ in range(steps):
        action = policy(obs).to(core.dtype)
        state, obs, r, term, trunc, info = core.step(state, action)
        a = alive.double()
        ret += r.double() * a
        dist += info["progress"].double() * a
        work += info["books"]["supplied"].double().clamp_min(0.0) * a
        ct2 += info["cross_track"].double() ** 2 * a
        speed += state.x[:, 3].double() * a
        count += a
        success |= info["success"] & alive
        for acc, group in ((terms, "reward_terms"), (books, "books")):
            for k, v in info[group].items():
                acc[k] = acc.get(k, 0.0) + v.double() * a
        pos = state.x[:, :2].double().numpy().copy()
        pos[~alive.numpy()] = np.nan  # rows already finished before this step are not drawn on
        alive &= ~(term | trunc)
        traces.append(pos)
        energy.append(work.numpy() / 1e3)
        if not alive.any():
            break
    km = dist.clamp_min(1.0) / 1000.0
    litres = None
    if core.driver:  # fuel energy -> litres with the powertrain's fuel data, per 100 km of progress
        fuel_l = books["fuel"] / (core.pt.fuel_lhv * core.pt.fuel_density)
        litres = float((fuel_l / km * 100.0).mean())
    return Evaluation(
        mean_return=float(ret.mean()), finished=float(success.double().mean()),
        mean_speed=float((speed / count.clamp_min(1)).mean()),
        cross_track_rms=float(torch.sqrt(ct2.sum() / count.sum().clamp_min(1))),
        energy_per_km=float((work / 1e3 / km).mean()), returns=ret.numpy(), traces=np.stack(traces),
        courses=state.course_xy.double().numpy(), energy=np.stack(energy),
        terms={k: float(v.mean()) for k, v in terms.items()}, books={k: float(v.mean()) for k, v in books.items()},
        litres_per_100km=litres)
