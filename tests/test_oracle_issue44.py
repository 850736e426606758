"""Issue 44: the race's oracle through the differentiable plant (dyn4_gym/agents/oracle.py). Its
first rollout is the racing-line driver it starts from, measured as the harness measures it; it
beats that driver on a short course; the sequence it keeps replays, open loop through the env's
own step, to the time it reports."""

import numpy as np
import pytest
import torch

import dyn4_gym
from dyn4_gym.agents.oracle import OracleParams, race_oracle
from dyn4_gym.agents.race import RACE_V1_LINE_TUNED, race_core, race_start, run_race_baseline

# Race-v1's corners on a 100 m course: short enough for CI, long enough to corner and brake
SHORT = dict(dyn4_gym.RACE_V1, course=dict(dyn4_gym.RACE_V1["course"], length=100.0))


@pytest.mark.parametrize("bad", [dict(iters=-1), dict(iters=1.5), dict(lr=float("nan")), dict(edge=-1.0),
                                 dict(roll_frac=0.0), dict(slack=0.5), dict(starts=()), dict(starts=(1,)),
                                 dict(segment=0)])
def test_bad_oracle_settings_are_refused(bad):
    with pytest.raises(ValueError, match="OracleParams"):
        OracleParams(**bad)


def test_the_oracle_refuses_the_driver_action():
    with pytest.raises(ValueError, match="acceleration action"):
        race_oracle([0], task=dyn4_gym.ECO, params=OracleParams(iters=0))


@pytest.mark.slow
def test_the_oracle_beats_the_racing_line_it_starts_from_and_its_actions_replay():
    seeds = [20_000]  # a validation course
    r = race_oracle(seeds, task=SHORT, params=OracleParams(iters=2, starts=(RACE_V1_LINE_TUNED,)))
    line = run_race_baseline(seeds, params=RACE_V1_LINE_TUNED, task=SHORT)
    # iteration 0 is the driver as it is, to the step
    assert r.start_time[0] == line.time[0] and np.isfinite(line.time[0])
    assert r.history[0]["best"][0] == line.time[0]
    assert r.time[0] < line.time[0]  # the gradient found a faster run
    assert all(h2["best"][0] <= h1["best"][0] for h1, h2 in zip(r.history, r.history[1:]))  # kept, never lost
    # open loop through the env's own step: the kept actions finish at the reported time, in the corridor
    core = race_core(SHORT)
    state = race_start(core, seeds)
    with torch.no_grad():
        for t in range(r.actions.shape[0]):
            state, _, _, term, _, info = core.step(state, torch.as_tensor(r.actions[t]))
            if bool(term[0]):
                break
    assert bool(info["success"][0]) and not bool(info["out_of_corridor"][0])
    assert (t + 1) * core.cfg.control_dt == pytest.approx(r.time[0])


@pytest.mark.slow
def test_checkpointed_segments_give_the_episodes_gradient_exactly():
    """The rollout's activation checkpointing (OracleParams.segment) changes the memory, not the
    numbers: the loss and both decision variables' gradients are the same to rounding (the
    segments' sums are added in another order)."""
    from dyn4_gym.agents.oracle import _rollout
    from dyn4_gym.agents.race import RacingLine

    task = dict(dyn4_gym.RACE_V1, course=dict(dyn4_gym.RACE_V1["course"], length=60.0))
    core = race_core(task)
    state = race_start(core, [20_000])
    agent = RacingLine(core, RACE_V1_LINE_TUNED)
    agent.plan(state)
    base = dict(agent._t)
    got = []
    for segment in (7, 1000):
        residual = torch.zeros(40, 1, 2, dtype=torch.float64, requires_grad=True)
        scale = torch.zeros(1, base["profile"].shape[1], dtype=torch.float64, requires_grad=True)
        loss, _, _ = _rollout(core, state, agent, base, residual, scale, OracleParams(segment=segment))
        loss.sum().backward()
        got.append((loss.detach(), residual.grad, scale.grad))
    assert float(got[1][1].abs().max()) > 0 and float(got[1][2].abs().max()) > 0
    for a, b in zip(*got):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-15)


@pytest.mark.slow
def test_a_resumed_oracle_goes_on_where_it_stopped():
    """benchmarks/oracle.py's checkpoints: the state ``progress`` hands out after iteration 1, given
    back as ``resume``, gives the same iteration 2 as a run that never stopped, and the history
    carries every iteration."""
    seeds, prm = [20_000], OracleParams(iters=2, starts=(RACE_V1_LINE_TUNED,))
    saved = {}
    whole = race_oracle(seeds, task=SHORT, params=prm,
                        progress=lambda it, best, sec, state: saved.update({it: state}))
    resumed = race_oracle(seeds, task=SHORT, params=prm, resume=saved[1])
    assert [h["iter"] for h in resumed.history] == [0, 1, 2]
    assert resumed.history[2]["best"] == whole.history[2]["best"]
    assert resumed.history[2]["loss"] == pytest.approx(whole.history[2]["loss"], rel=1e-12)
    assert np.array_equal(resumed.actions, whole.actions) and np.array_equal(resumed.time, whole.time)


def test_the_shipped_oracle_times_are_the_benchmarks():
    """The main job reads the oracle's held-out times from the package (``stored_times``): the
    same numbers, course for course, as the runs that made the docs' figures
    (docs/race_oracle.json, docs/race_v1_oracle.json); an unfinished course is inf, an unknown
    task or a seed the run lacks gives None."""
    import json
    import os

    from dyn4_gym.agents.oracle import stored_times

    docs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
    for env_id, name in (("Dyn4HumveeRace-v0", "race_oracle.json"), ("Dyn4HumveeRace-v1", "race_v1_oracle.json")):
        with open(os.path.join(docs, name)) as f:
            ref = json.load(f)
        got = stored_times(env_id, ref["eval_seeds"])
        want = np.array([np.inf if t is None else t for t in ref["times"]])
        assert ref["task"] == env_id and np.array_equal(got, want)
        assert np.array_equal(stored_times(env_id, ref["eval_seeds"][::-1][:3]), want[::-1][:3])
    assert np.isinf(stored_times("Dyn4HumveeRace-v1", [10003])[0])
    assert stored_times("Dyn4HumveeRace-v1", [0]) is None and stored_times("Dyn4HumveeEco-v2", [10000]) is None
