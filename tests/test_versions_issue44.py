"""Issue 44: every task over terrain has a version with the grade force on, and the race where
cornering decides, ``Dyn4HumveeRace-v1``, with its design gate: the floored straight-line
reference is at least 20 % faster than the strongest classical driver on every held-out course."""

import json
import os
import warnings

import gymnasium as gym
import numpy as np
import pytest

import dyn4_gym
from dyn4_gym.agents.race import HUMVEE_ENVELOPE

NEW = {"Dyn4Humvee-v2": "Dyn4Humvee-v1", "Dyn4HumveeDriver-v2": "Dyn4HumveeDriver-v1",
       "Dyn4HumveeEco-v2": "Dyn4HumveeEco-v1", "Dyn4HumveeRace-v1": "Dyn4HumveeRace-v0"}
DOCS = os.path.join(os.path.dirname(__file__), "..", "docs")


def _core(env_id):
    return gym.make(env_id).unwrapped._runner.core


@pytest.mark.parametrize("new, old", sorted(NEW.items()))
def test_the_new_versions_have_the_grade_force_and_the_old_ones_are_out_of_date(new, old):
    """The new id's plant applies the slopes' reaction, the old id's does not (unchanged), and
    Gymnasium warns that the old one is out of date when it is made."""
    assert _core(new).p.grade_force is True
    assert _core(old).p.grade_force is False
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        gym.make(old)
    assert any("out of date" in str(w.message) for w in got)
    if new != "Dyn4HumveeRace-v1":  # the others are their predecessor with the grade force on
        a, b = dict(gym.spec(new).kwargs), dict(gym.spec(old).kwargs)
        assert a.pop("vehicle") == {"grade_force": True} and b.pop("vehicle", {}) == {} and a == b


def test_hills_now_cost_fuel():
    """Eco-v2 against Eco-v1, the same pedals on the same courses: with the grade force the climbs
    cost the drive, so pure pursuit burns more (measured +11 % on the eco courses, issue 44)."""
    from dyn4_gym.agents.classical import PurePursuit
    from dyn4_gym.agents.evaluation import evaluate

    seeds = (20_000, 20_001)
    litres = {}
    for env_id in ("Dyn4HumveeEco-v1", "Dyn4HumveeEco-v2"):
        kw = dict(gym.spec(env_id).kwargs, dtype="float64")
        litres[env_id] = evaluate(PurePursuit.for_env(kw), kw, seeds=seeds).litres
    assert np.all(litres["Dyn4HumveeEco-v2"] > 1.03 * litres["Dyn4HumveeEco-v1"])


def test_race_v1_is_a_longer_twistier_race_with_a_preview_for_braking():
    """1 km, corners down to 16.7 m radius, the preview reaching past the braking distance from
    30 m/s to the corner speed on the lowest friction, a crash costing ten seconds; it passes
    Gymnasium's checker."""
    from gymnasium.utils.env_checker import check_env

    env = gym.make("Dyn4HumveeRace-v1")
    check_env(env.unwrapped, skip_render_check=True)
    cfg = env.unwrapped._runner.core.cfg
    c = cfg.course
    assert c.length == 1000.0 and cfg.target_speed**2 / c.lat_accel == pytest.approx(16.67, abs=0.01)
    mu_low = cfg.ground.patch_mu_min
    v_corner = np.sqrt(HUMVEE_ENVELOPE.lateral(mu_low) / (c.lat_accel / cfg.target_speed**2))
    braking = (30.0**2 - v_corner**2) / (2 * HUMVEE_ENVELOPE.braking(mu_low))
    assert max(c.preview) >= braking and c.preview_friction
    w = cfg.reward_weights
    assert w["termination"] == 100.0 and w["time"] == 1.0 and w["progress"] == 1.0
    assert env.spec.max_episode_steps == 2400


def test_the_design_gate_holds_on_every_held_out_course():
    """docs/race_v1_line_baseline.json (benchmarks/baselines.py race_v1_line): the racing line,
    tuned on the validation courses, finishes each held-out course no sooner than 1.25 times the
    floored straight-line reference over the course's length (the reference >= 20 % faster)."""
    with open(os.path.join(DOCS, "race_v1_line_baseline.json")) as fh:
        out = json.load(fh)
    times = np.array([np.inf if t is None else t for t in out["held_out"]["times"]])
    assert len(times) == 16 and out["task"] == "Dyn4HumveeRace-v1"
    assert np.all(out["straight_line_time"] <= 0.8 * times)
    from dyn4_gym.agents.race import RACE_V1_LINE_TUNED

    assert out["chosen"] == {k: getattr(RACE_V1_LINE_TUNED, k) for k in out["chosen"]}


@pytest.mark.slow
def test_the_recorded_gate_is_what_the_code_measures():
    """The straight-line reference and two held-out courses of the tuned racing line, measured
    again, are the figures docs/race_v1_line_baseline.json records."""
    from dyn4_gym.agents.race import RacingLineParams, run_race_baseline, straight_line_time

    with open(os.path.join(DOCS, "race_v1_line_baseline.json")) as fh:
        out = json.load(fh)
    assert straight_line_time(task=dyn4_gym.RACE_V1) == pytest.approx(out["straight_line_time"], abs=1e-9)
    seeds = out["eval_seeds"][:2]
    r = run_race_baseline(seeds, params=RacingLineParams(**out["chosen"]), task=dyn4_gym.RACE_V1)
    assert r.time.tolist() == pytest.approx(out["held_out"]["times"][:2], abs=1e-9)
