"""Issue 44, item 3: the eco task's oracle through the differentiable plant
(dyn4_gym/agents/oracle.py, ``eco_oracle``). Its first rollout is the tuned DP speed plan it
starts from, measured as the harness measures it; it burns less fuel than that plan within the
budget on a short course; the sequence it keeps replays, open loop through the harness's own
evaluation, to the litres it reports, in the budget. (Its search and checkpoints are the race
oracle's, ``_descend``: tests/test_oracle_issue44.py resumes one.)"""

import numpy as np
import pytest
import torch

import dyn4_gym
from dyn4_gym.agents.evaluation import evaluate, task_metric
from dyn4_gym.agents.oracle import EcoOracleParams, eco_oracle

# Eco-v2's hills and grade force on a 100 m course with a quarter of its budget: short enough for
# CI, long enough to pull away, climb and coast
SHORT = dict(dyn4_gym.ECO_V2, course=dict(dyn4_gym.ECO_V2["course"], length=100.0), time_budget=11.0)


@pytest.mark.parametrize("bad", [dict(iters=-1), dict(iters=2.0), dict(lr=float("nan")), dict(deadline=-0.1),
                                 dict(w_late=float("inf")), dict(roll_frac=1.5), dict(segment=0), dict(starts=()),
                                 dict(starts=(1,))])
def test_bad_eco_oracle_settings_are_refused(bad):
    with pytest.raises(ValueError, match="EcoOracleParams"):
        EcoOracleParams(**bad)


def test_the_eco_oracle_refuses_a_task_without_pedals_or_budget():
    with pytest.raises(ValueError, match="time budget"):
        eco_oracle([0], task=dyn4_gym.RACE_V1, params=EcoOracleParams(iters=0))


@pytest.mark.slow
def test_the_eco_oracle_beats_the_plan_it_starts_from_and_its_actions_replay():
    seeds = [20_000]  # a validation course
    r = eco_oracle(seeds, task=SHORT, params=EcoOracleParams(iters=1, lr=0.02))  # one step, large enough to tell
    # iteration 0 is the tuned plan as the harness drives it (the clock recomputed from its speeds
    # in torch: the same to rounding)
    assert np.isfinite(r.start_litres[0])
    assert r.history[0]["best"][0] == pytest.approx(r.start_litres[0], rel=1e-7)
    assert r.litres[0] < 0.97 * r.start_litres[0]  # the gradient found a run on 3 % less fuel or better
    assert all(h2["best"][0] <= h1["best"][0] for h1, h2 in zip(r.history, r.history[1:]))  # kept, never lost
    # open loop through the harness: the kept actions arrive within the budget on the reported fuel
    acts = iter(torch.as_tensor(r.actions))
    ev = evaluate(lambda obs: next(acts), dict(SHORT, dtype="float64", engine="torch"), seeds=seeds)
    assert ev.arrival[0] <= SHORT["time_budget"]
    assert task_metric(ev, SHORT["time_budget"])[0] == pytest.approx(r.litres[0], rel=1e-9)


def test_the_recorded_eco_oracle_is_the_reports():
    """docs/eco_v2_oracle.json (``python benchmarks/oracle.py eco_v2``, once on the 16 held-out
    courses): on every course no more fuel than the tuned plan it starts from (to rounding), and that start is
    the report's eco speed plan; the learning report's Eco-v2 entry reads it (the oracle's
    figures, the plan's and every learner's paired gap to it); the 3 % oracle target stays
    Race-v1's."""
    import json
    from pathlib import Path

    from dyn4_gym import cli
    from dyn4_gym.agents.evaluation import EVAL_SEEDS
    from dyn4_gym.agents.stats import iqm

    docs = Path(__file__).resolve().parent.parent / "docs"
    ref = json.loads((docs / "eco_v2_oracle.json").read_text())
    litres, start = (np.array([np.inf if v is None else v for v in ref[k]]) for k in ("litres", "start_litres"))
    assert ref["task"] == "Dyn4HumveeEco-v2" and ref["eval_seeds"] == list(EVAL_SEEDS)
    # its iteration 0 is the start to rounding (the plan's clock recomputed in torch: 1e-9 relative)
    assert np.all(litres <= start * (1.0 + 1e-7)) and ref["held_out"]["iqm"] == pytest.approx(iqm(litres))
    s = cli.strict_json((docs / "learning_summary.json").read_text())["eco_v2"]
    assert s["oracle"]["iqm"] == pytest.approx(iqm(litres)) and s["oracle"]["counted"] == np.isfinite(litres).mean()
    assert s["strong_baseline"]["iqm"] == pytest.approx(iqm(start), rel=1e-6)  # torch here, Numba there: 1e-9
    assert s["strong_baseline"]["vs_oracle"]["gain"] <= 0.0
    assert all("vs_oracle" in v for v in s["target"]["methods"].values()) and "oracle" not in s["target"]
